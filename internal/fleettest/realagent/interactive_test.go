package realagent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/modelserver"
	"github.com/fleetstate/fleetstate/internal/fleettest/realagent"
)

// Bounds of the interactive tests.
const (
	// screenTimeout bounds the wait for a screen; a CLI starts in 1 to
	// 5 s, and a scripted turn takes 1 to 4 s.
	screenTimeout = 60 * time.Second
	// screenPoll is how often a screen is read again.
	screenPoll = 100 * time.Millisecond
	// nudgeEvery is how often a key is sent again to a screen that has
	// not answered it yet: both CLIs ignore keys for a moment after they
	// first draw a screen.
	nudgeEvery = time.Second
)

// interactiveScript writes out.txt and says done.
const interactiveScript = "Write out.txt.\n[[script]]\nbash echo hi > out.txt\nsay done\n[[end]]"

// pane is a CLI running in a tmux pane of its own server.
type pane struct {
	t    *testing.T
	sock string
}

// startPane starts argv in a new tmux server with env, in dir.
func startPane(t *testing.T, dir string, env []string, argv ...string) pane {
	t.Helper()
	sock := fleettest.TmuxSocket(t)
	args := append([]string{"-S", sock, "new-session", "-d", "-x", "110", "-y", "40", "-c", dir, "--"}, argv...)
	cmd := exec.Command("tmux", args...)
	cmd.Env = realagent.Env(append(env, "TERM=xterm-256color")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	return pane{t, sock}
}

func (p pane) screen() string {
	out, err := exec.Command("tmux", "-S", p.sock, "capture-pane", "-p").Output()
	if err != nil {
		p.t.Fatalf("tmux capture-pane: %v", err)
	}
	return string(out)
}

func (p pane) keys(keys ...string) {
	if out, err := exec.Command("tmux", append([]string{"-S", p.sock, "send-keys"}, keys...)...).CombinedOutput(); err != nil {
		p.t.Fatalf("tmux send-keys: %v: %s", err, out)
	}
}

// paste pastes text as a terminal paste (bracketed), as a person pastes
// a brief: its line breaks do not submit it.
func (p pane) paste(text string) {
	buf := filepath.Join(p.t.TempDir(), "paste")
	if err := os.WriteFile(buf, []byte(text), 0o600); err != nil {
		p.t.Fatal(err)
	}
	for _, args := range [][]string{{"load-buffer", buf}, {"paste-buffer", "-p", "-d"}} {
		if out, err := exec.Command("tmux", append([]string{"-S", p.sock}, args...)...).CombinedOutput(); err != nil {
			p.t.Fatalf("tmux %s: %v: %s", args[0], err, out)
		}
	}
}

// wait waits for the screen to hold every one of texts, sending the keys
// nudge (if any) every nudgeEvery meanwhile, and returns it.
func (p pane) wait(texts []string, nudge ...string) string {
	p.t.Helper()
	return p.steer(func(s string) bool { return holds(s, texts...) }, func(string) []string { return nudge })
}

// steer waits for done to hold of the screen; meanwhile, every
// nudgeEvery, it sends the keys that act returns for the screen. It
// returns the screen done held of.
func (p pane) steer(done func(screen string) bool, act func(screen string) []string) string {
	p.t.Helper()
	var s string
	last := time.Now()
	if !fleettest.Until(screenTimeout, screenPoll, func() bool {
		s = p.screen()
		if done(s) {
			return true
		}
		if time.Since(last) > nudgeEvery {
			if keys := act(s); len(keys) > 0 {
				p.keys(keys...)
			}
			last = time.Now()
		}
		return false
	}) {
		p.t.Fatalf("the screen never showed what the test waits for; it shows:\n%s", s)
	}
	return s
}

// hasLine reports whether screen has a line that is line, but for spaces
// around it (tmux drops a line's trailing spaces).
func hasLine(screen, line string) bool {
	for _, l := range strings.Split(screen, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// holds reports whether screen holds every one of texts.
func holds(screen string, texts ...string) bool {
	for _, t := range texts {
		if !strings.Contains(screen, t) {
			return false
		}
	}
	return true
}

// waitFile waits for the file path to hold want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	var got []byte
	if !fleettest.Until(screenTimeout, screenPoll, func() bool {
		got, _ = os.ReadFile(path)
		return string(got) == want
	}) {
		t.Fatalf("%s holds %q; want %q", path, got, want)
	}
}

// TestClaudeCodeFirstRun starts Claude Code in tmux in the home
// [realagent.ClaudeHome] writes: the folder's trust dialog is the one
// screen before the prompt, and a pasted script runs.
func TestClaudeCodeFirstRun(t *testing.T) {
	claude, _ := realagent.Install(t)
	srv := modelserver.Start(t, nil)
	home, work := t.TempDir(), t.TempDir()
	env := realagent.ClaudeHome(t, home, srv.URL(), "sk-test-realagent-0123456789abcdef")
	p := startPane(t, work, env, claude)

	s := p.wait([]string{"Accessing workspace:", "Quick safety check: Is this a project you created or one you trust?",
		"❯ No, exit", "Yes, I trust this folder", "Enter to confirm · Esc to cancel"})
	t.Logf("trust dialog:\n%s", s)
	// The dialog ignores keys for a moment after it shows: the choice is
	// made, and confirmed, only once the screen shows it made.
	idle := func(s string) bool { return holds(s, "Claude Code v") && hasLine(s, "❯") }
	s = p.steer(idle, func(s string) []string {
		switch {
		case holds(s, "❯ No, exit"):
			return []string{"Down"}
		case holds(s, "❯ Yes, I trust this folder"):
			return []string{"Enter"}
		}
		return nil
	})
	if strings.Contains(s, "Auto mode is now") {
		t.Errorf("Claude Code showed its notice of auto mode to a returning user:\n%s", s)
	}
	p.paste(interactiveScript)
	p.wait([]string{"[Pasted text"})
	p.keys("Enter")
	waitFile(t, filepath.Join(work, "out.txt"), "hi\n")
	p.wait([]string{"● done"})
	ctx, cancel := context.WithTimeout(context.Background(), screenTimeout)
	defer cancel()
	if _, err := srv.WaitRequest(ctx, func(r modelserver.Request) bool { return r.Answer.Text == "done" }); err != nil {
		t.Fatal(err)
	}
}

// TestCodexFirstRun starts Codex in tmux in the home
// [realagent.CodexHome] writes: the trust screen of a git work tree comes
// once the composer takes keys, then a pasted script's command asks for approval
// and runs once approved.
func TestCodexFirstRun(t *testing.T) {
	_, codex := realagent.Install(t)
	srv := modelserver.Start(t, nil)
	home, work := t.TempDir(), t.TempDir()
	env := realagent.CodexHome(t, home, srv.URL(), "")
	// Codex asks for the trust of a folder under version control only.
	if out, err := exec.Command("git", "init", "-q", work).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	p := startPane(t, work, env, codex)

	p.wait([]string{"OpenAI Codex (v", "Ask Codex to do anything"})
	trust := []string{"Folder access", "Trust this folder? Codex can read, edit, and run files here",
		"› 1. Trust and continue", "2. Back to Agent Command Center"}
	// The nudge that makes the screen come is also the key that answers
	// it: on a loaded machine the screen can come and be answered by the
	// next nudge between two reads. Codex then has recorded the answer,
	// which only the screen records.
	trusted := func() bool {
		cfg, _ := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
		return strings.Contains(string(cfg), "[projects."+strconv.Quote(work)+"]")
	}
	s := p.steer(func(s string) bool { return holds(s, trust...) || trusted() }, func(string) []string { return []string{"Enter"} })
	t.Logf("trust screen:\n%s", s)
	p.steer(func(s string) bool { return !holds(s, "Folder access") && holds(s, "GPT-5.5 default") }, func(s string) []string {
		if holds(s, trust...) {
			return []string{"Enter"}
		}
		return nil
	})
	p.paste(interactiveScript)
	p.wait([]string{"[[end]]"})
	p.keys("Enter")
	s = p.wait([]string{"Would you like to run the following command?", "$ echo hi > out.txt", "› 1. Yes, proceed (y)"})
	t.Logf("approval:\n%s", s)
	p.keys("y")
	waitFile(t, filepath.Join(work, "out.txt"), "hi\n")
	p.wait([]string{"• done"})
	for _, r := range srv.Requests() {
		if r.API != modelserver.OpenAI || r.Answer.Status != 200 {
			t.Errorf("Codex sent %s %s, answered %d", r.Method, r.Path, r.Answer.Status)
		}
	}
}
