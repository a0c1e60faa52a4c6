package tmux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait for a pane to show what it was sent; it is
// never a synchronisation sleep.
const waitLimit = 10 * time.Second

// ---- without tmux ----------------------------------------------------------

func TestClassify(t *testing.T) {
	pats := &Patterns{
		Working: []string{`esc to interrupt`},
		Blocked: []string{`^Allow .*\?`},
		Idle:    []string{`^> $`, `^READY>`},
	}
	c, err := pats.compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, screen string
		want         fleetstate.Status
	}{
		{"idle prompt", "some output\n> ", fleetstate.StatusIdle},
		{"idle, second pattern", "READY> ", fleetstate.StatusIdle},
		{"working", "thinking… (esc to interrupt)\n> ", fleetstate.StatusWorking},
		{"blocked beats working and idle", "Allow write to notes.md?\n(esc to interrupt)\n> ", fleetstate.StatusBlocked},
		{"working beats idle", "esc to interrupt\n> ", fleetstate.StatusWorking},
		{"anchors are per line", "x Allow it?\nnothing", fleetstate.StatusUnknown},
		{"nothing matches", "$ ls\nREADME.md", fleetstate.StatusUnknown},
		{"empty screen", "", fleetstate.StatusUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.classify(tc.screen); got != tc.want {
				t.Errorf("classify(%q) = %s; want %s", tc.screen, got, tc.want)
			}
		})
	}
	var none *compiled
	if got := none.classify("> "); got != fleetstate.StatusUnknown {
		t.Errorf("classify without patterns = %s; want %s", got, fleetstate.StatusUnknown)
	}
	if c, err := (*Patterns)(nil).compile(); c != nil || err != nil {
		t.Errorf("nil Patterns compile to %v, %v; want nil, nil", c, err)
	}
}

func TestBadPattern(t *testing.T) {
	_, err := NewPane(NewServer("/nonexistent"), "fleet:0.0", &PaneOptions{Patterns: &Patterns{Idle: []string{"("}}})
	if err == nil || !strings.Contains(err.Error(), `pattern "("`) {
		t.Fatalf("NewPane with a bad pattern: %v; want an error quoting it", err)
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"fewer lines than n", "a\nb", 5, "a\nb"},
		{"last n", "a\nb\nc\nd", 2, "c\nd"},
		{"blank tail dropped before counting", "a\nb\nc\n\n\n   \n", 2, "b\nc"},
		{"trailing spaces of the last line dropped", "a\n> ", 1, ">"},
		{"inner blank lines kept", "a\n\nb", 3, "a\n\nb"},
		{"empty", "", 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastLines(tc.in, tc.n); got != tc.want {
				t.Errorf("lastLines(%q, %d) = %q; want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

func TestGone(t *testing.T) {
	for msg, want := range map[string]bool{
		"can't find pane: %9":                                         true,
		"can't find window: dora":                                     true,
		"can't find session: fleet":                                   true,
		"no server running on /tmp/x/sock":                            true,
		"error connecting to /tmp/x/sock (No such file or directory)": true,
		"unknown command: frobnicate":                                 false,
		"":                                                            false,
	} {
		if got := gone(msg); got != want {
			t.Errorf("gone(%q) = %v; want %v", msg, got, want)
		}
	}
}

// ---- against a real tmux server on a private socket ------------------------

// newServer returns a tmux server on a private socket with one session,
// fleet, whose first window, agent, runs cmd in a pane of 60×20; the
// test's cleanup kills the server.
func newServer(t *testing.T, cmd string) *Server {
	t.Helper()
	srv := NewServer(fleettest.TmuxSocket(t))
	run(t, srv, "new-session", "-d", "-s", "fleet", "-n", "agent", "-x", "60", "-y", "20", cmd)
	return srv
}

func run(t *testing.T, srv *Server, args ...string) string {
	t.Helper()
	out, err := srv.Run(context.Background(), "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// paneIDs returns the IDs of the panes of target, in order.
func paneIDs(t *testing.T, srv *Server, target string) []string {
	t.Helper()
	return strings.Fields(run(t, srv, "list-panes", "-t", target, "-F", "#{pane_id}"))
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFile waits until the file at path holds want, and fails with what it
// holds if it does not within waitLimit.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	var got []byte
	if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
		got, _ = os.ReadFile(path)
		return string(got) == want
	}) {
		t.Fatalf("%s holds %q; want %q", filepath.Base(path), got, want)
	}
}

func TestResolve(t *testing.T) {
	srv := newServer(t, "sleep 600")
	run(t, srv, "split-window", "-d", "-t", "fleet:agent", "sleep 600")
	run(t, srv, "new-window", "-d", "-t", "fleet:", "-n", "other", "sleep 600")
	agent, other := paneIDs(t, srv, "fleet:agent"), paneIDs(t, srv, "fleet:other")
	if len(agent) != 2 || len(other) != 1 {
		t.Fatalf("panes %v and %v; want two and one", agent, other)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		target string
		want   string // "" : no such pane
	}{
		{"fleet:agent.0", agent[0]},
		{"fleet:agent.1", agent[1]},
		{"fleet:0.1", agent[1]},
		{"fleet:other", other[0]},
		{"fleet:1", other[0]},
		{"fleet:1.0", other[0]},
		{agent[1], agent[1]}, // a pane ID is taken as it is
		// tmux itself would answer these with some other pane.
		{"fleet:nope.0", ""},
		{"fleet:agent.7", ""},
		{"elsewhere:0.0", ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			p, err := NewPane(srv, tc.target, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := p.resolve(ctx)
			if tc.want == "" {
				if !errors.Is(err, fleetstate.ErrMemberGone) {
					t.Fatalf("resolve(%q) = %q, %v; want %v", tc.target, id, err, fleetstate.ErrMemberGone)
				}
				return
			}
			if err != nil || id != tc.want {
				t.Fatalf("resolve(%q) = %q, %v; want %q", tc.target, id, err, tc.want)
			}
		})
	}
}

// TestPaneReplaced: a pane that is gone is [fleetstate.ErrMemberGone]
// once; the target is then resolved again, so an agent restarted in a new
// pane under the same name is reached there.
func TestPaneReplaced(t *testing.T) {
	srv := newServer(t, "sleep 600")
	run(t, srv, "new-window", "-d", "-t", "fleet:", "-n", "keep", "sleep 600") // the session outlives the agent's window
	ctx := context.Background()
	p, err := NewPane(srv, "fleet:agent.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.resolve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run(t, srv, "kill-window", "-t", "fleet:agent")
	if _, err := p.Status(ctx); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Fatalf("Status of a killed pane: %v; want %v", err, fleetstate.ErrMemberGone)
	}
	run(t, srv, "new-window", "-d", "-t", "fleet:", "-n", "agent", "sleep 600")
	if _, err := p.Status(ctx); err != nil {
		t.Fatalf("Status once the agent is back in a new pane: %v", err)
	}
	second, err := p.resolve(ctx)
	if err != nil || second == first || second != paneIDs(t, srv, "fleet:agent")[0] {
		t.Fatalf("resolved to %q, %v after the restart; want the new pane %v, not %q", second, err, paneIDs(t, srv, "fleet:agent"), first)
	}

	// A pane named by its ID is that pane only.
	byID, err := NewPane(srv, second, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, srv, "kill-window", "-t", "fleet:agent")
	run(t, srv, "new-window", "-d", "-t", "fleet:", "-n", "agent", "sleep 600")
	for range 2 {
		if _, err := byID.Status(ctx); !errors.Is(err, fleetstate.ErrMemberGone) {
			t.Fatalf("Status of a pane ID that is gone: %v; want %v", err, fleetstate.ErrMemberGone)
		}
	}
}

func TestDeadPaneAndServer(t *testing.T) {
	srv := newServer(t, "sleep 600")
	run(t, srv, "set-option", "-g", "remain-on-exit", "on") // the server is the test's own
	run(t, srv, "new-window", "-d", "-t", "fleet:", "-n", "short", "true")
	ctx := context.Background()
	dead, err := NewPane(srv, "fleet:short.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
		return run(t, srv, "list-panes", "-t", "fleet:short", "-F", "#{pane_dead}") == "1"
	}) {
		t.Fatal("the pane of `true` never died")
	}
	_, err = dead.Status(ctx)
	if !errors.Is(err, fleetstate.ErrMemberGone) || !strings.Contains(err.Error(), "dead") {
		t.Fatalf("Status of a dead pane: %v; want %v, saying it is dead", err, fleetstate.ErrMemberGone)
	}
	if err := dead.Deliver(ctx, "x"); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Fatalf("Deliver to a dead pane: %v; want %v", err, fleetstate.ErrMemberGone)
	}

	live, err := NewPane(srv, "fleet:agent.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	// kill-server returns before the server has exited; a command sent
	// meanwhile fails with "server exited unexpectedly", which gone does
	// not count as gone (a transient: the next command finds no server).
	if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
		_, err := srv.Run(ctx, "", "list-sessions")
		return errors.Is(err, fleetstate.ErrMemberGone)
	}) {
		t.Fatal("the killed server still answers")
	}
	if _, _, err := live.Tail(ctx, 10); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Fatalf("Tail with the server gone: %v; want %v", err, fleetstate.ErrMemberGone)
	}
	if err := srv.Kill(ctx); err != nil {
		t.Fatalf("Kill of a server that is not running: %v; want nil", err)
	}
}

// TestDeliver: a delivery clears the draft in the input line, pastes the
// content as one block (bracketed, as the program asked) and submits it
// with one Enter, and leaves no paste buffer behind.
func TestDeliver(t *testing.T) {
	ctx := context.Background()
	t.Run("Bracketed", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "got")
		// The program asks for bracketed paste and records what it reads,
		// escapes made visible; the terminal is in canonical mode, where
		// C-u (one of the default clear keys) kills the line typed so far.
		// It prints READY> once it has asked: a paste before that would
		// come unbracketed.
		srv := newServer(t, script(t, `printf '\033[?2004hREADY>'; exec cat -v > `+out))
		p, err := NewPane(srv, "fleet:agent.0", nil)
		if err != nil {
			t.Fatal(err)
		}
		waitScreen(t, srv, "READY>")
		run(t, srv, "send-keys", "-t", "fleet:agent.0", "-l", "a draft")
		if err := p.Deliver(ctx, "first line\nsecond line"); err != nil {
			t.Fatal(err)
		}
		waitFile(t, out, "^[[200~first line\nsecond line^[[201~\n")
		if bufs := run(t, srv, "list-buffers", "-F", "#{buffer_name}"); strings.Contains(bufs, "fleetstate-") {
			t.Errorf("paste buffers left behind: %q", bufs)
		}
	})
	t.Run("Plain", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "got")
		srv := newServer(t, script(t, "exec cat > "+out))
		p, err := NewPane(srv, "fleet:agent.0", &PaneOptions{ClearKeys: []string{}}) // nothing to clear
		if err != nil {
			t.Fatal(err)
		}
		run(t, srv, "send-keys", "-t", "fleet:agent.0", "-l", "kept ")
		if err := p.Deliver(ctx, "hello, pane"); err != nil {
			t.Fatal(err)
		}
		waitFile(t, out, "kept hello, pane\n")
	})
}

// prompter is an agent stand-in: a prompt, and for each line read, five
// lines of output, a line wider than the pane, and the prompt again.
const prompter = `while :; do
	printf 'READY> '
	IFS= read -r line || exit
	for i in 0 1 2 3 4; do echo "out $i for $line"; done
	printf '%070d\n' 7
done
`

// waitScreen waits until the pane's screen, trailing blanks dropped, ends
// with suffix.
func waitScreen(t *testing.T, srv *Server, suffix string) {
	t.Helper()
	var screen string
	if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
		screen = strings.TrimRight(run(t, srv, "capture-pane", "-p", "-J", "-t", "fleet:agent.0"), "\n ")
		return strings.HasSuffix(screen, suffix)
	}) {
		t.Fatalf("screen %q; want it to end with %q", screen, suffix)
	}
}

// TestTail: the tail is what the pane printed from the last delivery's
// prompt to the cursor, wrapped lines joined, at most the lines asked for,
// clipped when there were more.
func TestTail(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, script(t, prompter))
	p, err := NewPane(srv, "fleet:agent.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitScreen(t, srv, "READY>")
	// Before any delivery: the visible screen.
	if tail, clipped, err := p.Tail(ctx, 10); err != nil || tail != "READY>" || clipped {
		t.Fatalf("Tail before a delivery = %q, %v, %v; want the screen, READY>", tail, clipped, err)
	}
	wide := strings.Repeat("0", 69) + "7" // wider than the pane's 60 columns
	for _, job := range []string{"first", "second"} {
		if err := p.Deliver(ctx, job); err != nil {
			t.Fatal(err)
		}
		// The job's own output, not the one before it, which ends alike.
		waitScreen(t, srv, "out 4 for "+job+"\n"+wide+"\nREADY>")
		want := []string{"READY> " + job, "out 0 for " + job, "out 1 for " + job, "out 2 for " + job,
			"out 3 for " + job, "out 4 for " + job, wide, "READY>"}
		tail, clipped, err := p.Tail(ctx, 100)
		if err != nil || tail != strings.Join(want, "\n") || clipped {
			t.Fatalf("Tail(100) after %q = %q, %v, %v; want %q, not clipped", job, tail, clipped, err, strings.Join(want, "\n"))
		}
		// The wide line takes two rows of the screen: the bound counts
		// rows, and the clipped tail ends at the cursor.
		tail, clipped, err = p.Tail(ctx, 4)
		if err != nil || tail != strings.Join(want[len(want)-3:], "\n") || !clipped {
			t.Fatalf("Tail(4) after %q = %q, %v, %v; want %q, clipped", job, tail, clipped, err, strings.Join(want[len(want)-3:], "\n"))
		}
	}
}

// TestTailOfAScreenDrawnInPlace: a program that keeps its input line at
// the bottom and redraws what it said above it, as Claude Code and Codex
// do, leaves the cursor where the delivery found it; the tail is then the
// visible screen, with what the program said.
func TestTailOfAScreenDrawnInPlace(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, script(t, screenDrawer))
	p, err := NewPane(srv, "fleet:agent.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitScreen(t, srv, ">")
	if err := p.Deliver(ctx, "work"); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, srv, "said: done with work\n>")
	tail, clipped, err := p.Tail(ctx, 100)
	if err != nil || clipped || !strings.Contains(tail, "said: done with work") || !strings.HasSuffix(tail, ">") {
		t.Fatalf("Tail = %q, %v, %v; want the screen with what the program said, up to its input line", tail, clipped, err)
	}
}

// screenDrawer draws its input line on the last row; it echoes nothing
// of what it reads (so the cursor does not move), and after a line it
// draws what it said over the row above the input line, as a program
// that draws its whole screen redraws a part of it.
const screenDrawer = `rows=$(tput lines)
draw() { printf '\033[%d;1H\033[K%s\033[%d;1H> ' $((rows-1)) "$1" "$rows"; }
printf '\033[H\033[2J'
draw ''
stty -echo
while read -r line; do draw "said: done with $line"; done
`

// TestStatus: the screen patterns give the status until a hook reports
// one; from then on the hook is the source.
func TestStatus(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, script(t, "printf 'READY> '; read line; echo 'WORKING on it'; exec sleep 600"))
	pats := &Patterns{Working: []string{`^WORKING`}, Idle: []string{`^READY>`}}
	p, err := NewPane(srv, "fleet:agent.0", &PaneOptions{Patterns: pats})
	if err != nil {
		t.Fatal(err)
	}
	blind, err := NewPane(srv, "fleet:agent.0", nil) // no patterns
	if err != nil {
		t.Fatal(err)
	}
	waitStatus := func(want fleetstate.Status) {
		t.Helper()
		var got fleetstate.Status
		if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
			got, err = p.Status(ctx)
			return err == nil && got == want
		}) {
			t.Fatalf("Status = %s, %v; want %s", got, err, want)
		}
	}
	waitStatus(fleetstate.StatusIdle)
	if st, err := blind.Status(ctx); err != nil || st != fleetstate.StatusUnknown {
		t.Fatalf("Status without patterns = %s, %v; want %s", st, err, fleetstate.StatusUnknown)
	}
	if err := p.Deliver(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	waitStatus(fleetstate.StatusWorking)
	p.Report(fleetstate.StatusBlocked)
	if st, err := p.Status(ctx); err != nil || st != fleetstate.StatusBlocked {
		t.Fatalf("Status after a hook reported BLOCKED = %s, %v; the screen says WORKING, the hook wins", st, err)
	}
	p.Report(fleetstate.StatusIdle)
	if st, err := p.Status(ctx); err != nil || st != fleetstate.StatusIdle {
		t.Fatalf("Status after a hook reported IDLE = %s, %v", st, err)
	}
}

// TestAgentPanes: an agent's pane is found by its AgentOption and
// addressed by its ID, so that names tmux would read as something else
// as a target (a window index, a window and pane, a format, a pane ID,
// a flag, words, a command separator) each reach their own pane. A new
// Pane (a daemon started again) finds the same pane; an agent started
// again in a new pane is found there.
func TestAgentPanes(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, "sleep 600")
	names := []string{"bob", "1", "bob.0", "#{pane_pid}", "%0", "-n", "with space", "semi;", `back\;`}
	ids := map[string]string{}
	start := func(name string) {
		t.Helper()
		id := run(t, srv, "new-window", "-d", "-t", "=fleet:", "-n", Format(name), "-P", "-F", "#{pane_id}", "cat")
		if err := srv.TagAgent(ctx, id, name); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	for _, n := range names {
		start(n)
	}
	msg := func(i int) string { return fmt.Sprintf("message-%d-end", i) }
	for i, n := range names {
		p, err := NewAgentPane(srv, "fleet", n, &PaneOptions{ClearKeys: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Deliver(ctx, msg(i)); err != nil {
			t.Fatalf("Deliver to %q: %v", n, err)
		}
	}
	for i, n := range names {
		if got := run(t, srv, "show-options", "-p", "-v", "-t", ids[n], AgentOption); got != n {
			t.Errorf("pane %s of %q: %s is %q", ids[n], n, AgentOption, got)
		}
		if got := run(t, srv, "list-panes", "-t", ids[n], "-F", "#{window_name}"); got != n {
			t.Errorf("pane %s of %q: window name %q", ids[n], n, got)
		}
		var screen string
		if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
			screen = run(t, srv, "capture-pane", "-p", "-J", "-t", ids[n])
			return strings.Contains(screen, msg(i))
		}) {
			t.Errorf("pane of %q never showed %s:\n%s", n, msg(i), screen)
		}
		for j := range names {
			if j != i && strings.Contains(screen, msg(j)) {
				t.Errorf("pane of %q shows %s, meant for %q:\n%s", n, msg(j), names[j], screen)
			}
		}
	}

	// A new Pane finds the same pane; a pane started again is found anew.
	again, err := NewAgentPane(srv, "fleet", "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := again.resolve(ctx); err != nil || id != ids["1"] {
		t.Fatalf("a new pane of %q resolves to %q, %v; want %s", "1", id, err, ids["1"])
	}
	run(t, srv, "kill-pane", "-t", ids["1"])
	if _, err := again.Status(ctx); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Fatalf("Status of a killed agent pane: %v; want %v", err, fleetstate.ErrMemberGone)
	}
	start("1")
	if id, err := again.resolve(ctx); err != nil || id != ids["1"] {
		t.Fatalf("after the restart %q resolves to %q, %v; want the new pane %s", "1", id, err, ids["1"])
	}
	if _, err := srv.AgentPane(ctx, "fleet", "nobody"); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Fatalf("AgentPane of an agent with no pane: %v; want %v", err, fleetstate.ErrMemberGone)
	}
}

// TestLiteral: an argument ending in ";" reaches tmux whole, not as the
// end of a command.
func TestLiteral(t *testing.T) {
	for in, want := range map[string]string{"a": "a", "a;": `a\;`, ";": `\;`, `a\;`: `a\\;`, "": ""} {
		if got := Literal(in); got != want {
			t.Errorf("Literal(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestQuestionOnScreenBeatsHooks: a screen the Blocked patterns match
// reads BLOCKED, with its question, whatever the hooks reported last (a
// CLI asks in its terminal after its hooks said it works); once the
// question is gone the hooks decide again.
func TestQuestionOnScreenBeatsHooks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv := newServer(t, script(t, "printf 'Bash command\\n  rm -rf build\\nDo you want to proceed?\\n> 1. Yes\\n  2. No\\n'; read line; clear; echo done > "+dir+"/answered; exec sleep 600"))
	pats := &Patterns{Blocked: []string{`Do you want to proceed\?`}, Idle: []string{`^READY>`}}
	p, err := NewPane(srv, "fleet:agent.0", &PaneOptions{Patterns: pats})
	if err != nil {
		t.Fatal(err)
	}
	p.Report(fleetstate.StatusWorking)
	var st fleetstate.Status
	if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
		st, err = p.Status(ctx)
		return err == nil && st == fleetstate.StatusBlocked
	}) {
		t.Fatalf("Status = %s, %v; want BLOCKED from the screen", st, err)
	}
	q := p.Question()
	for _, want := range []string{"rm -rf build", "Do you want to proceed?", "2. No"} {
		if !strings.Contains(q, want) {
			t.Errorf("Question() = %q; want it to hold %q", q, want)
		}
	}
	run(t, srv, "send-keys", "-t", "fleet:agent.0", "Enter")
	waitFile(t, filepath.Join(dir, "answered"), "done\n")
	if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
		st, err = p.Status(ctx)
		return err == nil && st == fleetstate.StatusWorking
	}) {
		t.Fatalf("Status = %s, %v after the question; want the hooks' WORKING", st, err)
	}
	if q := p.Question(); q != "" {
		t.Errorf("Question() = %q after the question; want none", q)
	}
}

// TestInterrupt presses Escape in the pane, as a person stopping a
// coding agent's work would.
func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "key")
	srv := newServer(t, script(t, "stty raw -echo; dd bs=1 count=1 2>/dev/null | od -An -c | tr -d ' \\n' > "+out+".tmp && mv "+out+".tmp "+out+"; exec sleep 600"))
	p, err := NewPane(srv, "fleet:agent.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFile(t, out, `033`)
}

// TestIdleScreenEndsAStaleHookReport: a turn interrupted at the pane ends
// without the Stop hook, so the hooks' WORKING stands only HookSettle
// against a screen that reads idle; a fresh report wins.
func TestIdleScreenEndsAStaleHookReport(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, script(t, "printf 'READY> '; exec sleep 600"))
	p, err := NewPane(srv, "fleet:agent.0", &PaneOptions{Patterns: &Patterns{Idle: []string{`^READY>`}}, HookSettle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitScreen(t, srv, "READY>")
	p.Report(fleetstate.StatusWorking)
	if st, err := p.Status(ctx); err != nil || st != fleetstate.StatusWorking {
		t.Fatalf("Status right after the hook's WORKING = %s, %v; want WORKING", st, err)
	}
	var st fleetstate.Status
	if !fleettest.Until(waitLimit, 10*time.Millisecond, func() bool {
		st, err = p.Status(ctx)
		return err == nil && st == fleetstate.StatusIdle
	}) {
		t.Fatalf("Status = %s, %v; want IDLE once the report is older than HookSettle", st, err)
	}
}
