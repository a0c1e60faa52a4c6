//go:build !unix

package fleetup

import (
	"os"
	"os/exec"
	"syscall"
)

// detach does nothing where there are no sessions to detach from.
func detach(cmd *exec.Cmd) {}

// exitedChild cannot tell without waiting: it says no.
func exitedChild(pid int) bool { return false }

// Alive reports whether the process pid can be found.
func Alive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p != nil
}

// SignalTree kills the process pid, whatever sig is.
func SignalTree(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// ProcessesWithEnv finds nothing where there is no /proc to read.
func ProcessesWithEnv(name, dir string) []int { return nil }
