package fleetstate

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Send hands content to member to from lead and blocks until the turn's
// first outcome: the member's reply, a question (answer it with
// [Rendezvous.Answer] and the outcome's turn ID), turn_done or a failure.
// The lead's call is held open: there is no polling.
//
// The outcome a call returns stays held on its ticket (the outcome carries it)
// until the lead's next call, or its [Rendezvous.Ack]: a lead whose connection
// broke as the outcome was on its way finds it with [Rendezvous.PollAll].
//
// Send never blocks past SendTimeout. If the turn has not ended by then, or if
// the member is busy with an earlier turn or has messages queued ahead, Send
// returns a pending outcome with a ticket, and the turn's outcome is held on
// that ticket for [Rendezvous.Poll]. If ctx ends first, Send returns the
// pending outcome and ctx.Err(); the turn goes on and nothing is lost. If the
// outcome arrives when ctx has already ended, it is held on the ticket too, and
// Send returns it with the ticket and ctx.Err(): a caller that gave up (a lead
// whose connection dropped) may not be there to take it.
func (r *Rendezvous) Send(ctx context.Context, lead, to, content string) (Outcome, error) {
	t, w, accepted, err := r.enqueue("send", lead, to, content, true)
	if err != nil {
		return Outcome{}, err
	}
	if w == nil {
		return accepted, nil
	}
	return r.await(ctx, t, w)
}

// SendDetached hands content to member to from lead and returns at once a
// pending outcome with a ticket. The outcome is held on the ticket until
// [Rendezvous.Ack]; a lead with a port is nudged when it is ready.
func (r *Rendezvous) SendDetached(lead, to, content string) (Outcome, error) {
	_, _, accepted, err := r.enqueue("send", lead, to, content, false)
	return accepted, err
}

// enqueue validates a send, queues the new turn and, when the lead will
// block, attaches a waiter. No waiter is attached when the member is busy:
// the send then reports pending at once rather than holding the lead for a
// turn that cannot start soon.
func (r *Rendezvous) enqueue(op, leadName, to, content string, block bool) (t *turn, w *waiter, accepted Outcome, err error) {
	if err := checkAgentName(op, leadName); err != nil {
		return nil, nil, Outcome{}, err
	}
	if err := r.checkContent(op, content); err != nil {
		return nil, nil, Outcome{}, err
	}
	r.lockW()
	defer r.unlockW()
	m, err := r.registered(op, to)
	if err != nil {
		return nil, nil, Outcome{}, err
	}
	if err := r.admit(op, m); err != nil {
		return nil, nil, Outcome{}, err
	}
	r.releaseHanded(leadName)
	if t, err = r.newTurn(leadName, m, content); err != nil {
		return nil, nil, Outcome{}, err
	}
	// The outcome as accepted: taken now, under the lock, so that it says
	// where the turn stood when it was written (queued, or working when a
	// waiting Next took it at once), whatever the member does next.
	accepted = t.view()
	busy := m.open != nil && m.open != t || len(m.queue) > 1
	if !block || busy {
		r.changed(leadName)
		return t, nil, accepted, nil
	}
	w = r.getWaiter()
	t.waiter = w
	return t, w, accepted, nil
}

func (r *Rendezvous) checkContent(op, content string) error {
	if content == "" {
		return newError(CodeInvalidArgument, op, "empty content")
	}
	if int64(len(content)) > r.store.maxContent {
		return newError(CodeContentTooLarge, op, "%d bytes, limit %d", len(content), r.store.maxContent)
	}
	return nil
}

// await blocks on w until t's next outcome, the send bound, ctx or Close.
func (r *Rendezvous) await(ctx context.Context, t *turn, w *waiter) (Outcome, error) {
	timer := r.getTimer(r.opt.SendTimeout)
	defer r.putTimer(timer)
	// Whoever sends on w.ch unhooks it from t first, and detach unhooks it
	// or takes what was sent: once await returns, no one holds w and its
	// channel is empty.
	defer r.waiters.Put(w)
	select {
	case res := <-w.ch:
		if err := ctx.Err(); err != nil {
			return r.rehold(t, res, err)
		}
		return res.o, res.err
	case <-timer.C:
		res := r.detach(t, w)
		return res.o, res.err
	case <-ctx.Done():
		res := r.detach(t, w)
		if res.err == nil && res.o.Kind == OutcomePending {
			res.err = ctx.Err()
		}
		return r.rehold(t, res, ctx.Err())
	}
}

// rehold keeps on t's ticket, until acked, a terminal outcome that was
// handed to a blocked call whose caller had given up meanwhile, and
// returns it with the ticket and cause. Other results pass through: a
// pending outcome or a question stays on the ticket anyway, and the
// outcome of cleaned sessions is not brought back.
func (r *Rendezvous) rehold(t *turn, res result, cause error) (Outcome, error) {
	if res.err == nil && res.o.Kind == OutcomeQuestion {
		// The question stays on the ticket; it is news again for a poll.
		r.lockW()
		t.seen = false
		r.unlockW()
	}
	if res.err != nil || !res.o.terminal() || res.o.Reason == ReasonSessionCleaned {
		return res.o, res.err
	}
	r.lockW()
	defer r.unlockW()
	save := false
	if r.tickets[t.Ticket] != t {
		// Forgotten meanwhile by another call of the lead.
		r.turns[t.ID] = t
		r.tickets[t.Ticket] = t
		save = true
	}
	if t.HeldUntil != nil {
		// Its record said the hold ends: a restart would end it too.
		t.HeldUntil = nil
		r.j.Unhold(t.ID)
		save = true
	}
	if save {
		r.j.save(t)
	}
	t.unhand()
	t.seen = false
	r.changed(t.Lead)
	r.queueNudge(t)
	return t.view(), cause
}

// Answer answers the question the member asked in turn turnID. The
// member's Ask returns content and its turn goes on; Answer then blocks for
// the turn's next outcome exactly as [Rendezvous.Send] does. An unknown turn
// is [ErrUnknownTurn]; a turn with no question waiting (answered already,
// or its window passed) is [ErrNoPendingQuestion]; a turn another lead
// opened is [ErrNotPermitted].
func (r *Rendezvous) Answer(ctx context.Context, lead, turnID, content string) (Outcome, error) {
	return r.answer(ctx, lead, turnID, content, false)
}

// AnswerFor is Answer done for lead by someone else, such as a person at
// a dashboard: it does not wait for the turn's next outcome, which goes
// to lead's ticket as news, and it is not a call of lead, so what lead's
// earlier calls returned stays held. It returns where the turn stands.
func (r *Rendezvous) AnswerFor(lead, turnID, content string) (Outcome, error) {
	return r.answer(context.Background(), lead, turnID, content, true)
}

func (r *Rendezvous) answer(ctx context.Context, lead, turnID, content string, forLead bool) (Outcome, error) {
	const op = "answer"
	if err := r.checkContent(op, content); err != nil {
		return Outcome{}, err
	}
	r.lockW()
	if r.closed {
		r.unlockW()
		return Outcome{}, &Error{Code: CodeClosed, Op: op}
	}
	if !forLead {
		r.releaseHanded(lead)
	}
	t := r.turns[turnID]
	if t == nil || t.State == TicketDone {
		r.unlockW()
		return Outcome{}, newError(CodeUnknownTurn, op, "%s", quote(turnID))
	}
	if t.Lead != lead {
		r.unlockW()
		return Outcome{}, newError(CodeNotPermitted, op, "turn %s belongs to another lead", quote(turnID))
	}
	switch {
	case t.asker != nil:
		t.asker <- answer{text: content}
		t.asker = nil
	case t.State == TicketQuestion:
		// A question restored after a restart, whose Ask died with the
		// old process: the answer waits for the member's next Ask.
		t.Answer = &content
		t.stopAskTimer()
	default:
		r.unlockW()
		return Outcome{}, newError(CodeNoPendingQuestion, op, "turn %s", quote(turnID))
	}
	t.State, t.Question = TicketWorking, ""
	r.j.save(t)
	r.publishTurn(EventAnswered, t, content)
	if forLead {
		r.changed(t.Lead)
		defer r.unlockW()
		return t.view(), nil
	}
	var w *waiter
	if t.waiter == nil {
		w = r.getWaiter()
		t.waiter = w
	}
	r.changed(t.Lead)
	r.unlockW()
	if w == nil {
		// Another call of the lead already waits on this turn; it
		// will get the outcome, and this one reports where it stands.
		r.lockW()
		defer r.unlockW()
		return t.view(), nil
	}
	return r.await(ctx, t, w)
}

// Poll returns where the ticket stands: pending (with its state), a
// question waiting for an answer, or the finished turn's outcome, which
// stays on the ticket until [Rendezvous.Ack]. With wait > 0 (capped at
// MaxWait) and a turn still queued or working, Poll first waits for the
// ticket to change. Only the lead that sent the message sees its ticket.
func (r *Rendezvous) Poll(ctx context.Context, lead, ticket string, wait time.Duration) (Outcome, error) {
	const op = "poll"
	deadline := r.waitTimer(wait)
	defer r.putTimer(deadline)
	for {
		r.mu.Lock()
		t := r.tickets[ticket]
		if t == nil || t.Lead != lead {
			r.mu.Unlock()
			return Outcome{}, newError(CodeUnknownTicket, op, "%s", quote(ticket))
		}
		o := t.view()
		t.seen = t.seen || o.Kind != OutcomePending
		changed := r.lead(lead).changes()
		r.mu.Unlock()
		if o.Kind != OutcomePending {
			return o, nil
		}
		if done, err := r.waitChange(ctx, deadline, changed); done {
			return o, err
		}
	}
}

// Bounds of a page of tickets.
const (
	DefaultPollLimit = 100  // tickets in a page when the caller gives no limit
	MaxPollLimit     = 1000 // the most tickets in a page
)

// TicketPage is a page of a lead's tickets, oldest first.
type TicketPage struct {
	Tickets []Outcome `json:"tickets"`
	// Next is the cursor of the next page, or empty when this page holds
	// the last ticket.
	Next string `json:"next_cursor,omitempty"`
}

// PollAll returns every ticket of lead that no call of the lead is blocked
// on, oldest first: PollPage without a limit.
func (r *Rendezvous) PollAll(ctx context.Context, lead string, wait time.Duration) ([]Outcome, error) {
	p, err := r.pollPage(ctx, lead, wait, "", -1)
	return p.Tickets, err
}

// PollPage returns a page of at most limit of lead's tickets that no call
// of the lead is blocked on, oldest first, starting after cursor (empty for
// the first page; then the Next of the page before). A limit of zero or
// less means DefaultPollLimit, and no page holds more than MaxPollLimit.
// Tickets that end or are acked between two pages do not disturb the
// order: each page starts after the last ticket of the one before.
//
// With wait > 0 (capped at MaxWait), PollPage returns at once when a ticket
// from the cursor on holds news: a question or an outcome the lead has not
// been shown yet. Otherwise it waits for news, at most wait, and then
// returns the page as it stands. So a lead that waits on it is woken by
// news and never spins on a question it has already seen.
func (r *Rendezvous) PollPage(ctx context.Context, lead string, wait time.Duration, cursor string, limit int) (TicketPage, error) {
	if limit <= 0 {
		limit = DefaultPollLimit
	}
	return r.pollPage(ctx, lead, wait, cursor, min(limit, MaxPollLimit))
}

// pollPage is PollPage; a negative limit means no limit.
func (r *Rendezvous) pollPage(ctx context.Context, lead string, wait time.Duration, cursor string, limit int) (TicketPage, error) {
	after, err := parseCursor(cursor)
	if err != nil {
		return TicketPage{}, err
	}
	deadline := r.waitTimer(wait)
	defer r.putTimer(deadline)
	expired := wait <= 0
	for {
		r.mu.Lock()
		var ts []*turn
		news := false
		for _, t := range r.tickets {
			if t.Lead == lead && t.waiter == nil && t.Seq > after {
				ts = append(ts, t)
				news = news || !t.seen && (t.State == TicketDone || t.State == TicketQuestion)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Seq < ts[j].Seq })
		var p TicketPage
		if limit >= 0 && len(ts) > limit {
			ts = ts[:limit]
			p.Next = "s" + strconv.FormatInt(ts[len(ts)-1].Seq, 10)
		}
		p.Tickets = make([]Outcome, len(ts))
		for i, t := range ts {
			p.Tickets[i] = t.view()
		}
		if news || expired {
			for _, t := range ts {
				t.seen = t.seen || t.State == TicketDone || t.State == TicketQuestion
			}
		}
		changed := r.lead(lead).changes()
		r.mu.Unlock()
		if news || expired {
			return p, nil
		}
		done, err := r.waitChange(ctx, deadline, changed)
		if err != nil {
			return p, err
		}
		expired = done // at the bound: one more look, so the page is current
	}
}

// parseCursor reads a cursor of PollPage: "s" and the order number of the
// last ticket of the page before. The empty cursor starts at the oldest.
func parseCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(cursor, "s"), 10, 64)
	if !strings.HasPrefix(cursor, "s") || err != nil || n < 0 {
		return 0, newError(CodeInvalidArgument, "poll", "cursor %s is not one a page of tickets gave", quote(cursor))
	}
	return n, nil
}

// waitTimer returns a timer for a poll's wait, capped at MaxWait; a wait of
// zero or less gives a timer that has already fired. Give it back with
// putTimer.
func (r *Rendezvous) waitTimer(wait time.Duration) *time.Timer {
	return r.getTimer(min(max(wait, 0), r.opt.MaxWait))
}

// getTimer returns a running timer that fires after d, from r's pool: a
// round trip would otherwise make two. Give it back with putTimer once
// nothing reads its channel any more.
func (r *Rendezvous) getTimer(d time.Duration) *time.Timer {
	if tm, ok := r.timers.Get().(*time.Timer); ok {
		tm.Reset(d)
		return tm
	}
	return time.NewTimer(d)
}

// putTimer stops tm and keeps it for getTimer. Since Go 1.23 a stopped
// timer holds no stale tick, so the next Reset starts it clean.
func (r *Rendezvous) putTimer(tm *time.Timer) {
	tm.Stop()
	r.timers.Put(tm)
}

// waitChange waits for changed, the deadline, ctx or Close, and reports
// whether the caller should stop waiting and with which error.
func (r *Rendezvous) waitChange(ctx context.Context, deadline *time.Timer, changed <-chan struct{}) (bool, error) {
	select {
	case <-changed:
		return false, nil
	case <-deadline.C:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	case <-r.done:
		return true, &Error{Code: CodeClosed, Op: "poll"}
	}
}

// Ack removes a finished ticket and its held outcome. Until it is acked, a
// ticket stays pollable, also across restarts. Acking a ticket whose turn
// has not ended is [ErrTicketOpen].
func (r *Rendezvous) Ack(lead, ticket string) error {
	const op = "ack"
	r.lockW()
	defer r.unlockW()
	t := r.tickets[ticket]
	r.releaseHanded(lead)
	if t == nil || t.Lead != lead {
		return newError(CodeUnknownTicket, op, "%s", quote(ticket))
	}
	if r.tickets[ticket] != t {
		return nil // its outcome was returned to a call of the lead, and is released now
	}
	if t.State != TicketDone {
		return newError(CodeTicketOpen, op, "%s is %s; fleet_cancel ends it", quote(ticket), t.State)
	}
	r.forget(t)
	r.changed(lead)
	return nil
}

// Cancel ends a turn of lead that is still queued or open, named by its ticket
// or by its turn ID: the turn fails with reason cancelled. A cancelled message
// that was queued is never delivered. A member whose open turn is cancelled
// learns it on its next call for that turn: [Rendezvous.Reply] and
// [Rendezvous.Ask] return [ErrTurnCancelled], and an Ask blocked at that moment
// returns it too. Cancel returns the ticket's outcome, which, like any outcome
// a call returns, stays held until the lead's next call or its Ack; cancelling
// a turn that has already ended changes nothing and returns how it ended.
func (r *Rendezvous) Cancel(lead, id string) (Outcome, error) { return r.cancelTurn(lead, id, false) }

// CancelFor is Cancel done for lead by someone else, such as a person at a
// dashboard: it is not a call of lead, so what lead's earlier calls returned
// stays held, and the cancelled turn's outcome waits on its ticket as news for
// lead (its waiting Poll returns it) rather than being taken as returned.
func (r *Rendezvous) CancelFor(lead, id string) (Outcome, error) { return r.cancelTurn(lead, id, true) }

func (r *Rendezvous) cancelTurn(lead, id string, forLead bool) (Outcome, error) {
	const op = "cancel"
	r.lockW()
	defer r.unlockW()
	if r.closed {
		return Outcome{}, &Error{Code: CodeClosed, Op: op}
	}
	if !forLead {
		r.releaseHanded(lead)
	}
	t := r.tickets[id]
	if t == nil {
		t = r.turns[id]
	}
	if t == nil || t.Lead != lead {
		return Outcome{}, newError(CodeUnknownTicket, op, "%s is neither a ticket nor a turn of yours", quote(id))
	}
	o := Outcome{Kind: OutcomeFailed, Reason: ReasonCancelled, Content: "the lead cancelled the turn"}
	m := r.member(t.Member)
	if t.State != TicketDone {
		r.publishTurn(EventCancelled, t, "")
	}
	switch {
	case t.State == TicketDone:
	case t.State == TicketQueued:
		m.queue = removeTurn(m.queue, t)
		r.emit(t, o)
		m.wake()
	case m.open == t:
		r.stopTurn(m, t, o)
	default:
		r.emit(t, o)
	}
	if forLead {
		return t.view(), nil
	}
	r.hand(t, false)
	t.seen = true
	o = t.view()
	o.Returned = false // this call is the one that returns it
	return o, nil
}

// stopTurn ends m's open turn t with o, a failure its member did not
// report, and interrupts the member's work on it through its port, if
// it can be interrupted: nobody waits for that work any longer. A call
// of the member about t gets ErrTurnCancelled. r.mu and r.wmu must be
// held.
func (r *Rendezvous) stopTurn(m *member, t *turn, o Outcome) {
	m.cancelled = t.ID
	_ = r.endTurn(m, t, o, saveNow)
	if p, ok := m.port.(Interrupter); ok && !r.closed {
		r.wg.Go(func() {
			ctx, cancel := r.portContext()
			defer cancel()
			if err := p.Interrupt(ctx); err != nil {
				r.log.Warn("fleetstate: interrupt a stopped turn", "member", m.name, "reason", o.Reason, "err", err)
			}
		})
	}
}

// SendRequest is what a lead asks of [Rendezvous.Delegate]: a new turn for
// member To, or the answer to the question asked in turn TurnID. Exactly
// one of To and TurnID is set.
type SendRequest struct {
	To       string // the member: open a new turn
	TurnID   string // or the turn whose question Content answers
	Content  string // the message, or the answer
	Detached bool   // with To only: return the pending outcome at once
}

// Delegate does what req asks for lead: a new turn as [Rendezvous.Send]
// does ([Rendezvous.SendDetached] when Detached), or an answer as
// [Rendezvous.Answer] does. It is the call of a remote lead, and so it
// returns an outcome or an error, never both:
//
//   - When ctx ends first, it returns ctx.Err() alone. The caller gave up
//     and nothing is lost: the turn goes on, and its outcome stays on its
//     ticket (see Send) for [Rendezvous.PollAll].
//   - When the rendezvous closes during the wait, it returns the pending
//     outcome with its ticket and a nil error: the turn is on disk, and a
//     Rendezvous opened later on the same directory answers for the
//     ticket.
//
// A request that sets both To and TurnID, or neither, or Detached with
// TurnID, is [ErrInvalidArgument].
func (r *Rendezvous) Delegate(ctx context.Context, lead string, req SendRequest) (Outcome, error) {
	const op = "send"
	var o Outcome
	var err error
	switch {
	case (req.To == "") == (req.TurnID == ""):
		return Outcome{}, newError(CodeInvalidArgument, op, "give exactly one of to (a new turn) or turn_id (an answer)")
	case req.TurnID != "" && req.Detached:
		return Outcome{}, newError(CodeInvalidArgument, op, "a detached send goes with to, not with turn_id")
	case req.TurnID != "":
		o, err = r.Answer(ctx, lead, req.TurnID, req.Content)
	case req.Detached:
		return r.SendDetached(lead, req.To, req.Content)
	default:
		o, err = r.Send(ctx, lead, req.To, req.Content)
	}
	switch {
	case err == nil:
		return o, nil
	case o.Kind != "" && CodeOf(err) == CodeClosed:
		return o, nil
	default:
		return Outcome{}, err
	}
}
