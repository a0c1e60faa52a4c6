package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agentconf"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleetup"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// newUpFleet writes a fleet file of agents on a private tmux socket, in a
// test directory; the test's cleanup brings the fleet down and kills the
// daemon, whatever the test did.
func newUpFleet(t *testing.T, agents ...map[string]any) *upFleet {
	t.Helper()
	socket := fleettest.TmuxSocket(t)
	base := t.TempDir()
	f := &upFleet{file: filepath.Join(base, "fleet.json"), dir: filepath.Join(base, "state"), socket: socket}
	data, _ := json.MarshalIndent(map[string]any{"tmux_socket": socket, "timeouts": map[string]string{"ready": "10s", "send": "30s"}, "agents": agents}, "", "  ")
	if err := os.WriteFile(f.file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(binary, "down", f.file, "--dir", f.dir).Run()
		var rec fleetup.Record
		if data, err := os.ReadFile(filepath.Join(f.dir, ".fleetstate", fleetup.RecordFile)); err == nil && json.Unmarshal(data, &rec) == nil && rec.PID > 0 && fleetup.Alive(rec.PID) {
			fleetup.SignalTree(rec.PID, 9)
		}
	})
	return f
}

// paneEnv reads the variable key from the environment of the process
// with pid (Linux's /proc): the agent's own record of who it is, which
// owes nothing to how up or the daemon name its pane.
func paneEnv(t *testing.T, pid int, key string) (string, bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatalf("environment of pid %d: %v", pid, err)
	}
	for _, kv := range strings.Split(string(data), "\x00") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// tmuxOut runs tmux on the fleet's socket and returns its output.
func (f *upFleet) tmuxOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-u", "-S", f.socket}, args...)...).Output()
	if err != nil {
		t.Fatalf("tmux %v: %v", args, err)
	}
	return string(out)
}

// TestUpDeliversToEachAgentsOwnPane: agents whose names tmux reads as
// something else when given as a target (a window index, a window and
// pane, a format, a name with a space) or as an argument (a name ending
// in the command separator ";", a name like a flag) each get their
// message in their own pane, and nowhere else; a second up finds every
// pane again and starts nothing.
func TestUpDeliversToEachAgentsOwnPane(t *testing.T) {
	agentBin := buildFakeAgent(t)
	// The order matters: "1" is not the window with index 1 (bob.0 is),
	// and bob's window is "bob", whose first pane tmux calls "bob.0".
	names := []string{"bob", "bob.0", "1", "#{pane_pid}", "with space", "semi;", "-n"}
	agents := []map[string]any{{"name": "lead", "role": "lead"}}
	for _, n := range names {
		agents = append(agents, map[string]any{"name": n, "role": "member", "command": []string{agentBin, "--fleetstate", binary}})
	}
	f := newUpFleet(t, agents...)

	out := fleetCLI(t, "up", f.file, "--dir", f.dir)
	if !strings.Contains(out, "started:   "+strings.Join(names, ", ")+"\n") {
		t.Fatalf("up printed:\n%s\nwant every agent started", out)
	}
	rec := f.record(t)
	leadEnv := agentconf.ReadEnvFile(filepath.Join(f.dir, ".fleetstate", "agents", "lead", "env"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lead, err := mcpadapter.Dial(ctx, rec.URL, leadEnv["FLEET_TOKEN"], "up-panes-lead")
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	if !fleettest.Until(30*time.Second, 100*time.Millisecond, func() bool {
		ms, err := lead.Members(ctx)
		ready := 0
		for _, m := range ms {
			if m.Ready {
				ready++
			}
		}
		return err == nil && ready == len(names)
	}) {
		ms, _ := lead.Members(ctx)
		t.Fatalf("not every agent mounted: %+v", ms)
	}

	// Each agent replies as itself to the message meant for it.
	note := func(i int) string { return fmt.Sprintf("note-%d-for-this-agent", i) }
	for i, n := range names {
		o, err := lead.Send(ctx, n, note(i)+" ("+n+")")
		if err != nil || o.Kind != fleetstate.OutcomeReply || !strings.HasPrefix(o.Content, n+" received") {
			t.Errorf("send to %q: %+v, %v; want its own reply", n, o, err)
		}
	}

	// Each pane shows its own agent's message and no other. Whose pane
	// it is, is read from the environment of the process in it.
	panes := strings.Split(strings.TrimSpace(f.tmuxOut(t, "list-panes", "-s", "-t", "=fleet", "-F", "#{pane_id} #{pane_pid}")), "\n")
	if len(panes) != len(names) {
		t.Fatalf("panes %q; want one per agent", panes)
	}
	seen := map[string]bool{}
	for _, line := range panes {
		var id string
		var pid int
		if _, err := fmt.Sscan(line, &id, &pid); err != nil {
			t.Fatal(err)
		}
		agent, ok := paneEnv(t, pid, "FLEET_AGENT")
		if !ok {
			t.Fatalf("pane %s (pid %d) runs no agent", id, pid)
		}
		seen[agent] = true
		screen := f.tmuxOut(t, "capture-pane", "-p", "-J", "-S", "-", "-t", id)
		for i, n := range names {
			if got, want := strings.Contains(screen, note(i)), n == agent; got != want {
				t.Errorf("pane %s of agent %q: shows %s: %v; want %v\n%s", id, agent, note(i), got, want, screen)
			}
		}
	}
	if len(seen) != len(names) {
		t.Errorf("the panes run agents %v; want one of each of %q", seen, names)
	}

	// up again finds every pane by its agent and starts nothing.
	before := f.panes(t)
	if out := fleetCLI(t, "up", f.file, "--dir", f.dir); !strings.Contains(out, "started:   nothing") {
		t.Errorf("second up printed:\n%s\nwant nothing started", out)
	}
	if after := f.panes(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("second up: panes\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
}

// TestUpEnvValueWithNewlineKeepsTheToken: an env value that spans lines,
// one of them shaped like an assignment of FLEET_TOKEN, reaches the
// agent's process whole, and up run again with the same file mints no
// token and writes nothing.
func TestUpEnvValueWithNewlineKeepsTheToken(t *testing.T) {
	setup := "cd src\nFLEET_TOKEN='not-the-token'"
	note := "first line\nsecond line\n"
	f := newUpFleet(t,
		map[string]any{"name": "lead", "role": "lead"},
		map[string]any{"name": "bob", "role": "member", "command": []string{"sleep", "600"}, "env": map[string]string{"SETUP": setup, "NOTE": note}},
	)
	fleetCLI(t, "up", f.file, "--dir", f.dir)
	files := []string{
		filepath.Join(f.dir, ".fleetstate", "tokens.json"),
		filepath.Join(f.dir, ".fleetstate", "agents", "bob", "env"),
	}
	before := f.snapshot(t, files...)

	var pid int
	if _, err := fmt.Sscan(f.tmuxOut(t, "list-panes", "-s", "-t", "=fleet", "-F", "#{pane_pid}"), &pid); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"SETUP": setup, "NOTE": note} {
		if got, _ := paneEnv(t, pid, k); got != want {
			t.Errorf("bob's %s: %q; want %q", k, got, want)
		}
	}

	for run := range 2 {
		out := fleetCLI(t, "up", f.file, "--dir", f.dir)
		if strings.Contains(out, "wrote:") {
			t.Errorf("up run %d again printed:\n%s\nwant nothing written", run+2, out)
		}
	}
	after := f.snapshot(t, files...)
	for _, p := range files {
		if before[p] != after[p] {
			t.Errorf("up run again changed %s:\n%s\nwas\n%s", filepath.Base(p), after[p], before[p])
		}
	}
	if list := fleetCLI(t, "token", "list", "--dir", f.dir); strings.Count(list, "bob") != 1 {
		t.Errorf("token list:\n%s\nwant bob once", list)
	}
}

// TestUpReportsAFirstAgentThatExitsAtOnce: when the first agent's command
// ends at once, up fails with what the command printed, and leaves
// nothing it started: no daemon, no pane, no tmux server.
func TestUpReportsAFirstAgentThatExitsAtOnce(t *testing.T) {
	f := newUpFleet(t,
		map[string]any{"name": "lead", "role": "lead"},
		// The output is made by the command, not found in its argv.
		map[string]any{"name": "first", "role": "member", "command": []string{"sh", "-c", `printf '%s-%s\n' cannot login; exit 3`}},
		map[string]any{"name": "second", "role": "member", "command": []string{"sleep", "600"}},
	)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, "up", f.file, "--dir", f.dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		t.Fatalf("up succeeded:\n%s", stdout.String())
	}
	msg := stderr.String()
	for _, want := range []string{"first: its command ended at once", "cannot-login", "up stopped the daemon it had started"} {
		if !strings.Contains(msg, want) {
			t.Errorf("up failed with:\n%s\nwant %q in it", msg, want)
		}
	}
	if strings.Contains(msg, "second") || strings.Contains(msg, "no server running") {
		t.Errorf("up failed with:\n%s\nwant only first's failure", msg)
	}

	store, err := fleetstate.Open(nil, f.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, owned, _ := store.FleetOwner(); owned {
		t.Errorf("after a failed up the fleet is owned by %s; want the daemon stopped", o)
	}
	if rec := f.record(t); rec.PID != 0 {
		t.Errorf("after a failed up the record names the daemon %d", rec.PID)
	}
	if out, err := exec.Command("tmux", "-S", f.socket, "list-panes", "-a").CombinedOutput(); err == nil {
		t.Errorf("after a failed up the fleet's tmux server still runs panes:\n%s", out)
	}
}

// TestUpAgainFailsAloneOnARunningFleet: up run again on a running fleet,
// its file now with an agent whose command ends at once, fails with that
// command's output and kills only the pane it started: the daemon and
// the running panes stay. A running pane that carries no @fleet_agent
// (started by an up of before) is found by its window's name and tagged,
// not started twice.
func TestUpAgainFailsAloneOnARunningFleet(t *testing.T) {
	lead := map[string]any{"name": "lead", "role": "lead"}
	alice := map[string]any{"name": "alice", "role": "member", "command": []string{"sleep", "600"}}
	f := newUpFleet(t, lead, alice)
	fleetCLI(t, "up", f.file, "--dir", f.dir)
	rec := f.record(t)
	id := strings.TrimSpace(f.tmuxOut(t, "list-panes", "-s", "-t", "=fleet", "-F", "#{pane_id}"))
	f.tmuxOut(t, "set-option", "-p", "-u", "-t", id, "@fleet_agent") // as an earlier up left it
	before := f.panes(t)

	broken := map[string]any{"name": "broken", "role": "member", "command": []string{"sh", "-c", `printf '%s-%s-%s\n' no such model; exit 2`}}
	data, _ := json.Marshal(map[string]any{"tmux_socket": f.socket, "agents": []any{lead, alice, broken}})
	if err := os.WriteFile(f.file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, "up", f.file, "--dir", f.dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("up succeeded:\n%s", stdout.String())
	}
	for _, want := range []string{"broken: its command ended at once", "no-such-model"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("up failed with:\n%s\nwant %q in it", stderr.String(), want)
		}
	}
	if strings.Contains(stderr.String(), "stopped the daemon") || !fleetup.Alive(rec.PID) || f.record(t) != rec {
		t.Errorf("up stopped or changed the daemon it had not started: %+v, then %+v\n%s", rec, f.record(t), stderr.String())
	}
	if after := f.panes(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("panes after the failed up:\n%s\nwant alice's alone, as before:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if got := strings.TrimSpace(f.tmuxOut(t, "show-options", "-p", "-v", "-t", id, "@fleet_agent")); got != "alice" {
		t.Errorf("alice's pane: @fleet_agent %q; want it tagged alice", got)
	}
}
