//go:build unix

package fleettest

import (
	"strconv"
	"syscall"
	"testing"
)

// DeadAddr returns an address of 127.0.0.1, host:port, where nothing
// answers for the rest of the test: a connection to it is refused. The
// port is bound and never listened on, and stays bound until the test
// ends, so that no server another test starts meanwhile takes it (a port
// merely closed again may be handed to the next listener on port 0).
func DeadAddr(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("fleettest: socket: %v", err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("fleettest: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("fleettest: getsockname: %v", err)
	}
	return "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
}
