package fleetwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		default:
			r := []rune(k)
			msg = tea.KeyPressMsg{Code: r[0], Text: k}
		}
		next, cmd := m.Update(msg)
		var msgs []tea.Msg
		m, msgs = drain(next.(Model), cmd)
		out = append(out, msgs...)
	}
	return m, out
}

// drain runs cmd, each command of a batch in turn, and applies to m what
// they return, running what that returns in its turn, as bubbletea
// would; it returns the model and the messages applied. A quit ends it.
func drain(m Model, cmd tea.Cmd) (Model, []tea.Msg) {
	if cmd == nil {
		return m, nil
	}
	var out []tea.Msg
	switch res := cmd().(type) {
	case tea.QuitMsg:
	case tea.BatchMsg:
		for _, c := range res {
			var msgs []tea.Msg
			m, msgs = drain(m, c)
			out = append(out, msgs...)
		}
	default:
		next, cmd := m.Update(res)
		m, out = drain(next.(Model), cmd)
		out = append([]tea.Msg{res}, out...)
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
	s.Requests = []Request{{ID: "req-1", Member: "scout", Tool: "Bash", Input: "rm -rf build", Cwd: "/w", Asked: t0}}
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
	wantRow(t, m, "miner", "yes", "IDLE", "0", "-", "-")
	m = feed(m, TickMsg(t0.Add(3e9)), DownMsg{Err: errors.New("no daemon serves /x")})
	wantRow(t, m, "miner", "stale", "IDLE", "0", "-", "-")
	if v := screen(m); !strings.Contains(v, "stale: as last seen at "+clock(t0.Add(3e9))+", before the daemon went") {
		t.Errorf("the view does not say the members are stale:\n%s", v)
	}
	m = feed(m, snapshot())
	wantRow(t, m, "miner", "yes", "IDLE", "0", "-", "-")
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

// fakeDecider is fakeActions that decides permission requests too.
type fakeDecider struct{ *fakeActions }

func (f fakeDecider) Decide(_ context.Context, id string, allow bool, message string) error {
	f.record(fmt.Sprintf("decide %s %v %s", id, allow, message))
	return f.err
}

const (
	reqA = "perm-aaaa1111-0000-4000-8000-00000000000a"
	reqB = "perm-bbbb2222-0000-4000-8000-00000000000b"
)

// requestsSnapshot has two pending requests, A then B.
func requestsSnapshot() SnapshotMsg {
	s := snapshot()
	s.Requests = []Request{
		{ID: reqA, Member: "scout", Tool: "Bash", Input: `{"command":"make test"}`, Asked: t0, Deadline: t0.Add(2 * time.Minute)},
		{ID: reqB, Member: "miner", Tool: "Bash", Input: `{"command":"rm -rf ~/work"}`, Asked: t0, Deadline: t0.Add(2 * time.Minute)},
	}
	return s
}

func permEvent(seq uint64, kind fleetstate.EventKind, id string, d *fleetstate.Decision, by, content string) EventMsg {
	p := &fleetstate.PermissionRequest{ID: id, Member: "scout", Tool: "Bash", Input: `{"command":"make test"}`, Decision: d}
	return ev(seq, 0, kind, fleetstate.Event{Member: "scout", Permission: p, By: by, Content: content})
}

// A decision acts on the request the person selected, by its ID: when
// that request leaves the list, the selection goes with it, and y or n
// never falls on the request that took its place.
func TestDecisionsFollowTheRequestNotItsPlace(t *testing.T) {
	for _, c := range []struct {
		name string
		gone EventMsg
		why  string
	}{
		{"expired", permEvent(5, fleetstate.EventPermissionExpired, reqA, nil, "timeout", "its window passed undecided"), "ended undecided (timeout): its window passed undecided"},
		{"decided elsewhere", permEvent(5, fleetstate.EventPermissionDecided, reqA, &fleetstate.Decision{Behavior: fleetstate.BehaviorAllow, By: "lead-b"}, "lead-b", ""), "allowed by lead-b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeActions{}
			m := feed(New("", t0, nil).WithActions(fakeDecider{f}), requestsSnapshot())
			m, _ = press(t, m, "tab", "tab", "tab")
			if v := screen(m); !strings.Contains(v, "▸ aaaa1111") {
				t.Fatalf("tab to the requests does not select the first:\n%s", v)
			}
			m = feed(m, c.gone)
			v := screen(m)
			if strings.Contains(v, "▸") || !strings.Contains(v, "request aaaa1111 "+c.why+"; nothing is selected") {
				t.Fatalf("after A left: a row is selected, or no notice of %q:\n%s", c.why, v)
			}
			m, _ = press(t, m, "y", "y", "n", "enter")
			if len(f.calls) != 0 || !strings.Contains(screen(m), "select a permission request first") {
				t.Fatalf("y, n with nothing selected: calls %q; want none\n%s", f.calls, screen(m))
			}
			// Reading A when it leaves ends the reading, and sends nothing.
			m = feed(New("", t0, nil).WithActions(fakeDecider{f}), requestsSnapshot())
			m, _ = press(t, m, "tab", "tab", "tab", "y")
			m = feed(m, c.gone)
			if m.mode != modeBrowse || !strings.Contains(screen(m), "request aaaa1111 "+c.why+"; nothing is selected; your decision was not sent") {
				t.Fatalf("A left under its confirmation: mode %d\n%s", m.mode, screen(m))
			}
			m, _ = press(t, m, "y")
			if len(f.calls) != 0 {
				t.Fatalf("y after A left under its confirmation: calls %q; want none", f.calls)
			}
			// B selected stays selected when A, above it, leaves.
			m = feed(New("", t0, nil).WithActions(fakeDecider{f}), requestsSnapshot())
			m, _ = press(t, m, "tab", "tab", "tab", "down")
			m = feed(m, c.gone)
			m, _ = press(t, m, "y", "y")
			if want := "decide " + reqB + " true "; len(f.calls) != 1 || f.calls[0] != want {
				t.Errorf("calls %q; want %q", f.calls, want)
			}
		})
	}
}

// A new snapshot without the selected request drops the selection too.
func TestSnapshotWithoutTheSelectedRequest(t *testing.T) {
	f := &fakeActions{}
	m := feed(New("", t0, nil).WithActions(fakeDecider{f}), requestsSnapshot())
	m, _ = press(t, m, "tab", "tab", "tab")
	s := requestsSnapshot()
	s.Requests = s.Requests[1:]
	m = feed(m, s)
	m, _ = press(t, m, "y", "y")
	if len(f.calls) != 0 || m.req != "" {
		t.Errorf("calls %q, selection %q; want none", f.calls, m.req)
	}
}

// y and n show the request whole, escaped, before anything is sent; y
// confirms, n takes an optional message, and esc leaves without a call.
func TestDecisionsShowTheWholeInputFirst(t *testing.T) {
	hidden := "git status" + strings.Repeat("\n", 40) + "; rm -rf ~/work"
	input, _ := json.Marshal(map[string]string{"command": hidden})
	s := snapshot()
	s.Requests = []Request{{ID: reqA, Member: "scout", Tool: "Bash", Input: string(input), Cwd: "/src", Asked: t0}}
	f := &fakeActions{}
	m := feed(New("", t0, nil).WithActions(fakeDecider{f}), s, tea.WindowSizeMsg{Width: 100, Height: 40})

	v := screen(m)
	if !strings.Contains(v, `"git status\n\n`) || !strings.Contains(v, "more characters)") {
		t.Fatalf("the request's row does not show its newlines and what it clips:\n%s", v)
	}
	m, _ = press(t, m, "tab", "tab", "tab", "y")
	v = screen(m)
	for _, want := range []string{"PERMISSION REQUEST " + reqA, `; rm -rf ~/work`, `\n\n\n`, "allow request aaaa1111, as shown above? y allows"} {
		if !strings.Contains(v, want) {
			t.Errorf("y: the confirmation lacks %q:\n%s", want, v)
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("y alone sent %q; want a confirmation first", f.calls)
	}
	m, _ = press(t, m, "esc")
	if len(f.calls) != 0 || m.mode != modeBrowse || !strings.Contains(screen(m), "allow of aaaa1111 not sent") {
		t.Fatalf("esc: calls %q, mode %d\n%s", f.calls, m.mode, screen(m))
	}
	m, _ = press(t, m, "n")
	if v := screen(m); !strings.Contains(v, "; rm -rf ~/work") || !strings.Contains(v, "deny aaaa1111; why (optional, for the agent): █") {
		t.Fatalf("n: no whole input or no message prompt:\n%s", v)
	}
	m, _ = press(t, m, append(typed("not in ~/work"), "enter")...)
	if want := "decide " + reqA + " false not in ~/work"; len(f.calls) != 1 || f.calls[0] != want {
		t.Fatalf("calls %q; want %q", f.calls, want)
	}
	if !strings.Contains(screen(m), "denied aaaa1111 (Bash of scout)") {
		t.Errorf("no notice of the denial:\n%s", screen(m))
	}
	m, _ = press(t, m, "y", "y")
	if want := "decide " + reqA + " true "; len(f.calls) != 2 || f.calls[1] != want {
		t.Fatalf("calls %q; want %q last", f.calls, want)
	}
	// enter reads a request whole without deciding; so does v.
	m, _ = press(t, m, "enter")
	if v := screen(m); m.mode != modeRequest || !strings.Contains(v, "; rm -rf ~/work") || !strings.Contains(v, "WHOLE INPUT (JSON, escaped)") {
		t.Fatalf("enter: mode %d\n%s", m.mode, v)
	}
	m, _ = press(t, m, "esc")
	if m.mode != modeBrowse || len(f.calls) != 2 {
		t.Errorf("esc from reading: mode %d, calls %q", m.mode, f.calls)
	}
}

// What a request holds that a terminal would hide or draw as something
// else is shown escaped: newlines in a tool's name, bidi overrides.
func TestRequestsShowHiddenCharactersEscaped(t *testing.T) {
	s := snapshot()
	s.Requests = []Request{
		{ID: reqA, Member: "scout", Tool: "Bash", Input: "{\"command\":\"echo \u202egnp.exe\"}", Asked: t0},
		{ID: reqB, Member: "scout", Tool: "Bash\nminer  yes  IDLE", Input: "{}", Asked: t0},
	}
	m := feed(New("", t0, nil), s)
	v := screen(m)
	if strings.ContainsRune(v, '\u202e') || strings.Contains(v, "\nminer  yes  IDLE") {
		t.Fatalf("the view draws what the request hides:\n%s", v)
	}
	if !strings.Contains(v, `Bash\nminer  yes  IDLE`) || !strings.Contains(v, `"echo \u202egnp.exe"`) {
		t.Errorf("the view does not show the escapes:\n%s", v)
	}
	m, _ = press(t, m, "tab", "tab", "tab", "v")
	if v := screen(m); m.mode != modeRequest || strings.ContainsRune(v, '\u202e') || !strings.Contains(v, `echo \u202egnp.exe`) {
		t.Errorf("v without actions: mode %d\n%s", m.mode, v)
	}
}

// Esc never quits: every prompt says esc leaves it, and on the lists
// there is no prompt. q and ctrl+c quit.
func TestEscDoesNotQuit(t *testing.T) {
	for _, actions := range []Actions{nil, &fakeActions{}} {
		m := feed(New("", t0, nil), snapshot())
		if actions != nil {
			m = m.WithActions(actions)
		}
		_, cmd := m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})
		if cmd != nil {
			if _, quit := cmd().(tea.QuitMsg); quit {
				t.Errorf("esc on the lists (actions %v) quits", actions != nil)
			}
		}
		for _, k := range []tea.KeyPressMsg{{Code: 'q', Text: "q"}, {Code: 'c', Mod: tea.ModCtrl}} {
			if _, cmd := m.Update(k); cmd == nil {
				t.Errorf("%s does not quit", k.String())
			} else if _, quit := cmd().(tea.QuitMsg); !quit {
				t.Errorf("%s does not quit", k.String())
			}
		}
	}
}

// Permission events say what was asked, how it ended, and by whom.
func TestPermissionEventsSayWhatAndWho(t *testing.T) {
	deny := &fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: "not the\nshared build", By: "lead-a"}
	for _, c := range []struct {
		name string
		e    EventMsg
		want string
	}{
		{"asked", permEvent(5, fleetstate.EventPermissionRequested, reqA, nil, "", ""), `aaaa1111 asks Bash "make test"`},
		{"allowed by the operator", permEvent(5, fleetstate.EventPermissionDecided, reqA, &fleetstate.Decision{Behavior: fleetstate.BehaviorAllow, By: "operator"}, "operator", ""),
			`aaaa1111 Bash "make test": allowed by operator`},
		{"denied with a message", permEvent(5, fleetstate.EventPermissionDecided, reqA, deny, "lead-a", deny.Message),
			`aaaa1111 Bash "make test": denied by lead-a: "not the\nshared build"`},
		{"by a rule, from a daemon without By", permEvent(5, fleetstate.EventPermissionDecided, reqA, &fleetstate.Decision{Behavior: fleetstate.BehaviorAllow, By: "rule Bash(make *)"}, "", ""),
			`allowed by rule Bash(make *)`},
		{"expired", permEvent(5, fleetstate.EventPermissionExpired, reqA, nil, "timeout", "its window passed undecided"),
			`aaaa1111 Bash "make test": ended undecided (timeout): its window passed undecided`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := feed(New("", t0, nil), snapshot(), c.e)
			if v := screen(m); !strings.Contains(v, c.want) {
				t.Errorf("the event reads otherwise; want %q in\n%s", c.want, v)
			}
		})
	}
}

// Merge events say who asked and how the merge ended, escaped.
func TestMergeEventsSayWhoAndHow(t *testing.T) {
	for _, c := range []struct {
		kind        fleetstate.EventKind
		by, content string
		want        string
	}{
		{fleetstate.EventMergeRequested, "operator", "merge alice into the lead's checkout", `by operator: "merge alice into the lead's checkout"`},
		{fleetstate.EventMerged, "lead", "alice into main: 0123456789ab", `by lead: "alice into main: 0123456789ab"`},
		{fleetstate.EventMergeRefused, "lead", "conflict: in README\nand more", `by lead: "conflict: in README\nand more"`},
	} {
		e := EventMsg{Event: fleetstate.Event{Seq: 5, Time: t0, Kind: c.kind, Member: "alice", By: c.by, Content: c.content}}
		m := feed(New("", t0, nil), snapshot(), e)
		if v := screen(m); !strings.Contains(v, c.want) {
			t.Errorf("%s reads otherwise; want %q in\n%s", c.kind, c.want, v)
		}
	}
}
