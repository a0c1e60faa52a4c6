//go:build !unix

package procgroup

import (
	"os"
	"os/exec"
)

// Own does nothing where there are no process groups.
func Own(*exec.Cmd) {}

// Kill kills p alone.
func Kill(p *os.Process) { _ = p.Kill() }
