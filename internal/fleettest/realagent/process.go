package realagent

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"golang.org/x/sys/unix"
)

// Bounds of the processes.
const (
	// waitDelay bounds the wait for a command's output once it has
	// exited or been killed: a process it left behind may hold its pipes.
	waitDelay = 5 * time.Second
	// reapTimeout bounds the wait for killed processes to be gone.
	reapTimeout = 10 * time.Second
)

// Command returns a command that runs name in a process group of its
// own; when ctx ends, the whole group is killed, and the wait for its
// output is bounded. Give it an environment from [Env] with that of
// [ClaudeHome] or [CodexHome], whose cleanup kills what it leaves behind.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// reap kills every process but this one whose environment holds home, or
// a path under it, as a variable's value (HOME, CODEX_HOME), and waits for
// them to be gone. Only a test's processes have its temporary home.
func reap(tb testing.TB, home string) {
	tb.Helper()
	pids := strays(home)
	for _, pid := range pids {
		unix.Kill(pid, unix.SIGKILL)
	}
	if !fleettest.Until(reapTimeout, 20*time.Millisecond, func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	}) {
		tb.Errorf("processes %v with HOME %s outlived SIGKILL by %v", pids, home, reapTimeout)
	}
}

// strays returns the processes but this one whose environment holds home
// or a path under it.
func strays(home string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	want := []byte("=" + filepath.Clean(home))
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			i := bytes.Index(kv, want)
			if i < 0 || bytes.IndexByte(kv, '=') != i {
				continue
			}
			if rest := kv[i+len(want):]; len(rest) == 0 || rest[0] == '/' {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// alive reports whether pid is a process that has not exited; a zombie,
// whose parent has yet to wait for it, has.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command's name, in parentheses that may
	// themselves hold parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
