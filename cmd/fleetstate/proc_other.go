//go:build !unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

func detach(cmd *exec.Cmd) {}

func exitedChild(pid int) bool { return false }

func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p != nil
}

func signalTree(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
