//go:build linux

package fleetup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// TestStopPanesStopsCodexDaemons: Codex starts daemons of its own (codex
// app-server) that leave the pane's process group and outlive the pane.
// down stops every process whose CODEX_HOME is inside the fleet's private
// agents folder, with no pane left to lead to it, and leaves alone one
// whose CODEX_HOME is elsewhere.
func TestStopPanesStopsCodexDaemons(t *testing.T) {
	// StopPanes asks the fleet's tmux server for its panes; the socket
	// names none running, so the record has no pane.
	socket := fleettest.TmuxSocket(t)
	store, err := fleetstate.Open(nil, t.TempDir(), &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(store.PrivatePath("agents"), "bob", "codex")
	if err := os.MkdirAll(ours, 0o700); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "codex")

	// start starts a daemon-like process with CODEX_HOME=home, in a
	// process group of its own, as a daemon that left the pane's; the
	// returned channel closes when it has ended and been reaped.
	start := func(home string) (*exec.Cmd, <-chan struct{}) {
		cmd := exec.Command("sleep", "300")
		cmd.Env = append(os.Environ(), "CODEX_HOME="+home)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			select {
			case <-exited:
			default:
				_ = cmd.Process.Kill()
				<-exited
			}
		})
		return cmd, exited
	}
	codexd, codexdExited := start(ours)
	other, otherExited := start(elsewhere)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := StopPanes(ctx, store, Record{Socket: socket, Session: "fleet"}); err != nil {
		t.Fatalf("StopPanes: %v", err)
	}

	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-codexdExited:
	case <-timer.C:
		t.Errorf("the process %d with CODEX_HOME=%s still runs 10 s after StopPanes returned", codexd.Process.Pid, ours)
	}
	// The other still runs: not reaped, and not a zombie either (Alive
	// counts one, ended but not yet reaped, as gone).
	select {
	case <-otherExited:
	default:
		if Alive(other.Process.Pid) {
			return
		}
	}
	t.Errorf("StopPanes stopped the process %d, whose CODEX_HOME=%s is not the fleet's", other.Process.Pid, elsewhere)
}
