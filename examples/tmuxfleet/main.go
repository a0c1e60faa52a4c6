// Command tmuxfleet runs a whole fleet for real: it writes a fleet file
// of scripted fake agents (examples/fakeagent) and brings it up with
// `fleetstate up` (the daemon, the tokens, a tmux session on a private
// socket with one window per agent), then drives every flow of the
// rendezvous through MCP as the lead, printing a readable transcript, and
// brings the fleet down with `fleetstate down`.
//
// Usage:
//
//	go run ./examples/tmuxfleet [--keep]
//
// With --keep the fleet keeps running after the flows: the example
// prints how to attach to the panes (tmux -S SOCKET attach -t fleet), the
// fleet file, and the `fleetstate down` line that stops it.
//
// It needs tmux and the Go toolchain (it builds the fleetstate and
// fakeagent binaries into a temporary directory, which it removes at the
// end, unless --keep).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
)

func main() {
	keep := flag.Bool("keep", false, "keep the fleet running after the flows, and print how to attach to it")
	flag.Parse()
	if err := run(*keep); err != nil {
		log.Fatal(err)
	}
}

// run runs the example; it returns, rather than exits, on failure, so that
// the panes, the daemon and the temporary directory are always cleaned up.
func run(keep bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	f, err := start(ctx, os.Stdout)
	if err != nil {
		return err
	}
	err = f.runAll(ctx)
	if keep && err == nil {
		f.lead.Close()
		fmt.Printf("\nthe fleet keeps running:\n  attach: tmux -S %s attach -t fleet\n  stop:   %s down %s --dir %s && rm -r %s\n",
			f.tm.Socket(), f.bin, f.file, f.dir, f.tmp)
		return nil
	}
	f.Close()
	return err
}

// member describes one member of the example fleet.
type member struct {
	name    string
	hooks   bool   // reports status through the hook command
	program string // screen patterns to use ("" for none)
	pane    bool   // runs in a pane at all
}

var members = []member{
	{name: "alice", hooks: true, pane: true},
	{name: "bob", hooks: true, pane: true},
	{name: "carol", program: "fake", pane: true}, // status from screen patterns only
	{name: "mute", pane: true},                   // no hooks, no patterns: UNKNOWN
	{name: "ghost"},                              // in the fleet file, never started
	{name: "dora", hooks: true, pane: true},      // dies mid-turn
}

// fleet is the running example: the fleet brought up, and the lead.
type fleet struct {
	w    io.Writer
	tmp  string
	bin  string // the fleetstate binary
	file string // the fleet file
	dir  string // the state directory
	tm   *tmux.Server
	url  string
	lead *mcpadapter.Client
	mu   sync.Mutex
}

func (f *fleet) say(who, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.w, "%-7s %s\n", who+":", fmt.Sprintf(format, args...))
}

// fleetFile is the example's fleet file: each member with a command runs
// the fake agent in a window of its own; the lead's window shows the
// nudges it gets.
func fleetFile(socket, fleetstateBin, agentBin string) map[string]any {
	agents := []map[string]any{{"name": "lead", "role": "lead",
		"command": []string{agentBin, "--fleetstate", fleetstateBin}}}
	for _, m := range members {
		a := map[string]any{"name": m.name, "role": "member"}
		if m.pane {
			a["command"] = []string{agentBin, "--fleetstate", fleetstateBin, fmt.Sprintf("--hooks=%v", m.hooks)}
		}
		if m.program != "" {
			a["program"] = m.program
		}
		agents = append(agents, a)
	}
	return map[string]any{
		"tmux_socket": socket,
		"programs": map[string]any{"fake": map[string]any{
			"working": []string{`esc to interrupt`},
			"idle":    []string{`^> ?$`},
		}},
		// Short bounds, so that the never-mounted flow takes seconds.
		"timeouts": map[string]string{"ready": "4s", "send": "20s"},
		"agents":   agents,
	}
}

// start builds the binaries, writes the fleet file, brings the fleet up
// with fleetstate up, and connects the lead with the token up made.
func start(ctx context.Context, w io.Writer) (_ *fleet, err error) {
	if _, err := exec.LookPath("tmux"); err != nil {
		return nil, errors.New("tmuxfleet needs tmux")
	}
	tmp, err := os.MkdirTemp("", "tmuxfleet-")
	if err != nil {
		return nil, err
	}
	f := &fleet{w: w, tmp: tmp, tm: tmux.NewServer(filepath.Join(tmp, "tmux.sock")),
		file: filepath.Join(tmp, "fleet.json"), dir: filepath.Join(tmp, "state")}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	f.bin = filepath.Join(tmp, "fleetstate")
	agentBin := filepath.Join(tmp, "fakeagent")
	for out, pkg := range map[string]string{f.bin: "github.com/fleetstate/fleetstate/cmd/fleetstate", agentBin: "github.com/fleetstate/fleetstate/examples/fakeagent"} {
		if msg, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", pkg, err, msg)
		}
	}
	data, _ := json.MarshalIndent(fleetFile(f.tm.Socket(), f.bin, agentBin), "", "  ")
	if err := os.WriteFile(f.file, data, 0o600); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, f.bin, "up", f.file, "--dir", f.dir).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("fleetstate up: %v\n%s", err, out)
	}
	f.say("up", "%s", strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "\n         "))

	// The lead here is this program, with the token up made for it.
	var rec struct{ URL string }
	if data, err := os.ReadFile(filepath.Join(f.dir, ".fleetstate", "up.json")); err != nil || json.Unmarshal(data, &rec) != nil {
		return nil, fmt.Errorf("fleetstate up left no up.json: %v", err)
	}
	f.url = rec.URL
	token, err := leadToken(filepath.Join(f.dir, ".fleetstate", "agents", "lead", "env"))
	if err != nil {
		return nil, err
	}
	f.lead, err = mcpadapter.Dial(ctx, f.url, token, "tmuxfleet-lead")
	if err != nil {
		return nil, err
	}
	f.say("lead", "connected; waiting for the members to mount")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ms, err := f.lead.Members(ctx)
		if err != nil {
			return nil, err
		}
		ready := 0
		for _, m := range ms {
			if m.Ready {
				ready++
			}
		}
		if ready == 5 { // all but ghost
			for _, m := range ms {
				f.say("lead", "member %-5s ready=%-5v status=%s", m.Name, m.Ready, m.Status)
			}
			return f, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("members did not mount: %+v", ms)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// leadToken reads FLEET_TOKEN from the environment file up wrote for the
// lead ("export FLEET_TOKEN='fst_…'").
func leadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "export FLEET_TOKEN="); ok {
			return strings.Trim(v, "'"), nil
		}
	}
	return "", fmt.Errorf("%s holds no FLEET_TOKEN", path)
}

// Close brings the fleet down with fleetstate down (the panes, the tmux
// server, the daemon) and removes the temporary directory.
func (f *fleet) Close() {
	if f.lead != nil {
		f.lead.Close()
	}
	if _, err := os.Stat(f.bin); err == nil {
		if out, err := exec.Command(f.bin, "down", f.file, "--dir", f.dir).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "tmuxfleet: fleetstate down: %v\n%s", err, out)
		}
	}
	_ = f.tm.Kill(context.Background()) // in case up failed half way
	os.RemoveAll(f.tmp)
}

// show sums an outcome up in a word or three: "failed/member_gone",
// "pending (queued)", "turn_done partial".
func show(o fleetstate.Outcome) string {
	s := string(o.Kind)
	if o.Reason != "" {
		s += "/" + string(o.Reason)
	}
	if o.State != "" && o.Kind == fleetstate.OutcomePending {
		s += " (" + string(o.State) + ")"
	}
	if o.Partial {
		s += " partial"
	}
	return s
}

// pane returns what a pane shows, scrollback included.
func (f *fleet) pane(ctx context.Context, name string) string {
	out, _ := f.tm.Run(ctx, "", "capture-pane", "-p", "-J", "-S", "-", "-t", "fleet:"+name)
	return out
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
