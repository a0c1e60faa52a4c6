//go:build linux

package fleetstate

import (
	"os"
	"syscall"
	"unsafe"
)

// noFollowSupported reports whether openNoFollow can work at all; the
// kernel may still refuse openat2 (before Linux 5.6, or under a seccomp
// filter), and then every call falls back.
const noFollowSupported = true

const (
	sysOpenat2        = 437 // the same number on every Linux architecture
	resolveNoSymlinks = 0x04
)

// openHow is struct open_how of openat2(2).
type openHow struct {
	flags   uint64
	mode    uint64
	resolve uint64
}

// openNoFollow opens path for reading, failing (ELOOP) if any component of
// it is a symbolic link. O_NONBLOCK keeps the open of a FIFO from waiting
// for a writer; on a regular file it changes nothing.
func openNoFollow(path string) (*os.File, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	how := openHow{
		flags:   uint64(syscall.O_RDONLY | syscall.O_CLOEXEC | syscall.O_NOCTTY | syscall.O_NONBLOCK),
		resolve: resolveNoSymlinks,
	}
	dirfd := -100 // AT_FDCWD: path is absolute anyway
	for {
		fd, _, errno := syscall.Syscall6(sysOpenat2, uintptr(dirfd),
			uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return nil, &os.PathError{Op: "openat2", Path: path, Err: errno}
		}
		return os.NewFile(fd, path), nil
	}
}
