package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/tmux"
)

// TestScreensOfTestedVersions reads every screen captured from the CLIs
// of ClaudeCodeVersion and CodexVersion
// (testdata/screens/PROGRAM/STATUS-what.txt) with the program's built-in
// patterns: each must read as the status its name
// says. A new CLI version whose screens change fails here first; the
// real-agent tests of cmd/fleetstate capture the screens anew with
// -update.
func TestScreensOfTestedVersions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "screens", "*", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured screens: %v", err)
	}
	exhausted, err := agent.CompileExhausted(agent.ExhaustedPatterns())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		program := filepath.Base(filepath.Dir(f))
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		want, _, _ := strings.Cut(name, "-")
		seen[program+"/"+want] = true
		t.Run(program+"/"+name, func(t *testing.T) {
			p, ok := agent.ScreenPatternsOf(program)
			if !ok {
				t.Fatalf("no built-in patterns for %q", program)
			}
			screen, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pats := tmux.Patterns{Working: p.Working, Blocked: p.Blocked, Idle: p.Idle}
			got, err := pats.Classify(string(screen))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.EqualFold(got.String(), want) {
				t.Errorf("%s reads %s; want %s", f, got, strings.ToUpper(want))
			}
			// A working backend drew it: as a turn's tail, it must not
			// read as a spent one (Claude Code's banner says "API Usage
			// Billing" on every screen of a key's user).
			if exhausted.Match(string(screen)) {
				t.Errorf("%s matches an exhausted pattern; it is the screen of a backend that works", f)
			}
		})
	}
	for _, need := range []string{"claude/idle", "claude/blocked", "codex/idle", "codex/blocked"} {
		if !seen[need] {
			t.Errorf("no captured screen of %s", need)
		}
	}
}

// TestScreenPatternsAreCopies: the patterns returned are the caller's to
// change.
func TestScreenPatternsAreCopies(t *testing.T) {
	p, _ := agent.ScreenPatternsOf("claude")
	p.Idle[0] = "changed"
	if q, _ := agent.ScreenPatternsOf("claude"); q.Idle[0] == "changed" {
		t.Error("a change to the returned patterns reached the built-in ones")
	}
	if _, ok := agent.ScreenPatternsOf("vim"); ok {
		t.Error("patterns for a program that has none")
	}
}
