//go:build !unix

package fleetup

import (
	"os"
	"os/exec"
	"syscall"
)

// detach makes cmd a session of its own.
func detach(cmd *exec.Cmd) {}

func exitedChild(pid int) bool { return false }

func Alive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p != nil
}

func SignalTree(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
