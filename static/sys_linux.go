package static

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// noSymlinks is openat2's resolve flag that refuses a symlink on the way.
const noSymlinks = unix.RESOLVE_NO_SYMLINKS

// openat2 opens rel for reading beneath dirfd, in the kernel (Linux 5.6),
// with resolve's flags besides.
func openat2(dirfd int, rel string, resolve uint64) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | resolve,
	}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// fdPath is the path of the file open at fd.
func fdPath(fd int) (string, error) { return os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)) }
