package leadcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/leadcli"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFormatOutcome(t *testing.T) {
	for _, c := range []struct {
		name string
		o    fleetstate.Outcome
		want string
	}{
		{"reply", fleetstate.Outcome{Kind: fleetstate.OutcomeReply, From: "alice", Ticket: "tk-1", TurnID: "turn-1", Content: "all green\n12 tests\n"},
			"reply from alice (ticket tk-1, turn turn-1):\n  all green\n  12 tests\n"},
		{"question", fleetstate.Outcome{Kind: fleetstate.OutcomeQuestion, From: "bob", Ticket: "tk-2", TurnID: "turn-2", Content: "which database?", State: fleetstate.TicketQuestion},
			"question from bob (ticket tk-2, turn turn-2): answer it with fleetstate answer turn-2 TEXT\n  which database?\n"},
		{"turn done, clipped", fleetstate.Outcome{Kind: fleetstate.OutcomeTurnDone, From: "carol", TurnID: "turn-3", Content: "$ make", Partial: true},
			"turn done by carol without a reply (turn turn-3); its pane's last lines, clipped:\n  $ make\n"},
		{"turn done", fleetstate.Outcome{Kind: fleetstate.OutcomeTurnDone, From: "carol", Content: "$ make"},
			"turn done by carol without a reply; its pane's last lines:\n  $ make\n"},
		{"failed", fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonCancelled, From: "dan", Ticket: "tk-4", Content: "the lead cancelled the turn"},
			"failed: cancelled, the turn of dan (ticket tk-4):\n  the lead cancelled the turn\n"},
		{"pending", fleetstate.Outcome{Kind: fleetstate.OutcomePending, From: "erin", Ticket: "tk-5", TurnID: "turn-5", State: fleetstate.TicketQueued},
			"pending: ticket tk-5, queued, to erin (fleetstate poll tk-5 collects it)\n"},
		{"pending without a state", fleetstate.Outcome{Kind: fleetstate.OutcomePending, From: "erin", Ticket: "tk-5"},
			"pending: ticket tk-5, not done, to erin (fleetstate poll tk-5 collects it)\n"},
		{"reply without text", fleetstate.Outcome{Kind: fleetstate.OutcomeReply, From: "fay", Ticket: "tk-6"},
			"reply from fay (ticket tk-6):\n"},
		{"terminal escapes", fleetstate.Outcome{Kind: fleetstate.OutcomeReply, From: "mallory", Content: "ok\x1b]0;pwned\x07\x1b[2J\r\tdone\u202e"},
			"reply from mallory:\n  ok\\u001b]0;pwned\\u0007\\u001b[2J\\u000d\tdone\\u202e\n"},
		{"invalid UTF-8", fleetstate.Outcome{Kind: fleetstate.OutcomeReply, From: "m", Content: "a\xffb"},
			"reply from m:\n  a\\xffb\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := leadcli.FormatOutcome(c.o); got != c.want {
				t.Errorf("got %q; want %q", got, c.want)
			}
		})
	}
}

func TestFormatTickets(t *testing.T) {
	if got := leadcli.FormatTickets(nil); got != "no tickets\n" {
		t.Errorf("no tickets: got %q", got)
	}
	got := leadcli.FormatTickets([]fleetstate.Outcome{
		{Kind: fleetstate.OutcomePending, From: "a", Ticket: "tk-1", State: fleetstate.TicketWorking},
		{Kind: fleetstate.OutcomeReply, From: "b", Ticket: "tk-2", Content: "done", State: fleetstate.TicketDone,
			Usage: &fleetstate.Usage{Input: 1500, Output: 42}},
	})
	want := "pending: ticket tk-1, working, to a (fleetstate poll tk-1 collects it)\n" +
		"reply from b (ticket tk-2, used 1,500 in, 42 out):\n  done\n"
	if got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestFormatMembers(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	got := leadcli.FormatMembers([]fleetstate.MemberInfo{
		{Name: "alice", Ready: true, Status: "IDLE", Usage: fleetstate.Usage{Input: 1234567, Output: 890}},
		{Name: "bob", Ready: true, Status: "WORKING", Queued: 2, OpenTurn: "turn-9", OpenSince: now.Add(-3*time.Minute - 5*time.Second),
			Usage: fleetstate.Usage{Input: 100, Output: 20, CacheRead: 5000, CacheWrite: 10}},
		{Name: "carol", Status: "PULL", OpenTurn: "turn-8", OpenSince: now.Add(-42 * time.Second)},
		{Name: "dan", Status: "UNKNOWN", OpenTurn: "turn-7", OpenSince: now.Add(-2 * time.Hour)},
	}, now)
	want := "" +
		"MEMBER  READY  STATUS   QUEUED  OPEN TURN     USED\n" +
		"alice   yes    IDLE     0       -             1,234,567 in, 890 out\n" +
		"bob     yes    WORKING  2       turn-9 (3m)   100 in, 20 out (cache 5,000 read, 10 written)\n" +
		"carol   no     PULL     0       turn-8 (42s)  0 in, 0 out\n" +
		"dan     no     UNKNOWN  0       turn-7 (2h)   0 in, 0 out\n" +
		"fleet: used 1,234,667 in, 910 out (cache 5,000 read, 10 written)\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := leadcli.FormatMembers(nil, now); !strings.HasPrefix(got, "no members") {
		t.Errorf("no members: got %q", got)
	}
	// With prices: each member's cost and the fleet's; a model with no
	// price is said.
	a, b := 1.5, 0.25
	got = leadcli.FormatMembers([]fleetstate.MemberInfo{
		{Name: "alice", Status: "IDLE", Usage: fleetstate.Usage{Input: 10, Output: 1}, Cost: &a},
		{Name: "bob", Status: "IDLE", Usage: fleetstate.Usage{Input: 5}, Cost: &b, Unpriced: true},
	}, now)
	for _, line := range []string{"10 in, 1 out, cost 1.50", "5 in, 0 out, cost 0.25 (and models with no price)",
		"fleet: used 15 in, 1 out, cost 1.75 (and models with no price)"} {
		if !strings.Contains(got, line) {
			t.Errorf("members with prices: no %q in\n%s", line, got)
		}
	}
}

func TestFormatBudgetsInCost(t *testing.T) {
	got := leadcli.FormatBudgets([]fleetstate.BudgetState{
		{Budget: fleetstate.Budget{Cost: 40, Per: "day"}, Spent: 10},
		{Member: "alice", Budget: fleetstate.Budget{Tokens: 800000}, Spent: 812345, Held: true},
		{Member: "bob", Budget: fleetstate.Budget{Cost: 2}, Spent: 0.5, Unpriced: []string{"gpt-x"}, Held: true},
	})
	for _, line := range []string{"cost 40.00 a day", "10.00 (25%)", "812,345 (101%)", "spent: no new turns",
		"0.50 (25%)", "no price for gpt-x: no new turns"} {
		if !strings.Contains(got, line) {
			t.Errorf("no %q in\n%s", line, got)
		}
	}
}

func TestCommandsAreTheirHelp(t *testing.T) {
	want := []string{"send", "poll", "ack", "answer", "cancel", "members", "requests", "approve", "deny", "budget", "changes", "merge"}
	cmds := leadcli.Commands()
	if len(cmds) != len(want) {
		t.Fatalf("Commands() has %d commands; want %v", len(cmds), want)
	}
	for i, c := range cmds {
		if c.Name != want[i] || c.Summary == "" || !strings.HasPrefix(c.Usage, "fleetstate "+c.Name) ||
			c.About == "" || !strings.HasPrefix(c.Example, "fleetstate "+c.Name) || strings.Contains(c.Summary, "\n") {
			t.Errorf("Commands()[%d] = %+v; want %s with a one-line summary, usage, about and example", i, c, want[i])
		}
		if !leadcli.Has(c.Name) {
			t.Errorf("Has(%q) = false", c.Name)
		}
		var out bytes.Buffer
		err := leadcli.Run(context.Background(), c.Name, []string{"--help"}, nil, &out, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s --help: %v; want flag.ErrHelp", c.Name, err)
		}
		for _, part := range []string{c.Summary, "usage: " + c.Usage, "flags:", "-json", "-dir", "-url", "example:\n  " + c.Example} {
			if !strings.Contains(out.String(), part) {
				t.Errorf("%s --help lacks %q:\n%s", c.Name, part, out.String())
			}
		}
	}
	for _, name := range []string{"serve", "allow", "", "SEND"} {
		if leadcli.Has(name) {
			t.Errorf("Has(%q) = true", name)
		}
	}
}

// A request's row shows what a terminal would hide (newlines, bidi
// marks) escaped, draws no row of its own from a tool's name, and marks
// what it clips; FormatRequest shows it whole.
func TestFormatRequests(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	hidden := "git status" + strings.Repeat("\n", 40) + "; rm -rf ~/work"
	input, _ := json.Marshal(map[string]string{"command": hidden})
	ps := []fleetstate.PermissionRequest{
		{ID: "perm-1", Member: "alice", Tool: "Bash", Input: string(input), Cwd: "/src", Asked: now.Add(-5 * time.Second)},
		{ID: "perm-2", Member: "bob", Tool: "Bash\nperm-3  carol  Bash  1s  /src  \"ls\"", Input: `{"command":"ls"}`, Asked: now},
		{ID: "perm-4", Member: "dan", Tool: "Bash", Input: "{\"command\":\"echo \u202egnp.exe\"}", Asked: now},
	}
	got := leadcli.FormatRequests(ps, now)
	for _, c := range []struct{ name, want string }{
		{"newlines escaped and the clip marked", `"git status\n\n\n`},
		{"how much is clipped", `… (+25 more characters)`},
		{"where to see it whole", "fleetstate requests ID shows a request whole"},
		{"a tool's newline escaped", `Bash\nperm-3  carol`},
		{"a bidi override escaped", `"echo \u202egnp.exe"`},
	} {
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: no %q in\n%s", c.name, c.want, got)
		}
	}
	if lines := strings.Count(got, "\n"); lines != 5 || strings.ContainsRune(got, '\u202e') {
		t.Errorf("got %d lines (want 5: heading, 3 rows, hint), or a raw bidi mark:\n%s", lines, got)
	}

	whole := leadcli.FormatRequest(ps[0], now)
	if !strings.Contains(whole, `; rm -rf ~/work`) || !strings.Contains(whole, `git status`+strings.Repeat(`\n`, 40)+`; rm`) ||
		strings.Count(whole, "\n") > 12 {
		t.Errorf("FormatRequest does not show the input whole on escaped lines:\n%s", whole)
	}
}
