// Command tmuxfleet runs a whole fleet for real: the fleetstate daemon,
// scripted fake agents in tmux panes (on a private tmux socket), and a
// lead that drives every flow of the rendezvous through MCP, printing a
// readable transcript.
//
// Usage:
//
//	go run ./examples/tmuxfleet
//
// It needs tmux and the Go toolchain (it builds the fleetstate and
// fakeagent binaries into a temporary directory, which it removes at the
// end, with the tmux server).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// run runs the example; it returns, rather than exits, on failure, so that
// the panes, the daemon and the temporary directory are always cleaned up.
func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	f, err := start(ctx, os.Stdout)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.runAll(ctx)
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
	{name: "ghost"},                              // in the roster, never started
	{name: "dora", hooks: true, pane: true},      // dies mid-turn
}

// fleet is the running example: the daemon, the tmux server and the lead.
type fleet struct {
	w      io.Writer
	tmp    string
	bin    string // the fleetstate binary
	tm     *tmux.Server
	daemon *exec.Cmd
	url    string
	lead   *mcpadapter.Client
	mu     sync.Mutex
}

func (f *fleet) say(who, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.w, "%-7s %s\n", who+":", fmt.Sprintf(format, args...))
}

// start builds the binaries, starts the daemon and the panes, and connects
// the lead.
func start(ctx context.Context, w io.Writer) (_ *fleet, err error) {
	if _, err := exec.LookPath("tmux"); err != nil {
		return nil, errors.New("tmuxfleet needs tmux")
	}
	tmp, err := os.MkdirTemp("", "tmuxfleet-")
	if err != nil {
		return nil, err
	}
	f := &fleet{w: w, tmp: tmp, tm: tmux.NewServer(filepath.Join(tmp, "tmux.sock"))}
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
	dir := filepath.Join(tmp, "state")
	tokens := map[string]string{"lead": ""}
	for _, m := range members {
		tokens[m.name] = ""
	}
	for name := range tokens {
		role := "member"
		if name == "lead" {
			role = "lead"
		}
		out, err := exec.CommandContext(ctx, f.bin, "token", "add", "--dir", dir, "--agent", name, "--role", role).Output()
		if err != nil {
			return nil, fmt.Errorf("token add %s: %w", name, err)
		}
		tokens[name] = strings.TrimSpace(string(out))
	}
	roster := map[string]any{
		"tmux_socket": f.tm.Socket(),
		"programs": map[string]any{"fake": map[string]any{
			"working": []string{`esc to interrupt`},
			"idle":    []string{`^> ?$`},
		}},
	}
	agents := []map[string]string{{"name": "lead", "role": "lead", "tmux": "fleet:lead.0"}}
	for _, m := range members {
		agents = append(agents, map[string]string{"name": m.name, "role": "member", "tmux": "fleet:" + m.name + ".0", "program": m.program})
	}
	roster["agents"] = agents
	rosterPath := filepath.Join(tmp, "roster.json")
	data, _ := json.MarshalIndent(roster, "", "  ")
	if err := os.WriteFile(rosterPath, data, 0o600); err != nil {
		return nil, err
	}

	f.daemon = exec.Command(f.bin, "serve", "--addr", "127.0.0.1:0", "--dir", dir, "--roster", rosterPath,
		"--ready-timeout", "4s", "--send-timeout", "20s")
	stderr, err := f.daemon.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := f.daemon.Start(); err != nil {
		return nil, err
	}
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://\S+/mcp)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case f.url = <-urls:
	case <-time.After(30 * time.Second):
		return nil, errors.New("the daemon did not start")
	}
	f.say("daemon", "serving %s; tmux socket %s", f.url, filepath.Base(f.tm.Socket()))

	agentCmd := func(name string, extra ...string) []string {
		return append([]string{"-e", "FLEET_TOKEN=" + tokens[name], agentBin, "--agent", name, "--url", f.url, "--fleetstate", f.bin}, extra...)
	}
	if _, err := f.tm.Run(ctx, "", append([]string{"new-session", "-d", "-s", "fleet", "-n", "lead", "-x", "160", "-y", "50"}, agentCmd("lead", "--lead")...)...); err != nil {
		return nil, err
	}
	for _, m := range members {
		if !m.pane {
			continue
		}
		args := agentCmd(m.name, fmt.Sprintf("--hooks=%v", m.hooks))
		if _, err := f.tm.Run(ctx, "", append([]string{"new-window", "-d", "-t", "fleet", "-n", m.name}, args...)...); err != nil {
			return nil, err
		}
	}
	f.lead, err = mcpadapter.Dial(ctx, f.url, tokens["lead"], "tmuxfleet-lead")
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

// Close stops the lead, the panes and the daemon, and removes the
// temporary directory.
func (f *fleet) Close() {
	if f.lead != nil {
		f.lead.Close()
	}
	_ = f.tm.Kill(context.Background())
	if f.daemon != nil && f.daemon.Process != nil {
		_ = f.daemon.Process.Kill()
		_ = f.daemon.Wait()
	}
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
	out, _ := f.tm.Run(ctx, "", "capture-pane", "-p", "-J", "-S", "-", "-t", "fleet:"+name+".0")
	return out
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
