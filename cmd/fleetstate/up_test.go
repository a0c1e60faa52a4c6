package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agentconf"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleetup"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// buildFakeAgent builds examples/fakeagent into a test directory.
func buildFakeAgent(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fakeagent")
	if msg, err := exec.Command("go", "build", "-o", out, "github.com/fleetstate/fleetstate/examples/fakeagent").CombinedOutput(); err != nil {
		t.Fatalf("build fakeagent: %v\n%s", err, msg)
	}
	return out
}

// fleetCLI runs the fleetstate binary with args and returns its standard
// output, failing the test if it fails.
func fleetCLI(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("fleetstate %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// upFleet is a fleet brought up by the binary's up in a test.
type upFleet struct {
	file, dir, socket string
}

// record reads up.json.
func (f *upFleet) record(t *testing.T) fleetup.Record {
	t.Helper()
	var rec fleetup.Record
	data, err := os.ReadFile(filepath.Join(f.dir, ".fleetstate", fleetup.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// panes lists the fleet's panes: "window pane_id pane_pid", sorted.
func (f *upFleet) panes(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("tmux", "-S", f.socket, "list-panes", "-a", "-F", "#{window_name} #{pane_id} #{pane_pid} #{pane_dead}").Output()
	if err != nil {
		t.Fatalf("tmux list-panes: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	return lines
}

// snapshot reads every file up writes, by path.
func (f *upFleet) snapshot(t *testing.T, paths ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(p)
		out[p] = string(data) + "\x00" + fi.ModTime().String()
	}
	return out
}

// TestUpRunsTheFleetAndDownStopsIt brings a fleet of fake agents up with
// the binary, drives every flow through it as the lead with the token up
// made, runs up again (nothing changes), and brings it down (no process
// and no tmux server is left; the state directory stays).
func TestUpRunsTheFleetAndDownStopsIt(t *testing.T) {
	socket := fleettest.TmuxSocket(t)
	agentBin := buildFakeAgent(t)
	base := t.TempDir()
	work := filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	// A user's own settings, which up must keep.
	if err := os.MkdirAll(filepath.Join(work, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, ".claude", "settings.json"), []byte(`{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := func(name, role string, extra ...string) map[string]any {
		a := map[string]any{"name": name, "role": role, "command": append([]string{agentBin, "--fleetstate", binary}, extra...)}
		return a
	}
	bob := agent("bob", "member")
	bob["program"] = "claude" // its configuration goes to the workdir; its command is still the fake agent
	bob["workdir"] = "work"
	bob["env"] = map[string]string{"BOB_LIKES": "it's 'quoted'"}
	fleet := map[string]any{
		"tmux_socket": socket,
		"timeouts":    map[string]string{"ready": "10s", "send": "30s"},
		"agents": []any{
			agent("lead", "lead"),
			agent("alice", "member"),
			bob,
			map[string]any{"name": "puller", "role": "member"}, // no command: pulls its work, started by nobody
		},
	}
	f := &upFleet{file: filepath.Join(base, "fleet.json"), dir: filepath.Join(base, "state"), socket: socket}
	data, _ := json.MarshalIndent(fleet, "", "  ")
	if err := os.WriteFile(f.file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the test did, nothing it started outlives it.
		_ = exec.Command(binary, "down", f.file, "--dir", f.dir).Run()
		var rec fleetup.Record
		if data, err := os.ReadFile(filepath.Join(f.dir, ".fleetstate", fleetup.RecordFile)); err == nil && json.Unmarshal(data, &rec) == nil && rec.PID > 0 && fleetup.Alive(rec.PID) {
			fleetup.SignalTree(rec.PID, 9)
		}
	})

	out := fleetCLI(t, "up", f.file, "--dir", f.dir)
	for _, want := range []string{"tmux -S " + socket + " attach -t fleet", "fleetstate web --dir " + f.dir, "started:   lead, alice, bob"} {
		if !strings.Contains(out, want) {
			t.Errorf("up printed:\n%s\nwant %q in it", out, want)
		}
	}
	rec := f.record(t)
	if rec.PID == 0 || !fleetup.Alive(rec.PID) || !strings.HasPrefix(rec.URL, "http://127.0.0.1:") {
		t.Fatalf("up.json: %+v; want a live daemon on loopback", rec)
	}
	panes := f.panes(t)
	if len(panes) != 3 {
		t.Fatalf("panes: %q; want lead, alice and bob", panes)
	}

	// The environment file holds the token; the workdir holds none.
	env := agentconf.ReadEnvFile(filepath.Join(f.dir, ".fleetstate", "agents", "bob", "env"))
	if env["FLEET_AGENT"] != "bob" || env["FLEET_ROLE"] != "member" || env["FLEET_URL"] != rec.URL || !strings.HasPrefix(env["FLEET_TOKEN"], "fst_") || env["BOB_LIKES"] != "it's 'quoted'" {
		t.Errorf("bob's environment: %v", env)
	}
	settings, err := os.ReadFile(filepath.Join(work, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	mcpJSON, err := os.ReadFile(filepath.Join(work, ".mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"model": "opus"`, `echo mine`, `status # fleetstate up`, `hook permission --timeout 2m0s # fleetstate up`, `UserPromptSubmit`, `PreToolUse`, `Notification`, `mcp__fleetstate`} {
		if !strings.Contains(string(settings), want) {
			t.Errorf(".claude/settings.json lacks %q:\n%s", want, settings)
		}
	}
	if !strings.Contains(string(mcpJSON), `"--connect"`) || !strings.Contains(string(mcpJSON), `${FLEET_TOKEN}`) {
		t.Errorf(".mcp.json:\n%s", mcpJSON)
	}
	for _, b := range [][]byte{settings, mcpJSON} {
		if bytes.Contains(b, []byte("fst_")) {
			t.Errorf("a token in the workdir:\n%s", b)
		}
	}

	// Every flow, through the launched fleet, as the lead.
	leadEnv := agentconf.ReadEnvFile(filepath.Join(f.dir, ".fleetstate", "agents", "lead", "env"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lead, err := mcpadapter.Dial(ctx, rec.URL, leadEnv["FLEET_TOKEN"], "up-test-lead")
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	if !fleettest.Until(30*time.Second, 100*time.Millisecond, func() bool {
		ms, err := lead.Members(ctx)
		ready := 0
		for _, m := range ms {
			if m.Ready && (m.Name == "alice" || m.Name == "bob") {
				ready++
			}
		}
		return err == nil && ready == 2
	}) {
		ms, _ := lead.Members(ctx)
		t.Fatalf("alice and bob never mounted: %+v", ms)
	}
	t.Run("delegation", func(t *testing.T) {
		o, err := lead.Send(ctx, "alice", "summarise the layout")
		if err != nil || o.Kind != fleetstate.OutcomeReply || !strings.Contains(o.Content, "alice received 20 bytes") {
			t.Fatalf("send: %+v, %v; want alice's reply", o, err)
		}
	})
	t.Run("clarification", func(t *testing.T) {
		o, err := lead.Send(ctx, "bob", "[ask] build the release")
		if err != nil || o.Kind != fleetstate.OutcomeQuestion || o.TurnID == "" {
			t.Fatalf("send: %+v, %v; want bob's question", o, err)
		}
		o, err = lead.Answer(ctx, o.TurnID, "release-2")
		if err != nil || o.Kind != fleetstate.OutcomeReply || o.Content != "built on release-2" {
			t.Fatalf("answer: %+v, %v; want bob's reply", o, err)
		}
	})
	t.Run("detached", func(t *testing.T) {
		o, err := lead.SendDetached(ctx, "alice", "audit the tests")
		if err != nil || o.Ticket == "" {
			t.Fatalf("send detached: %+v, %v", o, err)
		}
		got, err := lead.Poll(ctx, o.Ticket, 20*time.Second)
		if err != nil || got.Kind != fleetstate.OutcomeReply || !strings.Contains(got.Content, "alice received") {
			t.Fatalf("poll: %+v, %v; want alice's reply", got, err)
		}
		if err := lead.Ack(ctx, o.Ticket); err != nil {
			t.Fatal(err)
		}
	})
	lead.Close()

	// up again: the same daemon, panes, tokens and files.
	files := []string{
		filepath.Join(work, ".mcp.json"), filepath.Join(work, ".claude", "settings.json"),
		filepath.Join(f.dir, ".fleetstate", "tokens.json"), filepath.Join(f.dir, ".fleetstate", fleetup.RecordFile),
	}
	for _, a := range []string{"lead", "alice", "bob", "puller"} {
		files = append(files, filepath.Join(f.dir, ".fleetstate", "agents", a, "env"))
	}
	before := f.snapshot(t, files...)
	// The fleet file gains a budget: up hands it to the running daemon.
	fleet["agents"].([]any)[3].(map[string]any)["budget"] = map[string]any{"tokens": 777}
	data, _ = json.MarshalIndent(fleet, "", "  ")
	if err := os.WriteFile(f.file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out = fleetCLI(t, "up", f.file, "--dir", f.dir)
	if !strings.Contains(out, "started:   nothing") || strings.Contains(out, "wrote:") {
		t.Errorf("second up printed:\n%s\nwant nothing started or written", out)
	}
	var budgets struct {
		Budgets []fleetstate.BudgetState `json:"budgets"`
	}
	if err := json.Unmarshal([]byte(fleetCLI(t, "budget", "--json", "--dir", f.dir)), &budgets); err != nil ||
		len(budgets.Budgets) != 1 || budgets.Budgets[0].Member != "puller" || budgets.Budgets[0].Tokens != 777 {
		t.Errorf("budgets after up with a budget added to the fleet file: %+v, %v; want puller's 777 tokens", budgets.Budgets, err)
	}
	if again := f.record(t); again != rec {
		t.Errorf("second up: record %+v; want %+v", again, rec)
	}
	if again := f.panes(t); strings.Join(again, "\n") != strings.Join(panes, "\n") {
		t.Errorf("second up: panes\n%s\nwant\n%s", strings.Join(again, "\n"), strings.Join(panes, "\n"))
	}
	after := f.snapshot(t, files...)
	for _, p := range files {
		if before[p] != after[p] {
			t.Errorf("second up changed %s", p)
		}
	}

	// down: no agent, no tmux server, no daemon; the state stays.
	var pids []int
	for _, p := range panes {
		var name, id string
		var pid int
		if _, err := fmt.Sscan(p, &name, &id, &pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	out = fleetCLI(t, "down", f.file, "--dir", f.dir)
	if !strings.Contains(out, "stopped the daemon") {
		t.Errorf("down printed:\n%s", out)
	}
	for _, pid := range append(pids, rec.PID) {
		if fleetup.Alive(pid) {
			t.Errorf("pid %d still runs after down", pid)
		}
	}
	if err := exec.Command("tmux", "-S", socket, "list-sessions").Run(); err == nil {
		t.Error("the fleet's tmux server still runs after down")
	}
	if _, err := os.Stat(filepath.Join(f.dir, ".fleetstate", "tokens.json")); err != nil {
		t.Errorf("down removed the state: %v", err)
	}
	store, err := fleetstate.Open(nil, f.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, owned, _ := store.FleetOwner(); owned {
		t.Errorf("after down the fleet is still owned by %s", o)
	}
}

// TestUpRefusesBadFleetFiles: every mistake is named by its field, and
// nothing is started or written: not even the state directory.
func TestUpRefusesBadFleetFiles(t *testing.T) {
	base := t.TempDir()
	for _, c := range []struct {
		name, file, want string
	}{
		{"not json", `{"agents": [`, "unexpected EOF"},
		{"unknown field", `{"agents": [{"name": "a", "role": "member", "comand": ["x"]}]}`, `unknown field "comand"`},
		{"empty command", `{"agents": [{"name": "l", "role": "lead"}, {"name": "a", "role": "member"}, {"name": "b", "role": "member", "command": []}]}`, "agents[2].command: empty"},
		{"empty program name", `{"agents": [{"name": "a", "role": "member", "command": [""]}]}`, "agents[0].command: empty"},
		{"command not a list", `{"agents": [{"name": "a", "role": "member", "command": "claude"}]}`, "agents[0].command: want a JSON array"},
		{"role not a string", `{"agents": [{"name": "a", "role": "lead"}, {"name": "b", "role": "member"}, {"name": "c", "role": 5}]}`, "agents[2].role: want a JSON string"},
		{"no name", `{"agents": [{"role": "member"}]}`, "agents[0].name: empty"},
		{"bad name", `{"agents": [{"name": "../x", "role": "member"}]}`, "agents[0].name:"},
		{"duplicate name", `{"agents": [{"name": "a", "role": "member"}, {"name": "a", "role": "lead"}]}`, `agents[1].name: "a" is agents[0]'s name already`},
		{"bad role", `{"agents": [{"name": "a", "role": "admin"}]}`, `agents[0].role: "admin"`},
		{"operator lead", `{"agents": [{"name": "operator", "role": "lead"}]}`, `agents[0].name: mcpadapter: agent name "operator" is reserved`},
		{"operator member", `{"agents": [{"name": "l", "role": "lead"}, {"name": "operator", "role": "member"}]}`, `agents[1].name: mcpadapter: agent name "operator" is reserved`},
		{"unknown program", `{"agents": [{"name": "a", "role": "member", "program": "vim"}]}`, `agents[0].program: "vim"`},
		{"bad pattern", `{"programs": {"p": {"idle": ["(x"]}}, "agents": []}`, "programs.p.idle[0]:"},
		{"missing workdir", `{"agents": [{"name": "a", "role": "member", "command": ["sh"], "workdir": "nowhere"}]}`, "agents[0].workdir:"},
		{"workdir without command", `{"agents": [{"name": "a", "role": "member", "workdir": "."}]}`, "agents[0].workdir: only an agent with a command"},
		{"reserved env", `{"agents": [{"name": "a", "role": "member", "command": ["sh"], "env": {"FLEET_TOKEN": "x"}}]}`, "agents[0].env.FLEET_TOKEN: fleetstate up sets it"},
		{"bad env name", `{"agents": [{"name": "a", "role": "member", "command": ["sh"], "env": {"A-B": "x"}}]}`, `agents[0].env: "A-B"`},
		{"command and tmux", `{"agents": [{"name": "a", "role": "member", "command": ["sh"], "tmux": "x:1"}]}`, "agents[0].tmux:"},
		{"missing program", `{"agents": [{"name": "a", "role": "member", "command": ["no-such-agent-cli"]}]}`, `agents[0].command[0]: "no-such-agent-cli" is not in $PATH`},
		{"bad session", `{"tmux_session": "a:b", "agents": []}`, "tmux_session:"},
		{"bad timeout", `{"timeouts": {"send": "soon"}, "agents": []}`, "timeouts.send:"},
		{"unknown timeout", `{"timeouts": {"nap": "1s"}, "agents": []}`, "timeouts.nap:"},
		{"long socket", `{"tmux_socket": "/` + strings.Repeat("s", 120) + `", "agents": []}`, "tmux_socket:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(base, strings.ReplaceAll(c.name, " ", "_")+".json")
			if err := os.WriteFile(file, []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(base, "state-"+strings.ReplaceAll(c.name, " ", "_"))
			var out bytes.Buffer
			err := run(context.Background(), []string{"up", file, "--dir", dir}, strings.NewReader(""), &out, &out, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("up: %v; want an error with %q", err, c.want)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("up created the state directory %s for a bad file", dir)
			}
		})
	}
}
