package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// TestNotifyBoundKillsWhatHoldsThePipes: a notification command that
// leaves a child holding its standard error, whether it waits for that
// child or exits at once, keeps its slot no longer than the bound: at the
// bound the child dies with the command's process group, the run ends,
// and a notification after the four slots were taken that way is still
// delivered.
func TestNotifyBoundKillsWhatHoldsThePipes(t *testing.T) {
	const bound = time.Second
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	dir := t.TempDir()
	pids, out := filepath.Join(dir, "pids"), filepath.Join(dir, "delivered")
	// Each run gets one event, a detached ticket's reply: "wait" starts a
	// child and waits for it, "leave" starts one and exits, and anything
	// else is written down.
	command := `ev=$(cat)
case "$ev" in
*'"wait '*) sleep 40 & echo $! >> ` + pids + `; wait ;;
*'"leave '*) sleep 40 & echo $! >> ` + pids + ` ;;
*) printf '%s\n' "$ev" >> ` + out + ` ;;
esac`
	var logs logBuffer
	cfg := daemon.Config{Dir: store.Dir(), Notify: command, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	daemon.SetNotifyBound(&cfg, bound)
	_, url := embed(t, cfg)
	t.Cleanup(func() {
		// Before the daemon closes (cleanups run last first): the
		// children of commands that outlived their bound, which the
		// daemon's close would wait for.
		for _, pid := range readPIDs(t, pids) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lead, scout := dial(t, ctx, url, tokens["lead"]), dial(t, ctx, url, tokens["scout"])
	finish := func(reply string) {
		t.Helper()
		if _, err := lead.SendDetached(ctx, "scout", "task"); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := scout.Next(ctx, 5*time.Second); err != nil || !ok {
			t.Fatalf("fleet_next: %v, %v; want the task", ok, err)
		}
		if err := scout.Reply(ctx, reply); err != nil {
			t.Fatal(err)
		}
	}
	// Every slot taken by a run whose child holds its pipe.
	for i, kind := range []string{"wait", "leave", "wait", "leave"} {
		finish(fmt.Sprintf("%s %d", kind, i))
	}
	// The runs end at the bound, their slots free before their failures
	// are logged; a run still going is logged by nothing.
	failed := func() int {
		n := 0
		for _, line := range logs.lines() {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "fleetstate: notification command failed" {
				n++
			}
		}
		return n
	}
	if !fleettest.Until(10*bound, 20*time.Millisecond, func() bool { return failed() == 4 }) {
		t.Fatalf("%d of the 4 runs ended within %v of a bound of %v (log %v)", failed(), 10*bound, bound, logs.lines())
	}
	children := readPIDs(t, pids)
	if len(children) != 4 {
		t.Fatalf("the commands started %d children (%v); want 4", len(children), children)
	}
	// SIGKILL is sent at the bound; a loaded machine takes a moment to
	// carry it out.
	for _, pid := range children {
		if !fleettest.Until(5*time.Second, 10*time.Millisecond, func() bool { return !alive(pid) }) {
			t.Errorf("child %d of a command killed at its bound is alive 5s later", pid)
		}
	}
	finish("deliver 5")
	if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool {
		data, _ := os.ReadFile(out)
		return strings.Contains(string(data), "deliver 5")
	}) {
		data, _ := os.ReadFile(out)
		t.Fatalf("notifications delivered: %q; want the reply %q (log %v)", data, "deliver 5", logs.lines())
	}
}

// readPIDs returns the process IDs written to the file path, one a line.
func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %q", data)
		}
		pids = append(pids, pid)
	}
	return pids
}

// alive reports whether process pid runs: it exists and is not a zombie
// waiting for a parent (init, say) to reap it.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: a zombie counts as alive
	}
	// The state follows the command's name, in parentheses.
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
