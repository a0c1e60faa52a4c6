//go:build unix

package procgroup

import (
	"os"
	"os/exec"
	"syscall"
)

// Own makes cmd, when started, lead a process group of its own, which the
// processes it starts join unless they leave it.
func Own(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// Kill kills, with SIGKILL, the process group that p leads (see Own),
// and p itself, had it left its group.
func Kill(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
