package agent_test

import (
	"slices"
	"testing"

	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/tmux"
)

// codexApproval is the bottom of Codex 0.169.0's approval prompt, with the
// lines TestCodexFirstRun waits for ("Would you like to run the following
// command?", "$ echo hi > out.txt", "› 1. Yes, proceed (y)").
const codexApproval = `• Working (3s • esc to interrupt)

  Would you like to run the following command?

  $ echo hi > out.txt

› 1. Yes, proceed (y)
  2. Yes, and don't ask again for commands that start with ` + "`echo hi`" + ` (p)
  3. No, and tell Codex what to do differently (esc)

  Press enter to confirm or esc to cancel
`

// TestCodexApprovalPromptReadsBlocked: Codex's own approval prompt is a
// question (BLOCKED), never an idle input line, whatever else the screen
// shows; its "› 1." is a choice, not the composer.
func TestCodexApprovalPromptReadsBlocked(t *testing.T) {
	p, _ := agent.ScreenPatternsOf("codex")
	pats := tmux.Patterns{Working: p.Working, Blocked: p.Blocked, Idle: p.Idle}
	for name, screen := range map[string]string{
		"whole":         codexApproval,
		"choices only":  "› 1. Yes, proceed (y)\n  2. No, and tell Codex what to do differently (esc)\n",
		"question only": "  Would you like to run the following command?\n\n  $ rm -rf build\n",
	} {
		got, err := pats.Classify(screen)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != "BLOCKED" {
			t.Errorf("%s: Codex's approval prompt reads %s; want BLOCKED", name, got)
		}
	}
}

// TestCodexInterruptStopsBackgroundCommands: an interrupt of Codex types
// /stop after the Escape; Claude Code needs nothing more.
func TestCodexInterruptStopsBackgroundCommands(t *testing.T) {
	if got := agent.InterruptCommands("codex"); !slices.Contains(got, "/stop") {
		t.Errorf("InterruptCommands(codex) = %q; want /stop, which ends the commands Codex leaves running", got)
	}
	if got := agent.InterruptCommands("claude"); len(got) != 0 {
		t.Errorf("InterruptCommands(claude) = %q; want none", got)
	}
}
