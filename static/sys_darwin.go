package static

import (
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const noSymlinks = 0

// openat2 is Linux's: macOS has none, and os.Root keeps each lookup
// beneath the directory instead (New probes this and finds ENOSYS).
func openat2(dirfd int, rel string, resolve uint64) (int, error) { return -1, unix.ENOSYS }

// pathBufs are F_GETPATH's buffers. They live on the heap, which the
// garbage collector does not move: the kernel is handed the address as an
// integer, and a buffer on the goroutine's stack could move under it.
var pathBufs = sync.Pool{New: func() any { return new([unix.PathMax]byte) }}

// fdPath is the path of the file open at fd (fcntl F_GETPATH).
func fdPath(fd int) (string, error) {
	buf := pathBufs.Get().(*[unix.PathMax]byte)
	defer pathBufs.Put(buf)
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETPATH, int(uintptr(unsafe.Pointer(buf))))
	runtime.KeepAlive(buf)
	if err != nil {
		return "", err
	}
	return unix.ByteSliceToString(buf[:]), nil
}
