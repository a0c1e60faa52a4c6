//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fsx

import (
	"os"
	"syscall"
)

// TryLock takes an exclusive lock on f if nobody holds one,
// without waiting, and reports whether it did.
func TryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case syscall.EWOULDBLOCK:
			return false, nil
		case syscall.EINTR:
			continue
		}
		return false, err
	}
}
