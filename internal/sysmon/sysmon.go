// Package sysmon keeps the Go runtime's system monitor out of its deep
// sleep when the process may run on one CPU only.
//
// The monitor (sysmon, a thread of the runtime's own) sleeps on a futex
// whenever every P is idle, and the next system call or cgo call wakes it:
// a server waiting for each request of one client goes idle between any
// two, and wakes it again on every request. On a single CPU the monitor
// then runs on the serving thread's CPU, twice a request (the wake, and
// its next 20 µs tick before it sleeps again), and each time takes that
// thread off the CPU. With GODEBUG's schedtrace set the monitor never
// sleeps that way: it ticks, every 10 ms once the process is idle. So
// Keep starts the program again with schedtrace at its largest period,
// about 24.8 days; see docs/running.md ("One CPU: the runtime's monitor
// kept awake") for the measurements and the one line the runtime prints
// each period.
package sysmon

import (
	"os"
	"runtime"
	"strings"
	"syscall"
)

// Period is the schedtrace Keep sets, in milliseconds: the largest the
// runtime takes.
const Period = "2147483647"

// godebug returns the GODEBUG value for a process that may run on cpus
// CPUs whose GODEBUG is cur, and whether it differs from cur: schedtrace
// added on one CPU, unless cur names schedtrace itself (schedtrace=0 is
// how a user keeps the runtime's default).
func godebug(cur string, cpus int) (string, bool) {
	if cpus != 1 {
		return cur, false
	}
	for _, f := range strings.Split(cur, ",") {
		if k, _, _ := strings.Cut(f, "="); strings.TrimSpace(k) == "schedtrace" {
			return cur, false
		}
	}
	if strings.TrimSpace(cur) == "" {
		return "schedtrace=" + Period, true
	}
	return cur + ",schedtrace=" + Period, true
}

// Keep starts the program again, as the same process, with schedtrace in
// its GODEBUG when the process may run on one CPU (its affinity, as
// runtime.NumCPU reads it at start) and GODEBUG does not name schedtrace;
// it returns when it does not, or when the exec fails (the program then
// runs as it is). Call it first thing in main, before any goroutine or
// thread of the program's own exists: Linux only.
func Keep() {
	v, ok := godebug(os.Getenv("GODEBUG"), runtime.NumCPU())
	if !ok || runtime.GOOS != "linux" {
		return
	}
	env := []string{"GODEBUG=" + v}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	syscall.Exec("/proc/self/exe", os.Args, env) // returns only on failure
}
