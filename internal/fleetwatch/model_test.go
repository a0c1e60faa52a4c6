package fleetwatch

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetstate/fleetstate"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// feed applies msgs to m in order, as bubbletea would.
func feed(m Model, msgs ...tea.Msg) Model {
	for _, msg := range msgs {
		next, _ := m.Update(msg)
		m = next.(Model)
	}
	return m
}

// screen is the view's text without its styles.
func screen(m Model) string { return ansi.Strip(m.View().Content) }

// row returns the line of the view that starts (after its indent) with
// name, its fields split on runs of spaces.
func row(t *testing.T, m Model, name string) []string {
	t.Helper()
	for _, l := range strings.Split(screen(m), "\n") {
		f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1)
		if len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no line for %q in the view:\n%s", name, screen(m))
	return nil
}

func wantRow(t *testing.T, m Model, want ...string) {
	t.Helper()
	got := row(t, m, want[0])
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("row %q = %q; want %q\nview:\n%s", want[0], got, want, screen(m))
	}
}

func ev(seq uint64, at time.Duration, kind fleetstate.EventKind, e fleetstate.Event) EventMsg {
	e.Seq, e.Time, e.Kind = seq, t0.Add(at), kind
	return EventMsg{Event: e}
}

const (
	ticket = "ticket-0a1b2c3d-0000-4000-8000-000000000001"
	turn   = "turn-9e8f7a6b-0000-4000-8000-000000000001"
)

func snapshot() SnapshotMsg {
	return SnapshotMsg{URL: "http://127.0.0.1:7333", Snapshot: fleetstate.Snapshot{
		Seq: 4,
		Members: []fleetstate.MemberInfo{
			{Name: "scout", Status: "PULL"},
			{Name: "miner", Ready: true, Status: "IDLE"},
		},
		Tickets: []fleetstate.TicketInfo{},
	}}
}

func TestSnapshotShowsMembers(t *testing.T) {
	m := feed(New("", t0, nil), snapshot())
	wantRow(t, m, "NAME", "READY", "STATUS", "QUEUED", "USED", "TURN")
	wantRow(t, m, "miner", "yes", "IDLE", "0", "-", "-")
	wantRow(t, m, "scout", "no", "PULL", "0", "-", "-")
	s := screen(m)
	for _, want := range []string{"http://127.0.0.1:7333", "live", "MEMBERS (2)", "TICKETS (0)", "no tickets", "none yet"} {
		if !strings.Contains(s, want) {
			t.Errorf("view lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "miner") > strings.Index(s, "scout") {
		t.Errorf("members not sorted by name:\n%s", s)
	}
}

// A turn's life, event by event: the member's row and the ticket follow.
func TestEventsMoveTheView(t *testing.T) {
	m := feed(New("", t0, nil), snapshot())
	scout := fleetstate.Event{Member: "scout", Lead: "lead", TurnID: turn, Ticket: ticket}
	with := func(e fleetstate.Event, f func(*fleetstate.Event)) fleetstate.Event { f(&e); return e }

	m = feed(m, ev(5, 0, fleetstate.EventReady, fleetstate.Event{Member: "scout"}))
	wantRow(t, m, "scout", "yes", "PULL", "0", "-", "-")

	m = feed(m, ev(6, time.Second, fleetstate.EventQueued, with(scout, func(e *fleetstate.Event) { e.Content = "map the\nnorth" })))
	wantRow(t, m, "scout", "yes", "PULL", "1", "-", "-")
	wantRow(t, m, "0a1b2c3d", "scout", "lead", "queued", "0s", `"map the north"`)

	m = feed(m, ev(7, 2*time.Second, fleetstate.EventDelivered, scout), TickMsg(t0.Add(14*time.Second)))
	wantRow(t, m, "scout", "yes", "PULL", "0", "-", "working 12s")
	wantRow(t, m, "0a1b2c3d", "scout", "lead", "working", "13s", `"map the north"`)

	m = feed(m, ev(8, 15*time.Second, fleetstate.EventStatus, fleetstate.Event{Member: "scout", Status: "WORKING"}))
	wantRow(t, m, "scout", "yes", "WORKING", "0", "-", "working 12s")

	m = feed(m, ev(9, 16*time.Second, fleetstate.EventAsked, with(scout, func(e *fleetstate.Event) { e.Content = "which way?" })))
	wantRow(t, m, "scout", "yes", "WORKING", "0", "-", "question 12s")
	wantRow(t, m, "0a1b2c3d", "scout", "lead", "question", "13s", `asks "which way?"`)

	m = feed(m, ev(10, 17*time.Second, fleetstate.EventAnswered, with(scout, func(e *fleetstate.Event) { e.Content = "left" })))
	wantRow(t, m, "0a1b2c3d", "scout", "lead", "working", "13s", `"map the north"`)

	m = feed(m, ev(11, 18*time.Second, fleetstate.EventOutcome, with(scout, func(e *fleetstate.Event) {
		e.Outcome = &fleetstate.Outcome{Kind: fleetstate.OutcomeReply, Content: "north is clear", TurnID: turn, From: "scout"}
		e.Held = true
	})))
	wantRow(t, m, "scout", "yes", "WORKING", "0", "-", "-")
	wantRow(t, m, "0a1b2c3d", "scout", "lead", "done", "13s", `reply: "north is clear"`)

	m = feed(m, ev(12, 19*time.Second, fleetstate.EventAcked, scout), ev(13, 20*time.Second, fleetstate.EventGone, fleetstate.Event{Member: "scout"}))
	wantRow(t, m, "scout", "no", "WORKING", "0", "-", "-")
	if s := screen(m); !strings.Contains(s, "TICKETS (0)") {
		t.Errorf("acked ticket still listed:\n%s", s)
	}

	// The event list, newest last.
	s := screen(m)
	for _, want := range []string{
		`queued     scout  from lead: "map the north"`,
		`asked      scout  "which way?"`,
		`answered   scout  "left"`,
		`outcome    scout  reply: "north is clear" (held on the ticket)`,
		`gone       scout`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("event list lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "queued     scout") > strings.Index(s, "gone       scout") {
		t.Errorf("events not oldest first:\n%s", s)
	}
}

// A queued turn that never opens (cancelled, or its member never ready)
// leaves the queue when its outcome comes; members come and go.
func TestQueuedTurnFailsAndMembersChange(t *testing.T) {
	m := feed(New("", t0, nil), snapshot(),
		ev(5, 0, fleetstate.EventQueued, fleetstate.Event{Member: "miner", Lead: "lead", TurnID: turn, Ticket: ticket, Content: "dig"}),
		ev(6, 0, fleetstate.EventCancelled, fleetstate.Event{Member: "miner", Lead: "lead", TurnID: turn, Ticket: ticket}),
		ev(7, 0, fleetstate.EventOutcome, fleetstate.Event{Member: "miner", Lead: "lead", TurnID: turn, Ticket: ticket,
			Outcome: &fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonCancelled}}),
		ev(8, 0, fleetstate.EventMemberAdded, fleetstate.Event{Member: "archer"}),
		ev(9, 0, fleetstate.EventMemberRemoved, fleetstate.Event{Member: "scout"}),
	)
	wantRow(t, m, "miner", "yes", "IDLE", "0", "-", "-")
	wantRow(t, m, "0a1b2c3d", "miner", "lead", "done", "0s", "failed: cancelled")
	wantRow(t, m, "archer", "no", "-", "0", "-", "-")
	if s := screen(m); strings.Contains(s, "  scout  no") || !strings.Contains(s, "MEMBERS (2)") {
		t.Errorf("removed member still listed:\n%s", s)
	}
}

// A usage event changes the member's row, not the event list: a member
// reports usage at every tool call.
func TestUsageShowsOnTheMemberRow(t *testing.T) {
	m := feed(New("", t0, nil), snapshot())
	before := len(m.events)
	m = feed(m,
		ev(5, 0, fleetstate.EventUsage, fleetstate.Event{Member: "miner", Usage: &fleetstate.Usage{Input: 999, Output: 12}}),
		ev(6, 0, fleetstate.EventUsage, fleetstate.Event{Member: "scout", Usage: &fleetstate.Usage{Input: 12_345, Output: 1_250_000}}),
	)
	wantRow(t, m, "miner", "yes", "IDLE", "0", "999 in 12 out", "-")
	wantRow(t, m, "scout", "no", "PULL", "0", "12.3k in 1.2M out", "-")
	if len(m.events) != before {
		t.Errorf("usage events added %d lines to the event list", len(m.events)-before)
	}
	// A budget event marks the row and is listed.
	spent := &fleetstate.BudgetState{Member: "miner", Budget: fleetstate.Budget{Tokens: 1000}, Spent: 1011, Held: true}
	m = feed(m, ev(7, 0, fleetstate.EventBudgetExhausted, fleetstate.Event{Member: "miner", Budget: spent}))
	wantRow(t, m, "miner", "yes", "IDLE", "0", "999 in 12 out (budget spent)", "-")
	if s := screen(m); !strings.Contains(s, "budget_exhausted") || !strings.Contains(s, "budget of 1000 tokens: 1.0k spent, no new turns") {
		t.Errorf("the budget event is not listed:\n%s", s)
	}
	half := &fleetstate.BudgetState{Member: "miner", Budget: fleetstate.Budget{Tokens: 2000}, Spent: 1011}
	m = feed(m, ev(8, 0, fleetstate.EventBudgetSet, fleetstate.Event{Member: "miner", Budget: half}))
	wantRow(t, m, "miner", "yes", "IDLE", "0", "999 in 12 out (50% of budget)", "-")
	// With prices, the cost; a budget in cost held by a model with no
	// price says which.
	cost := 0.0123
	m = feed(m, ev(9, 0, fleetstate.EventUsage, fleetstate.Event{Member: "scout", Usage: &fleetstate.Usage{Input: 10, Output: 1}, Cost: &cost, Unpriced: true}))
	wantRow(t, m, "scout", "no", "PULL", "0", "10 in 1 out 0.0123+?", "-")
	odd := &fleetstate.BudgetState{Member: "scout", Budget: fleetstate.Budget{Cost: 5, Per: "day"}, Spent: 1.5, Unpriced: []string{"odd\x1b[31m"}, Held: true}
	m = feed(m, ev(10, 0, fleetstate.EventBudgetExhausted, fleetstate.Event{Member: "scout", Budget: odd}))
	if s := screen(m); !strings.Contains(s, `budget of cost 5.00 per day: 1.50 spent, no price for odd\u001b[31m, no new turns`) {
		t.Errorf("the budget in cost is not listed, escaped:\n%s", s)
	}
}

// An event the snapshot already covers changes nothing.
func TestEventsBeforeTheSnapshotAreSkipped(t *testing.T) {
	m := feed(New("", t0, nil), snapshot(), ev(4, 0, fleetstate.EventReady, fleetstate.Event{Member: "scout"}))
	wantRow(t, m, "scout", "no", "PULL", "0", "-", "-")
}

// A snapshot's open turn shows its age from when it was delivered.
func TestSnapshotOpenTurnAge(t *testing.T) {
	snap := snapshot()
	snap.Snapshot.Members[1].OpenTurn = turn
	snap.Snapshot.Members[1].OpenSince = t0.Add(-3*time.Minute - 4*time.Second)
	snap.Snapshot.Members[1].Queued = 2
	snap.Snapshot.Tickets = []fleetstate.TicketInfo{{Lead: "lead", Brief: "dig", Created: t0.Add(-2 * time.Hour),
		Outcome: fleetstate.Outcome{TurnID: turn, Ticket: ticket, From: "miner", State: fleetstate.TicketWorking, Kind: fleetstate.OutcomePending}}}
	m := feed(New("", t0, nil), snap)
	wantRow(t, m, "miner", "yes", "IDLE", "2", "-", "working 3m04s")
	wantRow(t, m, "0a1b2c3d", "miner", "lead", "working", "2h00m", `"dig"`)
}

func TestGapAndConnectionNotices(t *testing.T) {
	m := feed(New("http://127.0.0.1:7333", t0, nil))
	if s := screen(m); !strings.Contains(s, "connecting…") {
		t.Errorf("before the snapshot: want connecting…:\n%s", s)
	}
	m = feed(m, snapshot(), GapMsg{Missed: 7, Time: t0})
	s := screen(m)
	for _, want := range []string{"⚠ missed 7 events at", "re-synced from a fresh snapshot", "connecting…", "missed 7 events; reconnecting"} {
		if !strings.Contains(s, want) {
			t.Errorf("after a gap: view lacks %q:\n%s", want, s)
		}
	}
	m = feed(m, DownMsg{Err: errors.New("no daemon serves /x: start `fleetstate serve --dir /x`"), Retry: 2 * time.Second})
	if s := screen(m); !strings.Contains(s, "disconnected: no daemon serves /x: start `fleetstate serve --dir /x`; retrying in 2s") {
		t.Errorf("when down: view lacks the error and the retry:\n%s", s)
	}
	m = feed(m, snapshot())
	if s := screen(m); !strings.Contains(s, "live") || strings.Contains(s, "disconnected") {
		t.Errorf("after a new snapshot: want live:\n%s", s)
	}
}

func TestQuitKeys(t *testing.T) {
	for _, key := range []tea.KeyPressMsg{{Code: 'q', Text: "q"}, {Code: 'c', Mod: tea.ModCtrl}} {
		_, cmd := New("", t0, nil).Update(key)
		if cmd == nil {
			t.Fatalf("%s: no command; want quit", key)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s: command does not quit", key)
		}
	}
	if _, cmd := New("", t0, nil).Update(tea.KeyPressMsg{Code: 'x', Text: "x"}); cmd != nil {
		t.Errorf("x: a command; want none")
	}
}

// The event list is bounded, and the view fits the window.
func TestBoundsAndWindow(t *testing.T) {
	m := feed(New("", t0, nil), snapshot(), tea.WindowSizeMsg{Width: 40, Height: 20})
	for i := range 3 * MaxEvents {
		m = feed(m, ev(uint64(5+i), 0, fleetstate.EventStatus, fleetstate.Event{Member: "scout", Status: fmt.Sprint("S", i)}))
	}
	if len(m.events) != MaxEvents {
		t.Errorf("kept %d events; want %d", len(m.events), MaxEvents)
	}
	lines := strings.Split(screen(m), "\n")
	if len(lines) > 20 {
		t.Errorf("%d lines in a window of 20", len(lines))
	}
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > 40 {
			t.Errorf("line %q is %d wide in a window of 40", l, w)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, fmt.Sprint("S", 3*MaxEvents-1)) {
		t.Errorf("last line %q; want the newest event", last)
	}
}

func TestTickMovesTheClock(t *testing.T) {
	m := New("", t0, nil)
	next, cmd := m.Update(TickMsg(t0.Add(time.Second)))
	if next.(Model).now != t0.Add(time.Second) || cmd == nil {
		t.Errorf("tick: now %v, command %v; want the new time and the next tick", next.(Model).now, cmd)
	}
}

// The model asks for the stream's next message after each one, and ends
// its listening when the stream closes.
func TestListen(t *testing.T) {
	ch := make(chan tea.Msg, 1)
	m := New("", t0, ch)
	ch <- snapshot()
	msg := m.listen()()
	next, cmd := m.Update(msg)
	if len(next.(Model).members) != 2 || cmd == nil {
		t.Fatalf("after the snapshot: %d members, command %v; want 2 and the next listen", len(next.(Model).members), cmd)
	}
	close(ch)
	if _, cmd := next.Update(cmd()); cmd != nil {
		t.Errorf("after the stream closed: a command; want none")
	}
	if New("", t0, nil).listen() != nil {
		t.Errorf("listen without a channel: want no command")
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 59*time.Second + 900*time.Millisecond: "59s",
		time.Minute: "1m00s", 3*time.Minute + 4*time.Second: "3m04s", 2*time.Hour + 5*time.Minute: "2h05m",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q; want %q", d, got, want)
		}
	}
}

func TestShortID(t *testing.T) {
	for id, want := range map[string]string{ticket: "0a1b2c3d", turn: "9e8f7a6b", "abc": "abc", "": ""} {
		if got := shortID(id); got != want {
			t.Errorf("shortID(%q) = %q; want %q", id, got, want)
		}
	}
}
