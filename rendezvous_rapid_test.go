package fleetstate_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
	"pgregory.net/rapid"
)

// TestRendezvousStateMachine drives a rendezvous with pulling members and
// one or two leads through random interleavings of send, next, ask,
// answer, reply, poll and ack, against a model of every turn.
//
// Each run is a synctest bubble (rapid.SyncTest): after each action the
// test waits until every goroutine it started is durably blocked, so the
// model knows exactly which calls must have returned and with what, and the
// bounds of sends, asks and polls pass only when the Sleep action moves the
// fake clock. The invariant, checked after every action, compares what each
// lead can collect (PollAll) with the model and keeps a ledger of outcomes:
//
//   - a message is delivered by Next at most once;
//   - every ended turn's outcome reaches its lead exactly once: as the
//     result of a blocked Send or Answer, or held on the ticket until the
//     ack, never both and never neither;
//   - a call the model holds blocked has not returned, and no call blocked
//     that should have returned (fake time moves only when the test sleeps).
//
// Every call's result is compared field by field with the model's, and
// the error actions want exact codes: ERR_UNKNOWN_TURN (an unknown,
// finished or collected turn), ERR_NO_PENDING_QUESTION (a turn with no
// question waiting, answered ones included), ERR_NOT_PERMITTED (another
// lead's turn), ERR_NO_OPEN_TURN (Reply or Ask without an open turn),
// ERR_QUESTION_PENDING, ERR_TICKET_OPEN (ack of an unfinished ticket) and
// ERR_UNKNOWN_TICKET. At the end, Close must release every blocked call
// (a lead's with its ticket), and a second rendezvous on the same file
// system must find every ticket the model still holds.
func TestRendezvousStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) {
			m := rvNewMachine(t)
			t.Repeat(m.actions())
			m.closeAndReopen(t)
		})
	})
}

// rvMsg is the model of one message to a member and its turn.
type rvMsg struct {
	n        int
	lead     string
	member   string
	brief    string
	turnID   string // "" until a call or Next reveals it
	ticket   string // "" until a call reveals it
	state    fleetstate.TicketState
	question string              // while state is question
	held     *fleetstate.Outcome // the terminal outcome, once state is done
	gone     bool                // the outcome reached the lead (call result or ack)
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

// rvWait is a lead's PollAll waiting for a change of its tickets.
type rvWait struct {
	what     string
	lead     string
	deadline time.Time
	res      chan rvWaitResult // capacity 1
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

type rvMachine struct {
	fs      afero.Fs
	r       *fleetstate.Rendezvous
	ctx     context.Context // of every call the test starts; cancelled after Close at cleanup
	leads   []string
	members []string
	clock   time.Time // fake time as the model expects it

	n        int
	msgs     []*rvMsg // in the order of their turns' creation
	byTicket map[string]*rvMsg
	byTurn   map[string]*rvMsg
	queue    map[string][]*rvMsg
	open     map[string]*rvMsg
	calls    []*rvCall
	asks     []*rvAsk
	waits    []*rvWait
	after    []func(*rapid.T) // checks of calls the last action must have ended

	// The ledger, from what the library returned.
	delivered map[string]bool // turn IDs handed to members by Next
	briefs    map[string]bool // contents handed to members by Next
	ended     map[string]bool // turn IDs whose turn ended (Reply, or Next)
	viaCall   map[string]int  // terminal outcomes returned by a lead's call
	viaAck    map[string]int  // finished tickets acked
}

const rvDir = "/state"

func rvNewMachine(t *rapid.T) *rvMachine {
	fs := afero.NewMemMapFs()
	st, err := fleetstate.Open(fs, rvDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Release whatever a failed run left blocked, so that the bubble
	// ends and the failure is reported: Close first, then the context of
	// every call the test started (cleanups run last in, first out).
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	t.Cleanup(func() { r.Close() })
	m := &rvMachine{
		fs:        fs,
		r:         r,
		ctx:       ctx,
		clock:     time.Now(),
		byTicket:  map[string]*rvMsg{},
		byTurn:    map[string]*rvMsg{},
		queue:     map[string][]*rvMsg{},
		open:      map[string]*rvMsg{},
		delivered: map[string]bool{},
		briefs:    map[string]bool{},
		ended:     map[string]bool{},
		viaCall:   map[string]int{},
		viaAck:    map[string]int{},
	}
	for i := range rapid.IntRange(1, 2).Draw(t, "leads") {
		m.leads = append(m.leads, fmt.Sprintf("lead%d", i))
	}
	for i := range rapid.IntRange(2, 3).Draw(t, "members") {
		name := fmt.Sprintf("m%d", i)
		if err := r.AddMember(name, nil); err != nil {
			t.Fatal(err)
		}
		if err := r.SetReady(name, true); err != nil {
			t.Fatal(err)
		}
		m.members = append(m.members, name)
	}
	return m
}

func (m *rvMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"SendDetached":      m.sendDetached,
		"Send":              m.send,
		"Cancel":            m.cancelCall,
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
		"Ack":               m.ack,
		"AckOpen":           m.ackOpen,
		"AckUnknown":        m.ackUnknown,
		"Sleep":             m.sleep,
		"":                  m.check,
	}
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

func (m *rvMachine) sendDetached(t *rapid.T) {
	msg := m.newMsg(t)
	o, err := m.r.SendDetached(msg.lead, msg.member, msg.brief)
	if err != nil {
		t.Fatalf("SendDetached(%s): %v", msg.brief, err)
	}
	m.learn(t, msg, o)
	m.queue[msg.member] = append(m.queue[msg.member], msg)
	if want := m.view(msg); o != want {
		t.Fatalf("SendDetached(%s) = %+v; want %+v", msg.brief, o, want)
	}
}

// callContext returns a context for a lead's call: cancellable always, and
// with a deadline before or after SendTimeout, or none.
func (m *rvMachine) callContext(t *rapid.T, c *rvCall) context.Context {
	c.deadline = m.clock.Add(fleetstate.DefaultSendTimeout)
	secs := rapid.IntRange(0, 90).Draw(t, "ctx timeout s")
	if secs == 0 || time.Duration(secs)*time.Second == fleetstate.DefaultSendTimeout {
		ctx, cancel := context.WithCancel(m.ctx)
		c.cancel = cancel
		return ctx
	}
	d := time.Duration(secs) * time.Second
	ctx, cancel := context.WithTimeout(m.ctx, d)
	c.cancel = cancel
	if d < fleetstate.DefaultSendTimeout {
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
	m.queue[msg.member] = append(m.queue[msg.member], msg)
	if busy {
		// A member with work ahead: pending at once, with a ticket.
		m.resolve(c, rvWantErr{})
	} else {
		msg.waiter = c
		m.calls = append(m.calls, c)
	}
	m.settle(t)
}

func (m *rvMachine) cancelCall(t *rapid.T) {
	if len(m.calls) == 0 {
		t.Skip("no blocked call")
	}
	c := rapid.SampledFrom(m.calls).Draw(t, "call")
	c.cancel()
	m.resolve(c, rvWantErr{err: context.Canceled})
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
	if open := m.open[member]; open != nil {
		m.endTurn(open, fleetstate.Outcome{Kind: fleetstate.OutcomeTurnDone})
	}
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
	if err != nil || !ok || got.Content != head.brief || got.From != head.lead {
		t.Fatalf("Next(%s) = %+v, %v, %v; want %s from %s", member, got, ok, err, head.brief, head.lead)
	}
	if m.delivered[got.TurnID] || m.briefs[got.Content] {
		t.Fatalf("Next(%s) delivered %+v a second time", member, got)
	}
	m.delivered[got.TurnID], m.briefs[got.Content] = true, true
	m.learn(t, head, fleetstate.Outcome{TurnID: got.TurnID})
	head.state = fleetstate.TicketWorking
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
		what:     fmt.Sprintf("Ask(%s, question %d)", member, m.n),
		def:      fmt.Sprintf("default %d", m.n),
		deadline: m.clock.Add(fleetstate.DefaultAskTimeout),
		res:      make(chan rvAskResult, 1),
	}
	question := fmt.Sprintf("question %d", m.n)
	go func() {
		text, timedOut, err := m.r.Ask(m.ctx, member, question, a.def)
		a.res <- rvAskResult{text, timedOut, err}
	}()
	return a, question
}

func (m *rvMachine) ask(t *rapid.T) {
	busy := m.membersWith(func(open *rvMsg) bool { return open != nil })
	if len(busy) == 0 {
		t.Skip("no open turn")
	}
	member := rapid.SampledFrom(busy).Draw(t, "member")
	a, question := m.startAsk(member)
	open := m.open[member]
	if open.asker != nil {
		m.resolveAsk(a, rvAskResult{}, rvWantErr{code: fleetstate.CodeQuestionPending})
	} else {
		a.msg = open
		open.asker = a
		open.state, open.question = fleetstate.TicketQuestion, question
		m.asks = append(m.asks, a)
		if c := open.waiter; c != nil {
			m.resolve(c, rvWantErr{}) // the blocked call returns the question
		}
	}
	m.settle(t)
}

func (m *rvMachine) askNoTurn(t *rapid.T) {
	idle := m.membersWith(func(open *rvMsg) bool { return open == nil })
	if len(idle) == 0 {
		t.Skip("every member has an open turn")
	}
	a, _ := m.startAsk(rapid.SampledFrom(idle).Draw(t, "member"))
	m.resolveAsk(a, rvAskResult{}, rvWantErr{code: fleetstate.CodeNoOpenTurn})
	m.settle(t)
}

func (m *rvMachine) answer(t *rapid.T) {
	var asking []*rvMsg
	for _, msg := range m.msgs {
		if msg.asker != nil {
			asking = append(asking, msg)
		}
	}
	if len(asking) == 0 {
		t.Skip("no question waits")
	}
	msg := rapid.SampledFrom(asking).Draw(t, "turn")
	m.n++
	content := fmt.Sprintf("answer %d", m.n)
	c := &rvCall{what: "Answer(" + msg.brief + ", " + content + ")", msg: msg, res: make(chan rvResult, 1)}
	ctx := m.callContext(t, c)
	go func() {
		o, err := m.r.Answer(ctx, msg.lead, msg.turnID, content)
		c.cancel()
		c.res <- rvResult{o, err}
	}()
	a := msg.asker
	m.asks = slices.DeleteFunc(m.asks, func(x *rvAsk) bool { return x == a })
	msg.asker = nil
	m.resolveAsk(a, rvAskResult{text: content}, rvWantErr{})
	msg.state, msg.question = fleetstate.TicketWorking, ""
	msg.waiter = c
	m.calls = append(m.calls, c)
	m.settle(t)
}

// answerErr answers turnID as lead and wants the error code; the call must
// not block.
func (m *rvMachine) answerErr(t *rapid.T, lead, turnID string, code fleetstate.Code) {
	ch := make(chan rvResult, 1)
	go func() {
		o, err := m.r.Answer(m.ctx, lead, turnID, "unwanted answer")
		ch <- rvResult{o, err}
	}()
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
		if msg.turnID != "" && (msg.gone || msg.state == fleetstate.TicketDone) {
			ids = append(ids, msg.turnID)
		}
	}
	id := rapid.SampledFrom(ids).Draw(t, "turn")
	lead := rapid.SampledFrom(m.leads).Draw(t, "lead")
	m.answerErr(t, lead, id, fleetstate.CodeUnknownTurn)
}

// liveTurns returns the messages with a known turn ID whose turn has not
// ended.
func (m *rvMachine) liveTurns(keep func(*rvMsg) bool) []*rvMsg {
	var out []*rvMsg
	for _, msg := range m.msgs {
		if msg.turnID != "" && !msg.gone && msg.state != fleetstate.TicketDone && keep(msg) {
			out = append(out, msg)
		}
	}
	return out
}

func (m *rvMachine) answerNoQuestion(t *rapid.T) {
	cands := m.liveTurns(func(msg *rvMsg) bool { return msg.asker == nil })
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
	m.endTurn(m.open[member], fleetstate.Outcome{Kind: fleetstate.OutcomeReply, Content: content})
	m.settle(t)
}

func (m *rvMachine) replyNoTurn(t *rapid.T) {
	idle := m.membersWith(func(open *rvMsg) bool { return open == nil })
	if len(idle) == 0 {
		t.Skip("every member has an open turn")
	}
	member := rapid.SampledFrom(idle).Draw(t, "member")
	if err := m.r.Reply(member, "nobody asked"); fleetstate.CodeOf(err) != fleetstate.CodeNoOpenTurn {
		t.Fatalf("Reply(%s) without an open turn = %v; want %s", member, err, fleetstate.CodeNoOpenTurn)
	}
}

// known returns the messages whose ticket the lead was given.
func (m *rvMachine) known() []*rvMsg {
	var out []*rvMsg
	for _, msg := range m.msgs {
		if msg.ticket != "" {
			out = append(out, msg)
		}
	}
	return out
}

func (m *rvMachine) poll(t *rapid.T) {
	tickets := m.known()
	if len(tickets) == 0 {
		t.Skip("no ticket")
	}
	msg := rapid.SampledFrom(tickets).Draw(t, "ticket")
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
}

// pollAll calls PollAll at once (wait 0) or in a goroutine that waits for
// a change of the lead's tickets.
func (m *rvMachine) pollAll(t *rapid.T) {
	lead := rapid.SampledFrom(m.leads).Draw(t, "lead")
	wait := time.Duration(rapid.IntRange(0, 90).Draw(t, "wait s")) * time.Second
	if wait == 0 {
		got, err := m.r.PollAll(context.Background(), lead, 0)
		if want := m.tickets(lead); err != nil || !slices.Equal(got, want) {
			t.Fatalf("PollAll(%s) = %+v, %v; want %+v", lead, got, err, want)
		}
		return
	}
	w := &rvWait{
		what:     fmt.Sprintf("PollAll(%s, %v)", lead, wait),
		lead:     lead,
		deadline: m.clock.Add(min(wait, fleetstate.DefaultMaxWait)),
		res:      make(chan rvWaitResult, 1),
	}
	go func() {
		out, err := m.r.PollAll(m.ctx, lead, wait)
		w.res <- rvWaitResult{out, err}
	}()
	m.waits = append(m.waits, w)
	m.settle(t)
}

func (m *rvMachine) ack(t *rapid.T) {
	var done []*rvMsg
	for _, msg := range m.known() {
		if !msg.gone && msg.state == fleetstate.TicketDone {
			done = append(done, msg)
		}
	}
	if len(done) == 0 {
		t.Skip("no finished ticket")
	}
	msg := rapid.SampledFrom(done).Draw(t, "ticket")
	if err := m.r.Ack(msg.lead, msg.ticket); err != nil {
		t.Fatalf("Ack(%s): %v", msg.brief, err)
	}
	msg.gone = true
	m.viaAck[msg.turnID]++
}

func (m *rvMachine) ackOpen(t *rapid.T) {
	var open []*rvMsg
	for _, msg := range m.known() {
		if !msg.gone && msg.state != fleetstate.TicketDone {
			open = append(open, msg)
		}
	}
	if len(open) == 0 {
		t.Skip("no open ticket")
	}
	msg := rapid.SampledFrom(open).Draw(t, "ticket")
	if err := m.r.Ack(msg.lead, msg.ticket); fleetstate.CodeOf(err) != fleetstate.CodeTicketOpen {
		t.Fatalf("Ack(%s) of a %s ticket = %v; want %s", msg.brief, msg.state, err, fleetstate.CodeTicketOpen)
	}
}

func (m *rvMachine) ackUnknown(t *rapid.T) {
	type target struct{ lead, ticket string }
	targets := []target{{m.leads[0], "ticket-00000000-0000-0000-0000-000000000000"}}
	for _, msg := range m.known() {
		if msg.gone {
			targets = append(targets, target{msg.lead, msg.ticket})
		}
		targets = append(targets, target{m.otherLead(msg.lead), msg.ticket})
	}
	tg := rapid.SampledFrom(targets).Draw(t, "target")
	if err := m.r.Ack(tg.lead, tg.ticket); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("Ack(%s, %s) = %v; want %s", tg.lead, tg.ticket, err, fleetstate.CodeUnknownTicket)
	}
}

// sleep moves the fake clock: the bounds of sends, answers, asks and
// waiting polls that pass end those calls.
func (m *rvMachine) sleep(t *rapid.T) {
	d := time.Duration(rapid.IntRange(1, 70).Draw(t, "sleep s")) * time.Second
	time.Sleep(d)
	m.clock = m.clock.Add(d)
	for _, c := range slices.Clone(m.calls) {
		if !c.deadline.After(m.clock) {
			want := rvWantErr{}
			if c.ctxFirst {
				want.err = context.DeadlineExceeded
			}
			m.resolve(c, want)
		}
	}
	for _, a := range slices.Clone(m.asks) {
		if !a.deadline.After(m.clock) {
			m.asks = slices.DeleteFunc(m.asks, func(x *rvAsk) bool { return x == a })
			a.msg.asker = nil
			a.msg.state, a.msg.question = fleetstate.TicketWorking, ""
			m.resolveAsk(a, rvAskResult{text: a.def, timedOut: true}, rvWantErr{})
		}
	}
	m.settle(t)
}

// --- model ---------------------------------------------------------------

// view is the outcome the lead sees for msg's ticket now.
func (m *rvMachine) view(msg *rvMsg) fleetstate.Outcome {
	switch msg.state {
	case fleetstate.TicketDone:
		o := *msg.held
		o.Ticket, o.State = msg.ticket, fleetstate.TicketDone
		return o
	case fleetstate.TicketQuestion:
		return fleetstate.Outcome{Kind: fleetstate.OutcomeQuestion, TurnID: msg.turnID, Ticket: msg.ticket,
			From: msg.member, Content: msg.question, State: fleetstate.TicketQuestion}
	default:
		return fleetstate.Outcome{Kind: fleetstate.OutcomePending, TurnID: msg.turnID, Ticket: msg.ticket,
			From: msg.member, State: msg.state}
	}
}

// tickets is what PollAll must return for lead: every ticket still held
// that no call of the lead waits on, oldest first.
func (m *rvMachine) tickets(lead string) []fleetstate.Outcome {
	var out []fleetstate.Outcome
	for _, msg := range m.msgs {
		if msg.lead == lead && !msg.gone && msg.waiter == nil {
			out = append(out, m.view(msg))
		}
	}
	return out
}

func rvActionable(out []fleetstate.Outcome) bool {
	for _, o := range out {
		if o.Kind != fleetstate.OutcomePending {
			return true
		}
	}
	return false
}

func rvTerminal(k fleetstate.OutcomeKind) bool {
	return k == fleetstate.OutcomeReply || k == fleetstate.OutcomeTurnDone || k == fleetstate.OutcomeFailed
}

// learn records the ticket and turn ID a call revealed for msg, checking
// that they agree with what was known and name no other message.
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

// endTurn ends msg's open turn with terminal outcome o: a blocked call of
// the lead gets it, otherwise the ticket holds it; a waiting Ask fails.
func (m *rvMachine) endTurn(msg *rvMsg, o fleetstate.Outcome) {
	m.open[msg.member] = nil
	m.ended[msg.turnID] = true
	if a := msg.asker; a != nil {
		msg.asker = nil
		m.asks = slices.DeleteFunc(m.asks, func(x *rvAsk) bool { return x == a })
		m.resolveAsk(a, rvAskResult{}, rvWantErr{code: fleetstate.CodeNoOpenTurn})
	}
	msg.question = ""
	o.TurnID, o.From = msg.turnID, msg.member
	held := o
	msg.state, msg.held = fleetstate.TicketDone, &held
	if c := msg.waiter; c != nil {
		m.resolve(c, rvWantErr{})
		msg.gone = true
	}
}

// resolve notes that call c must have returned by the end of the action,
// with the outcome the model has for its turn now (a terminal one without
// ticket or state, as a blocked call gets it) and the error want.
func (m *rvMachine) resolve(c *rvCall, want rvWantErr) {
	msg := c.msg
	m.calls = slices.DeleteFunc(m.calls, func(x *rvCall) bool { return x == c })
	if msg.waiter == c {
		msg.waiter = nil
	}
	wantO := m.view(msg)
	terminal := msg.state == fleetstate.TicketDone
	if terminal {
		wantO = *msg.held
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
		if !terminal {
			// The ticket (and for a message never delivered, the turn
			// ID) may first become known now.
			m.learn(t, msg, res.o)
			wantO.Ticket, wantO.TurnID = msg.ticket, msg.turnID
		}
		if res.o != wantO || !want.match(res.err) {
			t.Fatalf("%s = %+v, %v; want %+v, %v", c.what, res.o, res.err, wantO, want)
		}
		if !terminal && wantO.Ticket == "" {
			t.Fatalf("%s returned %+v without a ticket", c.what, res.o)
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
// the calls the action ended and the waiting polls it woke.
func (m *rvMachine) settle(t *rapid.T) {
	synctest.Wait()
	after := m.after
	m.after = nil
	for _, f := range after {
		f(t)
	}
	for _, w := range slices.Clone(m.waits) {
		want := m.tickets(w.lead)
		actionable := rvActionable(want)
		if !actionable && w.deadline.After(m.clock) {
			continue // still waiting; check verifies it
		}
		m.waits = slices.DeleteFunc(m.waits, func(x *rvWait) bool { return x == w })
		var res rvWaitResult
		select {
		case res = <-w.res:
		default:
			t.Fatalf("%s is still blocked; want it to return (actionable %v)", w.what, actionable)
		}
		switch {
		case res.err != nil:
			t.Fatalf("%s: %v", w.what, res.err)
		case actionable && !slices.Equal(res.out, want):
			t.Fatalf("%s = %+v; want %+v", w.what, res.out, want)
		case !actionable && rvActionable(res.out):
			t.Fatalf("%s at its bound = %+v; want nothing to collect", w.what, res.out)
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
	for _, w := range m.waits {
		if len(w.res) != 0 {
			t.Fatalf("%s returned %+v; the model has it blocked", w.what, <-w.res)
		}
	}

	// What each lead can collect is what the model holds, and every
	// ended turn reached its lead exactly once.
	held := map[string]int{}
	for _, lead := range m.leads {
		got, err := m.r.PollAll(context.Background(), lead, 0)
		if want := m.tickets(lead); err != nil || !slices.Equal(got, want) {
			t.Fatalf("PollAll(%s) = %+v, %v; want %+v", lead, got, err, want)
		}
		for _, o := range got {
			if rvTerminal(o.Kind) {
				held[o.TurnID]++
			}
		}
	}
	for id := range m.ended {
		if n := m.viaCall[id] + m.viaAck[id] + held[id]; n != 1 {
			t.Fatalf("turn %s (%s) ended; its outcome reached the lead %d times by call, %d by ack, held %d times; want once in all",
				id, m.byTurn[id].brief, m.viaCall[id], m.viaAck[id], held[id])
		}
	}
	for _, counts := range []map[string]int{m.viaCall, m.viaAck, held} {
		for id := range counts {
			if !m.ended[id] {
				t.Fatalf("turn %s has a terminal outcome but never ended", id)
			}
		}
	}
}

// closeAndReopen closes the rendezvous: every blocked call returns with
// ErrClosed (a lead's call with its ticket). A second rendezvous on the same
// file system then finds every ticket the model holds.
func (m *rvMachine) closeAndReopen(t *rapid.T) {
	if err := m.r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed := rvWantErr{code: fleetstate.CodeClosed}
	for _, c := range slices.Clone(m.calls) {
		m.resolve(c, closed)
	}
	for _, a := range m.asks {
		m.resolveAsk(a, rvAskResult{}, closed)
	}
	m.asks = nil
	waits := m.waits
	m.waits = nil
	m.settle(t)
	for _, w := range waits {
		select {
		case res := <-w.res:
			if !closed.match(res.err) {
				t.Fatalf("%s after Close: %v; want %s", w.what, res.err, closed)
			}
		default:
			t.Fatalf("%s is still blocked after Close", w.what)
		}
	}
	if err := m.r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := m.r.SendDetached(m.leads[0], m.members[0], "after close"); !closed.match(err) {
		t.Fatalf("SendDetached after Close: %v; want %s", err, closed)
	}
	if _, _, err := m.r.Next(context.Background(), m.members[0], time.Minute); !closed.match(err) {
		t.Fatalf("Next after Close: %v; want %s", err, closed)
	}

	st, err := fleetstate.Open(m.fs, rvDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for _, lead := range m.leads {
		got, err := r2.PollAll(context.Background(), lead, 0)
		if want := m.tickets(lead); err != nil || !slices.Equal(got, want) {
			t.Fatalf("after reopening, PollAll(%s) = %+v, %v; want %+v", lead, got, err, want)
		}
	}
}
