package static

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

const noSymlinks = 0

// openat2 is Linux's: macOS has none, and os.Root keeps each lookup
// beneath the directory instead (New probes this and finds ENOSYS).
func openat2(dirfd int, rel string, resolve uint64) (int, error) { return -1, unix.ENOSYS }

// fdPath is the path of the file open at fd (fcntl F_GETPATH).
func fdPath(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETPATH, int(uintptr(unsafe.Pointer(&buf[0]))))
	runtime.KeepAlive(buf)
	if err != nil {
		return "", err
	}
	for i, b := range buf {
		if b == 0 {
			return string(buf[:i]), nil
		}
	}
	return string(buf), nil
}

// canonicalDir is dir as fdPath names the files beneath it: the system's
// spelling, whose case may differ from dir's on a case-insensitive
// volume; "" when it cannot be told.
func canonicalDir(dir string) string {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	real, err := fdPath(fd)
	if err != nil {
		return ""
	}
	return real
}
