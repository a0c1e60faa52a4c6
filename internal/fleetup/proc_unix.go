//go:build unix

package fleetup

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// detach makes cmd a session of its own, so that it outlives the command
// that started it and no signal of that command's terminal reaches it.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// exitedChild reports whether the child pid has exited, reaping it if so,
// without waiting.
func exitedChild(pid int) bool {
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return got == pid || errors.Is(err, syscall.ECHILD)
}

// Alive reports whether the process pid runs. A zombie (ended, not yet
// reaped by its parent) does not: where /proc says so, it counts as gone.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// The state follows the command's name in parentheses.
		s := string(data)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			return s[i+2] != 'Z'
		}
	}
	return true
}

// SignalTree sends sig to the process group pid leads (a pane's command
// leads its own) and to pid itself.
func SignalTree(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
	_ = syscall.Kill(pid, sig)
}

// ProcessesWithEnv returns the processes of this user whose environment
// sets name to a path inside dir, as far as /proc shows them (Linux); none
// elsewhere. down finds with it the daemons that Codex starts on its own
// (codex app-server, whose parent is then 1) and that outlive the pane.
func ProcessesWithEnv(name, dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	prefix := []byte(name + "=")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // another user's, or gone
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, string(prefix)); ok {
				if v == dir || strings.HasPrefix(v, dir+string(os.PathSeparator)) {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}
