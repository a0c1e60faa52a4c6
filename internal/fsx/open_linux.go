//go:build linux

package fsx

import (
	"os"

	"golang.org/x/sys/unix"
)

// NoFollowSupported reports whether [OpenNoFollow] can work at all; the
// kernel may still refuse openat2 (before Linux 5.6, or under a seccomp
// filter), and then every call falls back.
const NoFollowSupported = true

// OpenNoFollow opens path for reading, failing (ELOOP) if any component of
// it is a symbolic link. O_NONBLOCK keeps the open of a FIFO from waiting
// for a writer; on a regular file it changes nothing.
func OpenNoFollow(path string) (*os.File, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "openat2", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}
