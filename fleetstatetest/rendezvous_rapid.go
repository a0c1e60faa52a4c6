package fleetstatetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
	"pgregory.net/rapid"
)

// TestRendezvousStateMachine drives a rendezvous with pulling members and
// one or two leads through random interleavings of send, next, ask,
// answer, reply, cancel, poll, ack, disconnects, superseded connections,
// crashes with restarts, and the passing of time, against a model of every
// turn, ticket and member.
//
// Each run is a synctest bubble (rapid.SyncTest): after each action the
// test waits until every goroutine it started is durably blocked, so the
// model knows exactly which calls must have returned and with what. Fake
// time moves only when the test sleeps: each action first moves it by a
// millisecond, so that no two actions start at the same instant and no
// timer of the library (all armed at an action's instant or at another
// timer's, for whole seconds) falls on another one armed by a different
// action; the test's own bounds (contexts, poll waits) end half-way
// between seconds. A sleep replays, instant by instant in the model, every
// bound that passes: send and ask windows, contexts, readiness timers
// (member_not_ready), windows of questions restored after a restart, the
// rejoin bound of members restored with an open turn (member_gone), and
// the bounds of waiting polls.
//
// Every call's result is compared field by field with the model's. After
// every action the invariant compares each lead's tickets as the
// rendezvous holds them ([fleetstate.Rendezvous.Snapshot], which shows and
// releases nothing) with the
// model: the outcome Poll would return, whether a call
// of the lead is blocked on it, whether it is news to the lead (a question
// or outcome not shown yet) and whether it is handed (an outcome a call
// returned, which the lead's next acting call releases). It also keeps a
// ledger:
//
//   - a message is delivered by Next at most once, across restarts too;
//   - no ended turn's outcome is lost: each was returned by a call of its
//     lead (Send, Answer, Cancel), or is held on its ticket, or was acked;
//     it is held at most once and acked at most once, never both;
//   - an outcome a call returned is held (handed) until exactly the lead's
//     next acting call (Send, SendDetached, Answer, Cancel, or a successful
//     Ack) and not a call later; Poll, PollAll and PollPage release
//     nothing; a restart turns it into a plain held outcome;
//   - with HoldReturned, which some runs draw (as a daemon runs), the
//     lead's next call releases nothing: a returned outcome is held until
//     its ack or the end of its hold, and a restart turns it into a plain
//     held outcome too (on a state directory such outcomes live in the
//     held log, so restarts there check the log against the slots);
//   - a call the model holds blocked has not returned, and no call blocked
//     that should have returned.
//
// Waiting polls: PollAll with a wait returns at once only if some ticket
// holds news; otherwise it returns when a change brings news (with the
// list at that moment, everything done or asking in it now shown), or at
// its bound with the current list. The model keeps at most one waiting
// PollAll per lead. When several timers of the library end turns at the
// same instant (the ready timers of a member's queue, the rejoin bounds of
// a restart), a poll may wake between them: it must then return the list
// as it stood after some of them.
//
// The error actions want exact codes: ERR_UNKNOWN_TURN (an unknown,
// finished or forgotten turn), ERR_NO_PENDING_QUESTION, ERR_NOT_PERMITTED
// (another lead's turn), ERR_NO_OPEN_TURN (Reply or Ask without an open
// turn) or ERR_TURN_CANCELLED (the same after the lead cancelled the
// member's turn, until its next Next), ERR_QUESTION_PENDING,
// ERR_TICKET_OPEN (ack of an unfinished ticket), ERR_UNKNOWN_TICKET (Poll,
// Ack or Cancel of an unknown, forgotten or other lead's ticket) and
// ERR_FLEET_OWNED (a second rendezvous on the fleet of an open
// one, which must change nothing). A restart (Home.Crash, then a new
// rendezvous in the same home, and the members added again)
// releases every blocked call (ERR_CLOSED; a lead's with its ticket) and
// must restore every ticket the model holds. At the end, Close must
// release every blocked call in the same way, and a rendezvous on the same
// fleet must find every ticket the model still holds. The fleet of each
// run lives in a home of its own from newHome.
//
// Not driven here: a blocked call whose context ends at the very instant
// its outcome arrives (the outcome is then held until acked rather than
// handed), which the test cannot bring about without a race, and
// RemoveMember.
func TestRendezvousStateMachine(t *testing.T, newHome func(t TB) Home) {
	rapid.Check(t, func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) {
			m := rvNewMachine(t, newHome(t))
			t.Repeat(m.actions())
			m.closeAndReopen(t)
		})
	})
}

// PeekedTicket is a ticket as a rendezvous holds it.
type PeekedTicket struct {
	fleetstate.Outcome        // what Poll returns for it
	Brief              string // the message's content
	Waited             bool   // a call of the lead is blocked on the turn: PollAll leaves it out
	News               bool   // a question or an outcome the lead has not been shown
	Handed             bool   // a call returned the outcome: the lead's next call releases it
}

// rvMsg is the model of one message to a member and its turn.
type rvMsg struct {
	n        int
	lead     string
	member   string
	brief    string
	turnID   string // known once the rendezvous holds the turn
	ticket   string
	state    fleetstate.TicketState
	question string              // while state is question
	held     *fleetstate.Outcome // the terminal outcome, once state is done
	gone     bool                // forgotten: acked, or released after a call returned it
	handed   bool                // a call returned the outcome; the lead's next acting call releases it, or the end of its hold
	holdAt   time.Time           // with a hold, when a handed outcome is released
	seen     bool                // the lead was shown the ticket's last question or outcome
	answer   *string             // an answer to a restored question, for the member's next Ask
	askedAt  time.Time           // when the question was asked: its window runs from here
	windowAt time.Time           // a restored question without its Ask: when it goes back to working
	readyAt  time.Time           // queued for a member not ready: when it fails member_not_ready
	waiter   *rvCall             // the lead's call blocked on the turn
	asker    *rvAsk              // the member's Ask blocked on an answer
}

// rvCall is a lead's Send or Answer running in its own goroutine.
type rvCall struct {
	what     string
	msg      *rvMsg
	res      chan rvResult // capacity 1
	cancel   context.CancelFunc
	deadline time.Time // when the call's own bound or its context ends it
	ctxFirst bool      // the context's deadline comes before SendTimeout
}

type rvResult struct {
	o   fleetstate.Outcome
	err error
}

// rvAsk is a member's Ask running in its own goroutine.
type rvAsk struct {
	what     string
	msg      *rvMsg
	def      string
	deadline time.Time
	res      chan rvAskResult // capacity 1
}

type rvAskResult struct {
	text     string
	timedOut bool
	err      error
}

// rvWait is a lead's PollAll waiting for news.
type rvWait struct {
	what     string
	lead     string
	deadline time.Time
	res      chan rvWaitResult // capacity 1
	released []*rvMsg          // released while it waits: see advance
}

type rvWaitResult struct {
	out []fleetstate.Outcome
	err error
}

// rvWantErr is the error a call must return: one with code, or exactly err
// (nil included) when code is empty.
type rvWantErr struct {
	code fleetstate.Code
	err  error
}

func (w rvWantErr) match(err error) bool {
	if w.code != "" {
		return fleetstate.CodeOf(err) == w.code
	}
	return err == w.err
}

func (w rvWantErr) String() string {
	if w.code != "" {
		return string(w.code)
	}
	return fmt.Sprint(w.err)
}

// rvMember is the model of a member's readiness.
type rvMember struct {
	ready     bool
	rejoinAt  time.Time // restored with an open turn: when it is taken to be gone
	cancelled bool      // its open turn was cancelled; cleared by its Next
}

type rvMachine struct {
	h       Home // where the fleet lives
	r       *fleetstate.Rendezvous
	ctx     context.Context // of every call the test starts; cancelled after Close at cleanup
	leads   []string
	members []string
	clock   time.Time // fake time as the model expects it
	opts    *fleetstate.RendezvousOptions
	hold    time.Duration // HoldReturned; 0 for none

	n        int
	msgs     []*rvMsg // in the order of their turns' creation
	byTicket map[string]*rvMsg
	byTurn   map[string]*rvMsg
	queue    map[string][]*rvMsg
	open     map[string]*rvMsg
	mem      map[string]*rvMember
	calls    []*rvCall
	asks     []*rvAsk
	waits    map[string]*rvWait // by lead: at most one each
	after    []func(*rapid.T)   // checks of calls the last action must have ended

	// The ledger, from what the library returned.
	delivered map[string]bool // turn IDs handed to members by Next
	briefs    map[string]bool // contents handed to members by Next
	ended     map[string]bool // turn IDs whose turn ended
	viaCall   map[string]int  // terminal outcomes returned by a lead's call
	viaAck    map[string]int  // finished tickets acked
}

// Bounds of the rendezvous (all defaults) as the model uses them.
const (
	rvSendTimeout  = fleetstate.DefaultSendTimeout
	rvAskTimeout   = fleetstate.DefaultAskTimeout
	rvReadyTimeout = fleetstate.DefaultReadyTimeout
	rvMaxWait      = fleetstate.DefaultMaxWait
	rvRejoin       = fleetstate.DefaultRejoinTimeout
	rvTick         = time.Millisecond // fake time before each action
)

func rvNewMachine(t *rapid.T, h Home) *rvMachine {
	// Half the runs hold returned outcomes, for a whole number of seconds
	// and a few microseconds: its end falls on no other bound.
	// The model ends a disconnected member's turn at once: the presence
	// window has tests of its own (TestDisconnectWithinPresenceWindow).
	opts := &fleetstate.RendezvousOptions{PresenceWindow: -1}
	var hold time.Duration
	if rapid.Bool().Draw(t, "hold returned") {
		hold = time.Duration(rapid.IntRange(1, 120).Draw(t, "hold s"))*time.Second + 37*time.Microsecond
		opts.HoldReturned = hold
	}
	_, r := openRendezvous(t, h, opts)
	ctx, cancel := context.WithCancel(context.Background())
	m := &rvMachine{
		h:         h,
		r:         r,
		opts:      opts,
		hold:      hold,
		ctx:       ctx,
		clock:     time.Now(),
		byTicket:  map[string]*rvMsg{},
		byTurn:    map[string]*rvMsg{},
		queue:     map[string][]*rvMsg{},
		open:      map[string]*rvMsg{},
		mem:       map[string]*rvMember{},
		waits:     map[string]*rvWait{},
		delivered: map[string]bool{},
		briefs:    map[string]bool{},
		ended:     map[string]bool{},
		viaCall:   map[string]int{},
		viaAck:    map[string]int{},
	}
	// Release whatever a failed run left blocked, so that the bubble
	// ends and the failure is reported: Close the current rendezvous
	// first, then the context of every call the test started (cleanups
	// run last in, first out).
	t.Cleanup(cancel)
	t.Cleanup(func() { m.r.Close() })
	for i := range rapid.IntRange(1, 2).Draw(t, "leads") {
		m.leads = append(m.leads, fmt.Sprintf("lead%d", i))
	}
	for i := range rapid.IntRange(2, 3).Draw(t, "members") {
		name := fmt.Sprintf("m%d", i)
		if err := r.AddMember(name, nil); err != nil {
			t.Fatal(err)
		}
		m.members = append(m.members, name)
		m.mem[name] = &rvMember{}
		if rapid.IntRange(0, 3).Draw(t, "not ready at first") > 0 {
			if err := r.SetReady(name, true); err != nil {
				t.Fatal(err)
			}
			m.mem[name].ready = true
		}
	}
	return m
}

func (m *rvMachine) actions() map[string]func(*rapid.T) {
	acts := map[string]func(*rapid.T){
		"SendDetached":      m.sendDetached,
		"Send":              m.send,
		"CancelContext":     m.cancelContext,
		"Cancel":            m.cancelTurn,
		"CancelUnknown":     m.cancelUnknown,
		"Next":              m.next,
		"Ask":               m.ask,
		"AskNoTurn":         m.askNoTurn,
		"Answer":            m.answer,
		"AnswerUnknownTurn": m.answerUnknownTurn,
		"AnswerNoQuestion":  m.answerNoQuestion,
		"AnswerOtherLead":   m.answerOtherLead,
		"Reply":             m.reply,
		"ReplyNoTurn":       m.replyNoTurn,
		"Poll":              m.poll,
		"PollAll":           m.pollAll,
		"PollPage":          m.pollPage,
		"Ack":               m.ack,
		"AckOpen":           m.ackOpen,
		"AckUnknown":        m.ackUnknown,
		"Disconnect":        m.disconnect,
		"Reconnect":         m.reconnect,
		"ShowUp":            m.showUp,
		"Restart":           m.restart,
		"SecondRendezvous":  m.secondRendezvous,
		"Sleep":             m.sleep,
		"SleepLong":         m.sleepLong,
	}
	for name, f := range acts {
		acts[name] = func(t *rapid.T) {
			m.advance(t, rvTick)
			f(t)
		}
	}
	acts[""] = m.check
	return acts
}

// --- actions -------------------------------------------------------------

func (m *rvMachine) newMsg(t *rapid.T) *rvMsg {
	m.n++
	msg := &rvMsg{
		n:      m.n,
		lead:   rapid.SampledFrom(m.leads).Draw(t, "lead"),
		member: rapid.SampledFrom(m.members).Draw(t, "member"),
		brief:  fmt.Sprintf("brief %d", m.n),
		state:  fleetstate.TicketQueued,
	}
	m.msgs = append(m.msgs, msg)
	return msg
}

// enqueue is the model of a send of msg: the lead's handed outcomes are
// released, and the message joins its member's FIFO.
func (m *rvMachine) enqueue(msg *rvMsg) {
	m.release(msg.lead)
	m.queue[msg.member] = append(m.queue[msg.member], msg)
	if !m.mem[msg.member].ready {
		msg.readyAt = m.clock.Add(rvReadyTimeout)
	}
}

func (m *rvMachine) sendDetached(t *rapid.T) {
	msg := m.newMsg(t)
	o, err := m.r.SendDetached(msg.lead, msg.member, msg.brief)
	if err != nil {
		t.Fatalf("SendDetached(%s): %v", msg.brief, err)
	}
	m.learn(t, msg, o)
	m.enqueue(msg)
	if want := m.view(msg); o != want {
		t.Fatalf("SendDetached(%s) = %+v; want %+v", msg.brief, o, want)
	}
	m.settle(t)
}

// callContext returns a context for a lead's call: cancellable always, and
// with a deadline before or after SendTimeout, or none. Deadlines end half
// a second past a whole one, never at the instant of a library timer.
func (m *rvMachine) callContext(t *rapid.T, c *rvCall) context.Context {
	c.deadline = m.clock.Add(rvSendTimeout)
	secs := rapid.IntRange(0, 90).Draw(t, "ctx timeout s")
	if secs == 0 {
		ctx, cancel := context.WithCancel(m.ctx)
		c.cancel = cancel
		return ctx
	}
	d := time.Duration(secs)*time.Second + 500*time.Millisecond
	ctx, cancel := context.WithTimeout(m.ctx, d)
	c.cancel = cancel
	if d < rvSendTimeout {
		c.deadline, c.ctxFirst = m.clock.Add(d), true
	}
	return ctx
}

func (m *rvMachine) send(t *rapid.T) {
	msg := m.newMsg(t)
	c := &rvCall{what: "Send(" + msg.brief + ")", msg: msg, res: make(chan rvResult, 1)}
	ctx := m.callContext(t, c)
	busy := m.open[msg.member] != nil || len(m.queue[msg.member]) > 0
	go func() {
		o, err := m.r.Send(ctx, msg.lead, msg.member, msg.brief)
		c.cancel()
		c.res <- rvResult{o, err}
	}()
	synctest.Wait()
	m.learnByPeek(t, msg)
	m.enqueue(msg)
	msg.waiter = c
	m.calls = append(m.calls, c)
	if busy {
		// A member with work ahead: pending at once, with a ticket.
		m.resolve(c, rvWantErr{})
	}
	m.settle(t)
}

func (m *rvMachine) cancelContext(t *rapid.T) {
	if len(m.calls) == 0 {
		t.Skip("no blocked call")
	}
	c := rapid.SampledFrom(m.calls).Draw(t, "call")
	c.cancel()
	m.resolve(c, rvWantErr{err: context.Canceled})
	m.settle(t)
}

var rvCancelled = fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonCancelled,
	Content: "the lead cancelled the turn"}

// cancelTurn cancels a ticket of the lead, by ticket or turn ID, in any
// state, handed ones included (which the call releases first).
func (m *rvMachine) cancelTurn(t *rapid.T) {
	lead := rapid.SampledFrom(m.leads).Draw(t, "lead")
	var cands []*rvMsg
	for _, msg := range m.msgs {
		if msg.lead == lead && !msg.gone {
			cands = append(cands, msg)
		}
	}
	if len(cands) == 0 {
		t.Skip("no ticket")
	}
	msg := rapid.SampledFrom(cands).Draw(t, "ticket")
	id := msg.ticket
	if rapid.Bool().Draw(t, "by turn ID") {
		id = msg.turnID
	}
	o, err := m.r.Cancel(lead, id)
	m.release(lead)
	if msg.gone {
		if fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("Cancel(%s) of a released ticket = %+v, %v; want %s", msg.brief, o, err, fleetstate.CodeUnknownTicket)
		}
		m.settle(t)
		return
	}
	switch msg.state {
	case fleetstate.TicketDone:
	case fleetstate.TicketQueued:
		m.queue[msg.member] = slices.DeleteFunc(m.queue[msg.member], func(x *rvMsg) bool { return x == msg })
		m.end(msg, rvCancelled, fleetstate.CodeNoOpenTurn)
	default:
		m.mem[msg.member].cancelled = true
		m.end(msg, rvCancelled, fleetstate.CodeTurnCancelled)
	}
	m.hand(msg)
	msg.seen = true
	want := m.view(msg)
	want.Returned = false // Cancel is the call that returns it
	if err != nil || o != want {
		t.Fatalf("Cancel(%s) = %+v, %v; want %+v", msg.brief, o, err, want)
	}
	m.viaCall[o.TurnID]++
	m.settle(t)
}

func (m *rvMachine) cancelUnknown(t *rapid.T) {
	type target struct{ lead, id string }
	targets := []target{
		{m.leads[0], "ticket-00000000-0000-0000-0000-000000000000"},
		{m.leads[0], "turn-00000000-0000-0000-0000-000000000000"},
	}
	for _, msg := range m.msgs {
		if msg.gone {
			targets = append(targets, target{msg.lead, msg.ticket}, target{msg.lead, msg.turnID})
		}
		targets = append(targets, target{m.otherLead(msg.lead), msg.ticket})
	}
	tg := rapid.SampledFrom(targets).Draw(t, "target")
	o, err := m.r.Cancel(tg.lead, tg.id)
	m.release(tg.lead)
	if fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("Cancel(%s, %s) = %+v, %v; want %s", tg.lead, tg.id, o, err, fleetstate.CodeUnknownTicket)
	}
	m.settle(t)
}

func (m *rvMachine) next(t *rapid.T) {
	// Mostly a member with work, so that turns get going; Next on an idle
	// member must return nothing.
	pick := m.members
	if working := slices.DeleteFunc(slices.Clone(m.members), func(name string) bool {
		return m.open[name] == nil && len(m.queue[name]) == 0
	}); len(working) > 0 && rapid.IntRange(0, 4).Draw(t, "any member") > 0 {
		pick = working
	}
	member := rapid.SampledFrom(pick).Draw(t, "member")
	got, ok, err := m.r.Next(context.Background(), member, 0)
	m.setReady(member, true)
	if open := m.open[member]; open != nil {
		m.end(open, fleetstate.Outcome{Kind: fleetstate.OutcomeTurnDone}, fleetstate.CodeNoOpenTurn)
	}
	m.mem[member].cancelled = false
	q := m.queue[member]
	if len(q) == 0 {
		if err != nil || ok {
			t.Fatalf("Next(%s) with nothing queued = %+v, %v, %v; want nothing", member, got, ok, err)
		}
		m.settle(t)
		return
	}
	head := q[0]
	m.queue[member] = q[1:]
	if err != nil || !ok || got.Content != head.brief || got.From != head.lead || got.TurnID != head.turnID {
		t.Fatalf("Next(%s) = %+v, %v, %v; want %s (%s) from %s", member, got, ok, err, head.brief, head.turnID, head.lead)
	}
	if m.delivered[got.TurnID] || m.briefs[got.Content] {
		t.Fatalf("Next(%s) delivered %+v a second time", member, got)
	}
	m.delivered[got.TurnID], m.briefs[got.Content] = true, true
	head.state, head.readyAt = fleetstate.TicketWorking, time.Time{}
	m.open[member] = head
	m.settle(t)
}

// membersWith returns the members whose open turn (nil if none) passes keep.
func (m *rvMachine) membersWith(keep func(open *rvMsg) bool) []string {
	var out []string
	for _, name := range m.members {
		if keep(m.open[name]) {
			out = append(out, name)
		}
	}
	return out
}

// startAsk runs member's Ask in a goroutine.
func (m *rvMachine) startAsk(member string) (*rvAsk, string) {
	m.n++
	a := &rvAsk{
		what: fmt.Sprintf("Ask(%s, question %d)", member, m.n),
		def:  fmt.Sprintf("default %d", m.n),
		res:  make(chan rvAskResult, 1),
	}
	question := fmt.Sprintf("question %d", m.n)
	go func() {
		text, timedOut, err := m.r.Ask(m.ctx, member, question, a.def)
		a.res <- rvAskResult{text, timedOut, err}
	}()
	return a, question
}

// noTurnCode is the error of member's call about a turn it does not have.
func (m *rvMachine) noTurnCode(member string) fleetstate.Code {
	if m.mem[member].cancelled {
		return fleetstate.CodeTurnCancelled
	}
	return fleetstate.CodeNoOpenTurn
}

func (m *rvMachine) ask(t *rapid.T) {
	busy := m.membersWith(func(open *rvMsg) bool { return open != nil })
	if len(busy) == 0 {
		t.Skip("no open turn")
	}
	m.askAs(t, rapid.SampledFrom(busy).Draw(t, "member"))
}

// askAs runs an Ask of member, which has an open turn.
func (m *rvMachine) askAs(t *rapid.T, member string) {
	a, question := m.startAsk(member)
	open := m.open[member]
	switch {
	case open.asker != nil:
		m.resolveAsk(a, rvAskResult{}, rvWantErr{code: fleetstate.CodeQuestionPending})
	case open.answer != nil:
		// The lead answered the restored question: the answer, at once.
		m.resolveAsk(a, rvAskResult{text: *open.answer}, rvWantErr{})
		open.answer = nil
	default:
		if open.state != fleetstate.TicketQuestion {
			open.askedAt = m.clock
		} // else asked again after a restart: the window stays
		a.deadline = open.askedAt.Add(rvAskTimeout)
		open.windowAt = time.Time{}
		a.msg = open
		open.asker = a
		open.state, open.question = fleetstate.TicketQuestion, question
		open.seen = false
		m.asks = append(m.asks, a)
		if c := open.waiter; c != nil {
			// The blocked call returns the question, which shows it.
			m.resolve(c, rvWantErr{})
			open.seen = true
		}
	}
	m.settle(t)
}

func (m *rvMachine) askNoTurn(t *rapid.T) {
	idle := m.membersWith(func(open *rvMsg) bool { return open == nil })
	if len(idle) == 0 {
		t.Skip("every member has an open turn")
	}
	member := rapid.SampledFrom(idle).Draw(t, "member")
	a, _ := m.startAsk(member)
	m.resolveAsk(a, rvAskResult{}, rvWantErr{code: m.noTurnCode(member)})
	m.settle(t)
}

// answer answers a question a member's Ask waits on, or one restored after
// a restart, whose answer waits for the member's next Ask.
func (m *rvMachine) answer(t *rapid.T) {
	msg := m.drawIn(t, fleetstate.TicketQuestion, "turn", "no question waits")
	m.n++
	content := fmt.Sprintf("answer %d", m.n)
	c := &rvCall{what: "Answer(" + msg.brief + ", " + content + ")", msg: msg, res: make(chan rvResult, 1)}
	ctx := m.callContext(t, c)
	go func() {
		o, err := m.r.Answer(ctx, msg.lead, msg.turnID, content)
		c.cancel()
		c.res <- rvResult{o, err}
	}()
	m.release(msg.lead)
	if a := msg.asker; a != nil {
		m.asks = slices.DeleteFunc(m.asks, func(x *rvAsk) bool { return x == a })
		msg.asker = nil
		m.resolveAsk(a, rvAskResult{text: content}, rvWantErr{})
	} else {
		msg.answer, msg.windowAt = &content, time.Time{}
	}
	msg.state, msg.question = fleetstate.TicketWorking, ""
	msg.waiter = c
	m.calls = append(m.calls, c)
	m.settle(t)
}

// answerErr answers turnID as lead and wants the error code; the call must
// not block. Like every Answer, it releases the lead's handed outcomes.
func (m *rvMachine) answerErr(t *rapid.T, lead, turnID string, code fleetstate.Code) {
	ch := make(chan rvResult, 1)
	go func() {
		o, err := m.r.Answer(m.ctx, lead, turnID, "unwanted answer")
		ch <- rvResult{o, err}
	}()
	m.release(lead)
	m.settle(t)
	select {
	case res := <-ch:
		if fleetstate.CodeOf(res.err) != code {
			t.Fatalf("Answer(%s, %s) = %+v, %v; want %s", lead, turnID, res.o, res.err, code)
		}
	default:
		t.Fatalf("Answer(%s, %s) blocked; want %s at once", lead, turnID, code)
	}
}

func (m *rvMachine) answerUnknownTurn(t *rapid.T) {
	ids := []string{"turn-00000000-0000-0000-0000-000000000000"}
	for _, msg := range m.msgs {
		if msg.gone || msg.state == fleetstate.TicketDone {
			ids = append(ids, msg.turnID)
		}
	}
	id := rapid.SampledFrom(ids).Draw(t, "turn")
	lead := rapid.SampledFrom(m.leads).Draw(t, "lead")
	m.answerErr(t, lead, id, fleetstate.CodeUnknownTurn)
}

// liveTurns returns the messages whose turn has not ended.
// drawIn draws, as label, a message not yet gone whose ticket is in
// state, and skips the action, saying none, where there is no such one.
func (m *rvMachine) drawIn(t *rapid.T, state fleetstate.TicketState, label, none string) *rvMsg {
	var in []*rvMsg
	for _, msg := range m.msgs {
		if !msg.gone && msg.state == state {
			in = append(in, msg)
		}
	}
	if len(in) == 0 {
		t.Skip(none)
	}
	return rapid.SampledFrom(in).Draw(t, label)
}

func (m *rvMachine) liveTurns(keep func(*rvMsg) bool) []*rvMsg {
	var out []*rvMsg
	for _, msg := range m.msgs {
		if !msg.gone && msg.state != fleetstate.TicketDone && keep(msg) {
			out = append(out, msg)
		}
	}
	return out
}

func (m *rvMachine) answerNoQuestion(t *rapid.T) {
	cands := m.liveTurns(func(msg *rvMsg) bool { return msg.state != fleetstate.TicketQuestion })
	if len(cands) == 0 {
		t.Skip("no turn without a question")
	}
	msg := rapid.SampledFrom(cands).Draw(t, "turn")
	m.answerErr(t, msg.lead, msg.turnID, fleetstate.CodeNoPendingQuestion)
}

func (m *rvMachine) answerOtherLead(t *rapid.T) {
	cands := m.liveTurns(func(*rvMsg) bool { return true })
	if len(m.leads) < 2 || len(cands) == 0 {
		t.Skip("no turn of another lead")
	}
	msg := rapid.SampledFrom(cands).Draw(t, "turn")
	m.answerErr(t, m.otherLead(msg.lead), msg.turnID, fleetstate.CodeNotPermitted)
}

func (m *rvMachine) otherLead(lead string) string {
	for _, l := range m.leads {
		if l != lead {
			return l
		}
	}
	return "lead-without-tickets"
}

func (m *rvMachine) reply(t *rapid.T) {
	busy := m.membersWith(func(open *rvMsg) bool { return open != nil })
	if len(busy) == 0 {
		t.Skip("no open turn")
	}
	member := rapid.SampledFrom(busy).Draw(t, "member")
	m.n++
	content := fmt.Sprintf("reply %d", m.n)
	if err := m.r.Reply(member, content); err != nil {
		t.Fatalf("Reply(%s): %v", member, err)
	}
	m.end(m.open[member], fleetstate.Outcome{Kind: fleetstate.OutcomeReply, Content: content}, fleetstate.CodeNoOpenTurn)
	m.settle(t)
}

func (m *rvMachine) replyNoTurn(t *rapid.T) {
	idle := m.membersWith(func(open *rvMsg) bool { return open == nil })
	if len(idle) == 0 {
		t.Skip("every member has an open turn")
	}
	member := rapid.SampledFrom(idle).Draw(t, "member")
	if err := m.r.Reply(member, "nobody asked"); fleetstate.CodeOf(err) != m.noTurnCode(member) {
		t.Fatalf("Reply(%s) without an open turn = %v; want %s", member, err, m.noTurnCode(member))
	}
}

func (m *rvMachine) poll(t *rapid.T) {
	if len(m.msgs) == 0 {
		t.Skip("no ticket")
	}
	msg := rapid.SampledFrom(m.msgs).Draw(t, "ticket")
	lead := msg.lead
	if rapid.IntRange(0, 3).Draw(t, "as another lead") == 0 {
		lead = m.otherLead(lead)
	}
	o, err := m.r.Poll(context.Background(), lead, msg.ticket, 0)
	if msg.gone || lead != msg.lead {
		if fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("Poll(%s, %s) = %+v, %v; want %s", lead, msg.brief, o, err, fleetstate.CodeUnknownTicket)
		}
		return
	}
	if want := m.view(msg); err != nil || o != want {
		t.Fatalf("Poll(%s) = %+v, %v; want %+v", msg.brief, o, err, want)
	}
	if o.Kind != fleetstate.OutcomePending {
		msg.seen = true
	}
	m.settle(t)
}

// pollAll calls PollAll at once (wait 0) or in a goroutine that waits for
// news; a lead has at most one waiting.
func (m *rvMachine) pollAll(t *rapid.T) {
	lead := rapid.SampledFrom(m.leads).Draw(t, "lead")
	wait := time.Duration(rapid.IntRange(0, 90).Draw(t, "wait s")) * time.Second
	if wait == 0 || m.waits[lead] != nil {
		got, err := m.r.PollAll(context.Background(), lead, 0)
		want := m.tickets(lead)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("PollAll(%s) = %+v, %v; want %+v", lead, got, err, want)
		}
		m.shown(lead, want)
		m.settle(t)
		return
	}
	wait += 500 * time.Millisecond
	w := &rvWait{
		what:     fmt.Sprintf("PollAll(%s, %v)", lead, wait),
		lead:     lead,
		deadline: m.clock.Add(min(wait, rvMaxWait)),
		res:      make(chan rvWaitResult, 1),
	}
	go func() {
		out, err := m.r.PollAll(m.ctx, lead, wait)
		w.res <- rvWaitResult{out, err}
	}()
	m.waits[lead] = w
	m.settle(t) // returns at once if there is news
}

// pollPage pages through a lead's tickets without waiting; each page shows
// its own tickets only.
func (m *rvMachine) pollPage(t *rapid.T) {
	lead := rapid.SampledFrom(m.leads).Draw(t, "lead")
	limit := rapid.IntRange(1, 3).Draw(t, "limit")
	if _, err := m.r.PollPage(context.Background(), lead, 0, "x1", limit); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
		t.Fatalf("PollPage(%s) with a made-up cursor: %v; want %s", lead, err, fleetstate.CodeInvalidArgument)
	}
	rest := m.tickets(lead)
	cursor := ""
	for {
		p, err := m.r.PollPage(context.Background(), lead, 0, cursor, limit)
		want := rest[:min(limit, len(rest))]
		more := len(rest) > limit
		if err != nil || !slices.Equal(p.Tickets, want) || (p.Next != "") != more {
			t.Fatalf("PollPage(%s, %q, %d) = %+v, %v; want %+v (more: %v)", lead, cursor, limit, p, err, want, more)
		}
		m.shown(lead, want)
		rest = rest[len(want):]
		if !more {
			break
		}
		cursor = p.Next
	}
	m.settle(t)
}

func (m *rvMachine) ack(t *rapid.T) {
	msg := m.drawIn(t, fleetstate.TicketDone, "ticket", "no finished ticket")
	if err := m.r.Ack(msg.lead, msg.ticket); err != nil {
		t.Fatalf("Ack(%s): %v", msg.brief, err)
	}
	msg.gone, msg.handed = true, false
	m.viaAck[msg.turnID]++
	m.release(msg.lead)
	m.settle(t)
}

// ackOpen acks an unfinished ticket: refused, and, as every acting call of
// the lead, it releases what calls returned before.
func (m *rvMachine) ackOpen(t *rapid.T) {
	open := m.liveTurns(func(*rvMsg) bool { return true })
	if len(open) == 0 {
		t.Skip("no open ticket")
	}
	msg := rapid.SampledFrom(open).Draw(t, "ticket")
	if err := m.r.Ack(msg.lead, msg.ticket); fleetstate.CodeOf(err) != fleetstate.CodeTicketOpen {
		t.Fatalf("Ack(%s) of a %s ticket = %v; want %s", msg.brief, msg.state, err, fleetstate.CodeTicketOpen)
	}
	m.release(msg.lead)
	m.settle(t)
}

func (m *rvMachine) ackUnknown(t *rapid.T) {
	type target struct{ lead, ticket string }
	targets := []target{{m.leads[0], "ticket-00000000-0000-0000-0000-000000000000"}}
	for _, msg := range m.msgs {
		if msg.gone {
			targets = append(targets, target{msg.lead, msg.ticket})
		}
		targets = append(targets, target{m.otherLead(msg.lead), msg.ticket})
	}
	tg := rapid.SampledFrom(targets).Draw(t, "target")
	if err := m.r.Ack(tg.lead, tg.ticket); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("Ack(%s, %s) = %v; want %s", tg.lead, tg.ticket, err, fleetstate.CodeUnknownTicket)
	}
	m.release(tg.lead)
	m.settle(t)
}

var rvConnClosed = fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonMemberGone,
	Content: "the member's connection closed during the turn"}

// disconnect drops a member's connection: not ready, its open turn ends
// member_gone, its queue waits at most ReadyTimeout.
func (m *rvMachine) disconnect(t *rapid.T) {
	member := rapid.SampledFrom(m.members).Draw(t, "member")
	if err := m.r.Disconnect(member); err != nil {
		t.Fatalf("Disconnect(%s): %v", member, err)
	}
	m.disconnected(member)
	m.settle(t)
}

func (m *rvMachine) disconnected(member string) {
	m.setReady(member, false)
	if open := m.open[member]; open != nil {
		m.end(open, rvConnClosed, fleetstate.CodeNoOpenTurn)
	}
}

var rvSuperseded = fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonMemberGone,
	Content: "another connection of the member took over during the turn"}

// reconnect is a newer connection of a member superseding its older one,
// which is still there, as the MCP adapter does it: the open turn ends
// member_gone, the queue stays, the member is ready.
func (m *rvMachine) reconnect(t *rapid.T) {
	member := rapid.SampledFrom(m.members).Draw(t, "member")
	if err := m.r.Drop(member); err != nil {
		t.Fatalf("Drop(%s): %v", member, err)
	}
	if open := m.open[member]; open != nil {
		m.end(open, rvSuperseded, fleetstate.CodeNoOpenTurn)
	}
	if err := m.r.SetReady(member, true); err != nil {
		t.Fatalf("SetReady(%s): %v", member, err)
	}
	m.setReady(member, true)
	m.settle(t)
}

// showUp is a member's connection coming up: SetReady(true).
func (m *rvMachine) showUp(t *rapid.T) {
	member := rapid.SampledFrom(m.members).Draw(t, "member")
	if err := m.r.SetReady(member, true); err != nil {
		t.Fatalf("SetReady(%s): %v", member, err)
	}
	m.setReady(member, true)
	m.settle(t)
}

// restart crashes the rendezvous and opens a new one on the same fleet,
// as a process restarted after being killed.
func (m *rvMachine) restart(t *rapid.T) {
	// Often with a question in flight, whose Ask dies with the process:
	// restored, the lead may still answer it within its window.
	idle := m.membersWith(func(open *rvMsg) bool { return open != nil && open.state == fleetstate.TicketWorking })
	if len(idle) > 0 && rapid.Bool().Draw(t, "ask first") {
		m.askAs(t, rapid.SampledFrom(idle).Draw(t, "asking member"))
	}
	m.h.Crash(t, m.r)
	m.releaseAll(t, "Crash")
	_, r, err := m.h.Open(t, m.opts)
	if err != nil {
		t.Fatalf("NewRendezvous after a crash: %v", err)
	}
	m.r = r
	m.restore()
	for _, name := range m.members {
		if err := r.AddMember(name, nil); err != nil {
			t.Fatal(err)
		}
	}
	m.secondRendezvous(t)
}

// secondRendezvous opens a rendezvous on the fleet of the open
// one: refused, and nothing changes (check compares).
func (m *rvMachine) secondRendezvous(t *rapid.T) {
	_, r, err := m.h.Open(t, m.opts)
	if fleetstate.CodeOf(err) != fleetstate.CodeFleetOwned {
		if r != nil {
			r.Close()
		}
		t.Fatalf("a second NewRendezvous on an owned fleet: %v; want %s", err, fleetstate.CodeFleetOwned)
	}
	m.settle(t)
}

// sleep moves the fake clock: every bound that passes takes effect.
func (m *rvMachine) sleep(t *rapid.T) {
	m.advance(t, time.Duration(rapid.IntRange(1, 70).Draw(t, "sleep s"))*time.Second)
}

// sleepLong moves the fake clock past most bounds at once: windows of
// questions, readiness and rejoin bounds, sends.
func (m *rvMachine) sleepLong(t *rapid.T) {
	m.advance(t, time.Duration(rapid.IntRange(30, 60).Draw(t, "sleep s"))*time.Second)
}

// --- model ---------------------------------------------------------------

// view is the outcome the lead sees for msg's ticket now.
func (m *rvMachine) view(msg *rvMsg) fleetstate.Outcome {
	switch msg.state {
	case fleetstate.TicketDone:
		o := *msg.held
		o.Ticket, o.State, o.Returned = msg.ticket, fleetstate.TicketDone, msg.handed
		return o
	case fleetstate.TicketQuestion:
		return fleetstate.Outcome{Kind: fleetstate.OutcomeQuestion, TurnID: msg.turnID, Ticket: msg.ticket,
			From: msg.member, Content: msg.question, State: fleetstate.TicketQuestion}
	default:
		return fleetstate.Outcome{Kind: fleetstate.OutcomePending, TurnID: msg.turnID, Ticket: msg.ticket,
			From: msg.member, State: msg.state}
	}
}

// visible reports whether PollAll lists msg: held, and no call of the lead
// blocked on it.
func (msg *rvMsg) visible() bool { return !msg.gone && msg.waiter == nil }

// news reports whether msg holds a question or outcome not shown yet.
func (msg *rvMsg) news() bool {
	return !msg.seen && (msg.state == fleetstate.TicketDone || msg.state == fleetstate.TicketQuestion)
}

// tickets is what PollAll must return for lead: every ticket still held
// that no call of the lead waits on, oldest first.
func (m *rvMachine) tickets(lead string) []fleetstate.Outcome {
	var out []fleetstate.Outcome
	for _, msg := range m.msgs {
		if msg.lead == lead && msg.visible() {
			out = append(out, m.view(msg))
		}
	}
	return out
}

// hasNews reports whether a PollAll of lead would return at once.
func (m *rvMachine) hasNews(lead string) bool {
	for _, msg := range m.msgs {
		if msg.lead == lead && msg.visible() && msg.news() {
			return true
		}
	}
	return false
}

// shown marks the questions and outcomes of a list a poll returned as shown.
func (m *rvMachine) shown(lead string, out []fleetstate.Outcome) {
	for _, o := range out {
		if o.Kind != fleetstate.OutcomePending {
			m.byTicket[o.Ticket].seen = true
		}
	}
}

// hand notes that a call returns msg's outcome: held until the lead's next
// acting call, or with a hold until its end (the first call's).
func (m *rvMachine) hand(msg *rvMsg) {
	if !msg.handed && m.hold > 0 {
		msg.holdAt = m.clock.Add(m.hold)
	}
	msg.handed = true
}

// release is the start of an acting call of lead: the outcomes calls of
// the lead returned before are forgotten, unless they are held for a
// while instead.
func (m *rvMachine) release(lead string) {
	if m.hold > 0 {
		return
	}
	for _, msg := range m.msgs {
		if msg.lead == lead && msg.handed && !msg.gone {
			msg.gone, msg.handed = true, false
			if w := m.waits[lead]; w != nil {
				w.released = append(w.released, msg)
			}
		}
	}
}

// setReady is the model of a member becoming ready or not.
func (m *rvMachine) setReady(member string, ready bool) {
	mm := m.mem[member]
	if ready {
		mm.rejoinAt = time.Time{}
	}
	if mm.ready == ready {
		return
	}
	mm.ready = ready
	for _, msg := range m.queue[member] {
		switch {
		case ready:
			msg.readyAt = time.Time{}
		case msg.readyAt.IsZero():
			msg.readyAt = m.clock.Add(rvReadyTimeout)
		}
	}
}

func rvTerminal(k fleetstate.OutcomeKind) bool {
	return k == fleetstate.OutcomeReply || k == fleetstate.OutcomeTurnDone || k == fleetstate.OutcomeFailed
}

// learn checks that the ticket and turn ID a call revealed for msg agree
// with what the model has.
func (m *rvMachine) learn(t *rapid.T, msg *rvMsg, o fleetstate.Outcome) {
	if o.Ticket != "" && msg.ticket != o.Ticket {
		if msg.ticket != "" || m.byTicket[o.Ticket] != nil {
			t.Fatalf("%s: ticket %s; the model has %q for it and %v for the ticket", msg.brief, o.Ticket, msg.ticket, m.byTicket[o.Ticket])
		}
		msg.ticket = o.Ticket
		m.byTicket[o.Ticket] = msg
	}
	if o.TurnID != "" && msg.turnID != o.TurnID {
		if msg.turnID != "" || m.byTurn[o.TurnID] != nil {
			t.Fatalf("%s: turn %s; the model has %q for it", msg.brief, o.TurnID, msg.turnID)
		}
		msg.turnID = o.TurnID
		m.byTurn[o.TurnID] = msg
	}
}

// learnByPeek learns the ticket and turn of a message whose send is
// blocked, from the rendezvous, as soon as it holds them.
func (m *rvMachine) learnByPeek(t *rapid.T, msg *rvMsg) {
	for _, p := range m.peekTickets(msg.lead) {
		if p.Brief == msg.brief {
			m.learn(t, msg, p.Outcome)
			return
		}
	}
	t.Fatalf("%s: no ticket after the send", msg.brief)
}

// end ends msg's turn with terminal outcome o: a blocked call of the lead
// gets it (handed), otherwise the ticket holds it as news; a waiting Ask
// fails with askCode.
func (m *rvMachine) end(msg *rvMsg, o fleetstate.Outcome, askCode fleetstate.Code) {
	if m.open[msg.member] == msg {
		m.open[msg.member] = nil
	}
	m.ended[msg.turnID] = true
	if a := msg.asker; a != nil {
		msg.asker = nil
		m.asks = slices.DeleteFunc(m.asks, func(x *rvAsk) bool { return x == a })
		m.resolveAsk(a, rvAskResult{}, rvWantErr{code: askCode})
	}
	msg.question, msg.answer, msg.readyAt, msg.windowAt = "", nil, time.Time{}, time.Time{}
	o.TurnID, o.From = msg.turnID, msg.member
	held := o
	msg.state, msg.held, msg.seen = fleetstate.TicketDone, &held, false
	if c := msg.waiter; c != nil {
		m.hand(msg)
		msg.seen = true
		m.resolve(c, rvWantErr{})
	}
}

// resolve notes that call c must have returned by the end of the action,
// with the outcome the model has for its turn now (a terminal one with its
// ticket and without a state, as a blocked call gets it) and the error
// want.
func (m *rvMachine) resolve(c *rvCall, want rvWantErr) {
	msg := c.msg
	m.calls = slices.DeleteFunc(m.calls, func(x *rvCall) bool { return x == c })
	if msg.waiter == c {
		msg.waiter = nil
	}
	wantO := m.view(msg)
	if msg.state == fleetstate.TicketDone {
		wantO.State, wantO.Returned = "", false
	}
	m.after = append(m.after, func(t *rapid.T) {
		var res rvResult
		select {
		case res = <-c.res:
		default:
			t.Fatalf("%s is still blocked; want %+v, %v", c.what, wantO, want)
		}
		if rvTerminal(res.o.Kind) {
			m.viaCall[res.o.TurnID]++
		}
		if res.o != wantO || !want.match(res.err) {
			t.Fatalf("%s = %+v, %v; want %+v, %v", c.what, res.o, res.err, wantO, want)
		}
	})
}

// resolveAsk notes that a must have returned by the end of the action.
func (m *rvMachine) resolveAsk(a *rvAsk, want rvAskResult, wantErr rvWantErr) {
	m.after = append(m.after, func(t *rapid.T) {
		var res rvAskResult
		select {
		case res = <-a.res:
		default:
			t.Fatalf("%s is still blocked; want %+v, %v", a.what, want, wantErr)
		}
		if res.text != want.text || res.timedOut != want.timedOut || !wantErr.match(res.err) {
			t.Fatalf("%s = %q, %v, %v; want %q, %v, %v", a.what, res.text, res.timedOut, res.err, want.text, want.timedOut, wantErr)
		}
	})
}

// settle waits until every goroutine of the bubble is blocked, then checks
// the calls the action ended, and the waiting polls its news woke.
func (m *rvMachine) settle(t *rapid.T) {
	synctest.Wait()
	after := m.after
	m.after = nil
	for _, f := range after {
		f(t)
	}
	for _, lead := range m.leads {
		if w := m.waits[lead]; w != nil && m.hasNews(lead) {
			m.takeWait(t, w, nil, nil)
		}
	}
}

// rvEntry is a ticket in a list PollAll may return.
type rvEntry struct {
	visible bool
	o       fleetstate.Outcome
}

func (m *rvMachine) entry(msg *rvMsg) rvEntry { return rvEntry{msg.visible(), m.view(msg)} }

// takeWait takes the result of w, woken by news. The timers that fired at
// the instant that brought the news changed the tickets touched, which
// stood as in pre before; the poll may have looked between them, so each
// touched ticket may show as before or after. What the poll returned is
// shown to the lead, and a ticket that changed after it looked is news.
func (m *rvMachine) takeWait(t *rapid.T, w *rvWait, pre map[*rvMsg]rvEntry, touched []*rvMsg) {
	delete(m.waits, w.lead)
	var res rvWaitResult
	select {
	case res = <-w.res:
	default:
		t.Fatalf("%s is still blocked; want it to return with the news in %+v", w.what, m.tickets(w.lead))
	}
	var mine []*rvMsg
	for _, msg := range touched {
		if msg.lead == w.lead && !slices.Contains(mine, msg) {
			mine = append(mine, msg)
		}
	}
	for mask := 0; mask < 1<<len(mine); mask++ {
		before := func(msg *rvMsg) bool {
			i := slices.Index(mine, msg)
			return i >= 0 && mask&(1<<i) != 0
		}
		var list []fleetstate.Outcome
		news := false
		for _, msg := range m.msgs {
			if msg.lead != w.lead {
				continue
			}
			e := m.entry(msg)
			if before(msg) {
				e = pre[msg]
			} else if e.visible && msg.news() {
				news = true
			}
			if e.visible {
				list = append(list, e.o)
			}
		}
		if !news || res.err != nil || !slices.Equal(list, res.out) {
			continue
		}
		for _, msg := range m.msgs {
			if msg.lead != w.lead {
				continue
			}
			if !before(msg) {
				if msg.visible() && msg.state != fleetstate.TicketQueued && msg.state != fleetstate.TicketWorking {
					msg.seen = true
				}
				continue
			}
			e := pre[msg]
			ended := e.o.State != fleetstate.TicketDone && msg.state == fleetstate.TicketDone
			if e.visible && e.o.Kind != fleetstate.OutcomePending && !ended {
				msg.seen = true // shown, then changed in a way that is no news
			}
		}
		return
	}
	if len(mine) > 0 {
		t.Fatalf("%s = %+v, %v; want %+v, each of the tickets changed at that instant as before or after", w.what, res.out, res.err, m.tickets(w.lead))
	}
	t.Fatalf("%s = %+v, %v; want %+v", w.what, res.out, res.err, m.tickets(w.lead))
}

// advance sleeps d of fake time, then replays in the model, instant by
// instant, every bound that passed.
func (m *rvMachine) advance(t *rapid.T, d time.Duration) {
	until := m.clock.Add(d)
	time.Sleep(d)
	synctest.Wait()
	for {
		x, ok := m.nextInstant(until)
		if !ok {
			break
		}
		m.clock = x
		pre := map[*rvMsg]rvEntry{}
		for _, msg := range m.msgs {
			pre[msg] = m.entry(msg)
		}
		touched := m.fire(x)
		for _, lead := range m.leads {
			w := m.waits[lead]
			switch {
			case w == nil:
			case m.hasNews(lead):
				m.takeWait(t, w, pre, touched)
			case w.deadline.Equal(x):
				delete(m.waits, lead)
				var res rvWaitResult
				select {
				case res = <-w.res:
				default:
					t.Fatalf("%s is still blocked at its bound", w.what)
				}
				// At its bound the poll returns the list as it is then.
				if want := m.tickets(lead); res.err != nil || !slices.Equal(res.out, want) {
					t.Fatalf("%s at its bound = %+v, %v; want %+v", w.what, res.out, res.err, want)
				}
			}
		}
	}
	m.clock = until
	m.settle(t)
}

// nextInstant returns the first instant after the clock, and not after
// until, at which a bound the model knows passes.
func (m *rvMachine) nextInstant(until time.Time) (time.Time, bool) {
	var first time.Time
	consider := func(at time.Time) {
		if !at.IsZero() && at.After(m.clock) && !at.After(until) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	for _, c := range m.calls {
		consider(c.deadline)
	}
	for _, a := range m.asks {
		consider(a.deadline)
	}
	for _, msg := range m.msgs {
		if !msg.gone {
			consider(msg.readyAt)
			consider(msg.windowAt)
			if msg.handed {
				consider(msg.holdAt)
			}
		}
	}
	for _, name := range m.members {
		consider(m.mem[name].rejoinAt)
	}
	for _, w := range m.waits {
		consider(w.deadline)
	}
	return first, !first.IsZero()
}

// fire applies every bound that passes at x and returns the tickets it
// changed.
func (m *rvMachine) fire(x time.Time) (touched []*rvMsg) {
	for _, c := range slices.Clone(m.calls) {
		if c.deadline.Equal(x) {
			want := rvWantErr{}
			if c.ctxFirst {
				want.err = context.DeadlineExceeded
			}
			touched = append(touched, c.msg)
			m.resolve(c, want)
		}
	}
	for _, a := range slices.Clone(m.asks) {
		if a.deadline.Equal(x) {
			m.asks = slices.DeleteFunc(m.asks, func(y *rvAsk) bool { return y == a })
			a.msg.asker = nil
			a.msg.state, a.msg.question = fleetstate.TicketWorking, ""
			touched = append(touched, a.msg)
			m.resolveAsk(a, rvAskResult{text: a.def, timedOut: true}, rvWantErr{})
		}
	}
	for _, msg := range m.msgs {
		switch {
		case msg.gone:
		case msg.handed && msg.holdAt.Equal(x):
			// The hold of a returned outcome ended.
			msg.gone, msg.handed, msg.holdAt = true, false, time.Time{}
			touched = append(touched, msg)
		case msg.windowAt.Equal(x):
			// A restored question nobody answered in its window.
			msg.windowAt = time.Time{}
			msg.state, msg.question = fleetstate.TicketWorking, ""
			touched = append(touched, msg)
		case msg.readyAt.Equal(x):
			m.queue[msg.member] = slices.DeleteFunc(m.queue[msg.member], func(y *rvMsg) bool { return y == msg })
			m.end(msg, fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonMemberNotReady,
				Content: "member " + msg.member + " did not become ready within " + rvReadyTimeout.String()}, fleetstate.CodeNoOpenTurn)
			touched = append(touched, msg)
		}
	}
	for _, name := range m.members {
		mm := m.mem[name]
		if !mm.rejoinAt.Equal(x) {
			continue
		}
		mm.rejoinAt = time.Time{}
		if open := m.open[name]; open != nil {
			m.end(open, fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonMemberGone,
				Content: "the member did not come back within " + rvRejoin.String() + " of a restart"}, fleetstate.CodeNoOpenTurn)
			touched = append(touched, open)
		}
		m.setReady(name, false)
	}
	return touched
}

// releaseAll is the model of Close and Crash: every blocked call returns
// ERR_CLOSED, a lead's with the pending outcome of its ticket.
func (m *rvMachine) releaseAll(t *rapid.T, what string) {
	closed := rvWantErr{code: fleetstate.CodeClosed}
	for _, c := range slices.Clone(m.calls) {
		m.resolve(c, closed)
	}
	for _, a := range m.asks {
		a.msg.asker = nil // the question stays on the ticket
		m.resolveAsk(a, rvAskResult{}, closed)
	}
	m.asks = nil
	waits := m.waits
	m.waits = map[string]*rvWait{}
	m.settle(t)
	for _, w := range waits {
		select {
		case res := <-w.res:
			if !closed.match(res.err) {
				t.Fatalf("%s after %s: %v; want %s", w.what, what, res.err, closed)
			}
		default:
			t.Fatalf("%s is still blocked after %s", w.what, what)
		}
	}
}

// restore is the model of a new rendezvous on the state of one that
// stopped: every held ticket is back, as news; an outcome a call returned
// with a hold stays handed until its hold's end or the rejoin bound,
// whichever is later, and without a hold it is handed no more; a member
// with an open turn counts as ready until the rejoin bound, the others are
// not ready; a restored question keeps its window.
func (m *rvMachine) restore() {
	for _, name := range m.members {
		m.mem[name] = &rvMember{}
		if m.open[name] != nil {
			m.mem[name].ready = true
			m.mem[name].rejoinAt = m.clock.Add(rvRejoin)
		}
	}
	for _, msg := range m.msgs {
		if msg.gone {
			continue
		}
		held := msg.handed && !msg.holdAt.IsZero()
		msg.seen, msg.handed, msg.readyAt, msg.windowAt = false, held, time.Time{}, time.Time{}
		if held {
			msg.holdAt = later(msg.holdAt, m.clock.Add(rvRejoin))
		} else {
			msg.holdAt = time.Time{}
		}
		switch msg.state {
		case fleetstate.TicketQueued:
			if !m.mem[msg.member].ready {
				msg.readyAt = m.clock.Add(rvReadyTimeout)
			}
		case fleetstate.TicketQuestion:
			msg.windowAt = msg.askedAt.Add(rvAskTimeout)
		}
	}
}

// check is the invariant, run after every action.
func (m *rvMachine) check(t *rapid.T) {
	if now := time.Now(); !now.Equal(m.clock) {
		t.Fatalf("fake time is %v, want %v: a call blocked that should not have", now, m.clock)
	}
	for _, c := range m.calls {
		if len(c.res) != 0 {
			t.Fatalf("%s returned %+v; the model has it blocked", c.what, <-c.res)
		}
		if c.msg.waiter != c || c.msg.asker != nil || c.msg.gone ||
			(c.msg.state != fleetstate.TicketQueued && c.msg.state != fleetstate.TicketWorking) {
			t.Fatalf("model: %s blocked on %+v", c.what, *c.msg)
		}
	}
	for _, a := range m.asks {
		if len(a.res) != 0 {
			t.Fatalf("%s returned %+v; the model has it blocked", a.what, <-a.res)
		}
	}
	for lead, w := range m.waits {
		if len(w.res) != 0 {
			t.Fatalf("%s returned %+v; the model has it waiting", w.what, <-w.res)
		}
		if m.hasNews(lead) {
			t.Fatalf("model: %s waits beside news", w.what)
		}
	}
	m.compare(t, "")
}

// compare checks every lead's tickets, as the rendezvous holds them, with
// the model, and the ledger.
func (m *rvMachine) compare(t *rapid.T, when string) {
	held := map[string]int{}
	for _, lead := range m.leads {
		got := m.peekTickets(lead)
		var want []PeekedTicket
		for _, msg := range m.msgs {
			if msg.lead == lead && !msg.gone {
				want = append(want, PeekedTicket{Outcome: m.view(msg), Brief: msg.brief,
					Waited: msg.waiter != nil, News: msg.news(), Handed: msg.handed})
			}
		}
		// Snapshot orders tickets by creation time, which several share
		// in a bubble.
		byTicket := func(a, b PeekedTicket) int { return strings.Compare(a.Ticket, b.Ticket) }
		slices.SortFunc(got, byTicket)
		slices.SortFunc(want, byTicket)
		if !slices.Equal(got, want) {
			t.Fatalf("%stickets of %s:\n got %+v\nwant %+v", when, lead, got, want)
		}
		for _, p := range got {
			if p.State == fleetstate.TicketDone {
				held[p.TurnID]++
			}
		}
	}
	for id := range m.ended {
		call, ack, h := m.viaCall[id], m.viaAck[id], held[id]
		if call+ack+h == 0 || h > 1 || ack > 1 || ack+h > 1 {
			t.Fatalf("%sturn %s (%s) ended; its outcome was returned %d times by a call, acked %d times, held %d times; want it never lost, held or acked at most once",
				when, id, m.byTurn[id].brief, call, ack, h)
		}
	}
	for _, counts := range []map[string]int{m.viaCall, m.viaAck, held} {
		for id := range counts {
			if !m.ended[id] {
				t.Fatalf("%sturn %s has a terminal outcome but never ended", when, id)
			}
		}
	}
}

// closeAndReopen closes the rendezvous: every blocked call returns with
// ErrClosed (a lead's call with its ticket). A second rendezvous on the same
// fleet then finds every ticket the model holds, as news, none handed.
func (m *rvMachine) closeAndReopen(t *rapid.T) {
	if err := m.r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	m.releaseAll(t, "Close")
	closed := rvWantErr{code: fleetstate.CodeClosed}
	if err := m.r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := m.r.SendDetached(m.leads[0], m.members[0], "after close"); !closed.match(err) {
		t.Fatalf("SendDetached after Close: %v; want %s", err, closed)
	}
	if _, _, err := m.r.Next(context.Background(), m.members[0], time.Minute); !closed.match(err) {
		t.Fatalf("Next after Close: %v; want %s", err, closed)
	}

	_, r2 := openRendezvous(t, m.h, m.opts)
	m.r = r2 // closed at cleanup
	m.restore()
	m.compare(t, "after reopening, ")
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// peekTickets returns lead's tickets as the rendezvous holds them, as
// r.Snapshot shows them: without showing any to the lead and without
// releasing anything.
func (m *rvMachine) peekTickets(lead string) []PeekedTicket {
	var out []PeekedTicket
	for _, ti := range m.r.Snapshot().Tickets {
		if ti.Lead == lead {
			out = append(out, PeekedTicket{Outcome: ti.Outcome, Brief: ti.Brief, Waited: ti.Waited, News: ti.News, Handed: ti.Handed})
		}
	}
	return out
}
