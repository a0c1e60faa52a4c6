//go:build linux

package fleetup

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestProcessesWithEnv finds a process left with a CODEX_HOME inside the
// fleet's folder, as Codex's app-server daemons are, and not one with a
// CODEX_HOME elsewhere.
func TestProcessesWithEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agents")
	start := func(home string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), "CODEX_HOME="+home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	ours := start(filepath.Join(dir, "bob", "codex"))
	other := start(dir + "-elsewhere")
	got := ProcessesWithEnv("CODEX_HOME", dir)
	if !slices.Contains(got, ours.Process.Pid) {
		t.Errorf("ProcessesWithEnv = %v; want it to hold %d", got, ours.Process.Pid)
	}
	if slices.Contains(got, other.Process.Pid) {
		t.Errorf("ProcessesWithEnv = %v; holds %d, whose CODEX_HOME is elsewhere", got, other.Process.Pid)
	}
}
