/* The one declaration of the macOS SDK's <mach/mach_vm.h> that the
 * Prometheus client's process collector calls, for a cross-build with
 * zig's macOS headers, which leave this header out (scripts/wheel). */
#ifndef M0_MACH_VM_H
#define M0_MACH_VM_H
#include <mach/mach_types.h>
#include <mach/vm_region.h>

extern kern_return_t mach_vm_region(vm_map_t target_task, mach_vm_address_t *address, mach_vm_size_t *size,
				    vm_region_flavor_t flavor, vm_region_info_t info,
				    mach_msg_type_number_t *infoCnt, mach_port_t *object_name);
#endif
