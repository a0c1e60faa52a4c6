package fleetwatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/fleetstate/fleetstate"
)

// fakeActions records the calls of the view's keys.
type fakeActions struct {
	mu    sync.Mutex
	calls []string
	err   error
	block bool // Answer waits for its context to end
}

func (f *fakeActions) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeActions) Answer(ctx context.Context, turnID, text string) error {
	f.record("answer " + turnID + " " + text)
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.err
}

func (f *fakeActions) Cancel(_ context.Context, ticket string) error {
	f.record("cancel " + ticket)
	return f.err
}

func (f *fakeActions) Send(_ context.Context, member, brief string) (string, error) {
	f.record("send " + member + " " + brief)
	return "ticket-11112222-0000-4000-8000-000000000009", f.err
}

// press applies keys to m, running the command each returns (an action's
// call), and returns the model and the messages the commands made.
func press(t *testing.T, m Model, keys ...string) (Model, []tea.Msg) {
	t.Helper()
	var out []tea.Msg
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		default:
			r := []rune(k)
			msg = tea.KeyPressMsg{Code: r[0], Text: k}
		}
		next, cmd := m.Update(msg)
		m = next.(Model)
		if cmd != nil {
			res := cmd()
			if _, quit := res.(tea.QuitMsg); !quit {
				out = append(out, res)
				m = feed(m, res)
			}
		}
	}
	return m, out
}

// type_ presses each character of s.
func typed(s string) []string {
	var keys []string
	for _, r := range s {
		keys = append(keys, string(r))
	}
	return keys
}

func questionSnapshot() SnapshotMsg {
	s := snapshot()
	s.Snapshot.Tickets = []fleetstate.TicketInfo{
		{Lead: "lead", Brief: "map the north", Created: t0, Outcome: fleetstate.Outcome{Kind: fleetstate.OutcomePending, Ticket: "ticket-aaaa0000-0000-4000-8000-000000000001", TurnID: "turn-aaaa", From: "miner", State: fleetstate.TicketQueued}},
		{Lead: "lead", Brief: "dig", Created: t0, Outcome: fleetstate.Outcome{Kind: fleetstate.OutcomeQuestion, Ticket: ticket, TurnID: turn, From: "scout", Content: "which shaft?", State: fleetstate.TicketQuestion}},
	}
	return s
}

func TestKeysAnswerTheSelectedQuestion(t *testing.T) {
	f := &fakeActions{}
	m := feed(New("", t0, nil).WithActions(f), questionSnapshot())
	if s := screen(m); !strings.Contains(s, "QUESTIONS (1)") || !strings.Contains(s, `"which shaft?"`) || !strings.Contains(s, "a answer") {
		t.Fatalf("the view lacks the question or the keys:\n%s", s)
	}
	m, _ = press(t, m, "a")
	if s := screen(m); !strings.Contains(s, "answer scout: █") {
		t.Fatalf("a: no answer prompt:\n%s", s)
	}
	m, msgs := press(t, m, append(typed("the east one"), "enter")...)
	if len(f.calls) != 1 || f.calls[0] != "answer "+turn+" the east one" {
		t.Fatalf("calls %q; want the answer to %s", f.calls, turn)
	}
	if len(msgs) != 1 || msgs[0].(ActionDoneMsg).Err != nil || !strings.Contains(screen(m), "answered scout") {
		t.Errorf("after the answer: %v\n%s", msgs, screen(m))
	}
	if len(m.answering) != 0 {
		t.Errorf("answers under way after the call ended: %v; want none", m.answering)
	}
	// esc leaves a prompt without a call; q typed in it is text.
	m, _ = press(t, m, "a", "q", "esc")
	if len(f.calls) != 1 || m.mode != modeBrowse {
		t.Errorf("esc: calls %q, mode %d; want no new call, browsing", f.calls, m.mode)
	}
}

// An answer's call can block until the turn's next outcome; the view
// ends it once the stream shows the answer, and counts that a success.
func TestAnswerEndsWhenTheStreamShowsIt(t *testing.T) {
	f := &fakeActions{block: true}
	m := feed(New("", t0, nil).WithActions(f), questionSnapshot())
	m, _ = press(t, m, "a", "x")
	next, cmd := m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	m = next.(Model)
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	m = feed(m, ev(5, 0, fleetstate.EventAnswered, fleetstate.Event{Member: "scout", TurnID: turn, Ticket: ticket, Content: "x"}))
	msg := (<-done).(ActionDoneMsg)
	if msg.Err != nil {
		t.Errorf("the answer's call ended with %v; want success", msg.Err)
	}
	if len(m.answering) != 0 {
		t.Errorf("answers under way: %v; want none", m.answering)
	}
}

func TestKeysCancelTheSelectedTicketAfterConfirming(t *testing.T) {
	f := &fakeActions{}
	m := feed(New("", t0, nil).WithActions(f), questionSnapshot())
	m, _ = press(t, m, "c")
	if !strings.Contains(screen(m), "select a ticket first") || len(f.calls) != 0 {
		t.Fatalf("c outside the tickets: %q\n%s", f.calls, screen(m))
	}
	m, _ = press(t, m, "tab")
	if s := screen(m); !strings.Contains(s, "▸ aaaa0000") {
		t.Fatalf("tab: the first ticket is not selected:\n%s", s)
	}
	m, _ = press(t, m, "c")
	if s := screen(m); !strings.Contains(s, "cancel ticket aaaa0000 of miner? y/n") {
		t.Fatalf("c: no confirmation:\n%s", s)
	}
	m, _ = press(t, m, "n")
	if len(f.calls) != 0 || !strings.Contains(screen(m), "not sent") {
		t.Fatalf("n: calls %q; want none", f.calls)
	}
	m, _ = press(t, m, "c", "y")
	if len(f.calls) != 1 || f.calls[0] != "cancel ticket-aaaa0000-0000-4000-8000-000000000001" {
		t.Fatalf("c y: calls %q; want the cancel of the selected ticket", f.calls)
	}
	if !strings.Contains(screen(m), "cancelled ticket aaaa0000") {
		t.Errorf("no notice of the cancel:\n%s", screen(m))
	}
	f.err = errors.New("ERR_NOT_PERMITTED: turn belongs to another lead")
	m, _ = press(t, m, "down", "c", "y")
	if !strings.Contains(screen(m), "failed: ERR_NOT_PERMITTED") {
		t.Errorf("a refused cancel is not shown:\n%s", screen(m))
	}
}

func TestKeysSendATask(t *testing.T) {
	f := &fakeActions{}
	m := feed(New("", t0, nil).WithActions(f), snapshot())
	m, _ = press(t, m, "s")
	if s := screen(m); !strings.Contains(s, "send to: miner") {
		t.Fatalf("s: no member choice:\n%s", s)
	}
	m, _ = press(t, m, "down", "enter")
	if s := screen(m); !strings.Contains(s, "brief for scout: █") {
		t.Fatalf("no brief prompt for scout:\n%s", s)
	}
	m = feed(m, tea.PasteMsg{Content: "map the\nwest"})
	m, _ = press(t, m, "enter")
	if len(f.calls) != 1 || f.calls[0] != "send scout map the west" {
		t.Fatalf("calls %q; want the send to scout", f.calls)
	}
	if !strings.Contains(screen(m), "sent ticket 11112222 to scout") {
		t.Errorf("no notice of the send:\n%s", screen(m))
	}
}

// y and n have their slots: without a Decider they say so; the requests
// render when the snapshot carries them.
func TestPermissionKeysAndRequests(t *testing.T) {
	f := &fakeActions{}
	s := snapshot()
	s.Requests = []Request{{ID: "req-1", Member: "scout", Tool: "Bash", Input: "rm -rf build", Cwd: "/w", Created: t0}}
	m := feed(New("", t0, nil).WithActions(f), s)
	if v := screen(m); !strings.Contains(v, "PERMISSION REQUESTS (1)") || !strings.Contains(v, `"rm -rf build"`) {
		t.Fatalf("no request in the view:\n%s", v)
	}
	m, _ = press(t, m, "tab", "tab", "tab", "y")
	if v := screen(m); !strings.Contains(v, "cannot be decided from this view yet") || len(f.calls) != 0 {
		t.Errorf("y without a Decider: %q\n%s", f.calls, v)
	}
	if v := screen(feed(New("", t0, nil).WithActions(f), snapshot())); strings.Contains(v, "PERMISSION REQUESTS") {
		t.Errorf("a requests section without requests in the snapshot:\n%s", v)
	}
}

func TestWithoutActionsTheKeysOnlyWatch(t *testing.T) {
	m := feed(New("", t0, nil), questionSnapshot())
	m, _ = press(t, m, "a")
	if !strings.Contains(screen(m), "q quits") || m.mode != modeBrowse {
		t.Errorf("a without actions changed the mode:\n%s", screen(m))
	}
}

// The recent events that come with the snapshot are listed at once; a
// reconnect to the same daemon lists only those it has not shown.
func TestSnapshotShowsRecentEvents(t *testing.T) {
	s := snapshot()
	s.Recent = []fleetstate.Event{
		{Seq: 3, Time: t0, Kind: fleetstate.EventQueued, Member: "scout", Lead: "lead", Content: "map the north"},
		{Seq: 4, Time: t0, Kind: fleetstate.EventStatus, Member: "miner", Status: "IDLE"},
	}
	m := feed(New("", t0, nil), s)
	v := screen(m)
	if strings.Contains(v, "none yet") || !strings.Contains(v, `from lead: "map the north"`) {
		t.Fatalf("the recent events are not listed:\n%s", v)
	}
	m = feed(m, ev(5, 0, fleetstate.EventStatus, fleetstate.Event{Member: "scout", Status: "IDLE"}))
	s2 := snapshot()
	s2.Snapshot.Seq = 6
	s2.Recent = append(s.Recent, fleetstate.Event{Seq: 5, Time: t0, Kind: fleetstate.EventStatus, Member: "scout", Status: "IDLE"},
		fleetstate.Event{Seq: 6, Time: t0, Kind: fleetstate.EventStatus, Member: "scout", Status: "WORKING"})
	m = feed(m, DownMsg{}, s2)
	if len(m.events) != 4 {
		t.Errorf("after a reconnect: %d events listed; want 4 (no repeats)", len(m.events))
	}
}

// When the stream is gone, the members are shown as last seen, marked
// stale, not as ready; a new snapshot makes them live again.
func TestMembersStaleWhenTheDaemonIsGone(t *testing.T) {
	m := feed(New("", t0, nil), snapshot())
	wantRow(t, m, "miner", "yes", "IDLE", "0", "-")
	m = feed(m, TickMsg(t0.Add(3e9)), DownMsg{Err: errors.New("no daemon serves /x")})
	wantRow(t, m, "miner", "stale", "IDLE", "0", "-")
	if v := screen(m); !strings.Contains(v, "stale: as last seen at "+clock(t0.Add(3e9))+", before the daemon went") {
		t.Errorf("the view does not say the members are stale:\n%s", v)
	}
	m = feed(m, snapshot())
	wantRow(t, m, "miner", "yes", "IDLE", "0", "-")
}

// Members that go while one is being chosen end the choice, without a
// call or a crash.
func TestChoosingWhenTheMembersGo(t *testing.T) {
	f := &fakeActions{}
	m := feed(New("", t0, nil).WithActions(f), snapshot())
	m, _ = press(t, m, "s")
	m = feed(m, ev(5, 0, fleetstate.EventMemberRemoved, fleetstate.Event{Member: "miner"}),
		ev(6, 0, fleetstate.EventMemberRemoved, fleetstate.Event{Member: "scout"}))
	if s := screen(m); !strings.Contains(s, "send to: (no member)") {
		t.Errorf("the choice without members:\n%s", s)
	}
	m, _ = press(t, m, "down", "enter")
	if m.mode != modeBrowse || len(f.calls) != 0 || !strings.Contains(screen(m), "no member to send to") {
		t.Errorf("mode %d, calls %q; want browsing, no call:\n%s", m.mode, f.calls, screen(m))
	}
}
