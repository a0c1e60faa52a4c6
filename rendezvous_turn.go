package fleetstate

import (
	"time"

	"github.com/fleetstate/fleetstate/internal/names"
)

// turnRecord is the durable part of a turn, as written in its slot file
// under .fleetstate/rendezvous/turns/ (see rendezvous_journal.go).
type turnRecord struct {
	ID       string      `json:"id"`
	Ticket   string      `json:"ticket"`
	Lead     string      `json:"lead"`
	Member   string      `json:"member"`
	Brief    string      `json:"brief"`
	Seq      int64       `json:"seq"` // order in the member's FIFO
	Created  time.Time   `json:"created"`
	State    TicketState `json:"state"`
	Question string      `json:"question,omitempty"`
	Asked    *time.Time  `json:"asked,omitempty"`  // when the question was asked: its window runs from here
	Answer   *string     `json:"answer,omitempty"` // the lead's answer to a question whose Ask died in a restart, for the member's next Ask
	Held     *Outcome    `json:"held,omitempty"`   // the terminal outcome, once State is done
	Opened   *time.Time  `json:"opened,omitempty"` // when the message was delivered (pointers encode more cheaply than omitzero times)
	// HeldUntil is when the hold of an outcome that a call of the lead
	// returned ends (RendezvousOptions.HoldReturned), so that a restart
	// ends it too rather than hold it until acked.
	HeldUntil *time.Time `json:"held_until,omitempty"`
	Usage     *Usage     `json:"usage,omitempty"` // reported while the turn was open
}

// turn is one message to a member and everything that follows from it until
// its outcome reaches the lead. All fields are guarded by Rendezvous.mu.
type turn struct {
	turnRecord
	waiter     *waiter     // the lead's call blocked on the next outcome; nil if none
	asker      chan answer // the member's Ask blocked on an answer; nil if none
	readyTimer *time.Timer // fails the turn if its member is not ready in time
	askTimer   *time.Timer // withdraws a restored question when its window passes
	holdTimer  *time.Timer // releases a returned outcome after HoldReturned
	nudged     int         // nudges delivered to the lead about this ticket
	seen       bool        // the lead polled the ticket since it finished
	handed     bool        // a call of the lead returned the outcome; held until the lead's next call
}

// waiter is a lead's call blocked on a turn. ch has capacity 1: whoever
// settles the waiter sends once, under Rendezvous.mu, and never blocks.
type waiter struct{ ch chan result }

type result struct {
	o   Outcome
	err error
}

// answer is what a member's Ask receives; its channel has capacity 1.
type answer struct {
	text string
	err  error
}

// getWaiter returns an unused waiter, from r's pool; await gives it back.
func (r *Rendezvous) getWaiter() *waiter {
	if w, ok := r.waiters.Get().(*waiter); ok {
		return w
	}
	return &waiter{ch: make(chan result, 1)}
}

// getTaker returns an unused taker, from r's pool; Next gives it back.
func (r *Rendezvous) getTaker() *taker {
	if tk, ok := r.takers.Get().(*taker); ok {
		return tk
	}
	return &taker{ch: make(chan take, 1)}
}

// view returns the outcome a lead sees for t now. r.mu must be held.
func (t *turn) view() Outcome {
	o := Outcome{TurnID: t.ID, Ticket: t.Ticket, From: t.Member, State: t.State}
	switch t.State {
	case TicketDone:
		o = *t.Held
		o.Ticket, o.State, o.Returned = t.Ticket, TicketDone, t.handed
	case TicketQuestion:
		o.Kind, o.Content = OutcomeQuestion, t.Question
	default:
		o.Kind = OutcomePending
	}
	return o
}

// stopTimer stops the timer *tm, if there is one, and forgets it.
func stopTimer(tm **time.Timer) {
	if *tm != nil {
		(*tm).Stop()
		*tm = nil
	}
}

func (t *turn) stopReadyTimer() { stopTimer(&t.readyTimer) }
func (t *turn) stopAskTimer()   { stopTimer(&t.askTimer) }
func (t *turn) stopTimers() {
	stopTimer(&t.readyTimer)
	stopTimer(&t.askTimer)
	stopTimer(&t.holdTimer)
}

// armQuestionWindow withdraws t's question, restored without the Ask that
// put it, when what is left of its window passes: the lead can answer it
// until then (the member's next Ask gets the answer), and a poll never
// shows a question that nobody can answer any more. r.mu must be held.
func (r *Rendezvous) armQuestionWindow(t *turn, now time.Time) {
	if t.Asked == nil {
		t.Asked = &now // a record from before windows were kept: a full window
	}
	var tm *time.Timer
	tm = time.AfterFunc(t.Asked.Add(r.opt.AskTimeout).Sub(now), func() {
		r.lockW()
		defer r.unlockW()
		if t.askTimer != tm || t.asker != nil || t.State != TicketQuestion {
			return
		}
		t.askTimer = nil
		r.unask(t)
	})
	t.askTimer = tm
}

// newTurn creates a turn from lead to m and writes it to disk: queued, or,
// when a Next of m is parked on an empty FIFO, delivered to that Next at
// once. Such a turn is written once, as delivered, before the message
// leaves, instead of queued and then delivered: a crash after the write
// restores it open (never delivered twice), a crash before it leaves no
// trace of a send that then returned no ticket (nothing lost). r.mu and
// r.wmu must be held; r.mu is released during the write.
func (r *Rendezvous) newTurn(leadName string, m *member, content string) (*turn, error) {
	r.seq++
	t := &turn{turnRecord: turnRecord{
		ID:      names.NewID("turn-"),
		Ticket:  names.NewID("ticket-"),
		Lead:    leadName,
		Member:  m.name,
		Brief:   content,
		Seq:     r.seq,
		Created: time.Now().UTC(),
		State:   TicketQueued,
	}}
	rec := &t.turnRecord
	var next turnRecord
	tk := m.claim()
	if tk != nil {
		next = t.delivered(t.Created) // in the same step
		rec = &next
	}
	// Written with r.mu released (r.wmu held): the turn is nobody's to see
	// until it is on disk, and the claimed Next waits for it.
	if err := r.write(func() error { return r.j.persistRecord(t, rec) }); err != nil {
		if tk != nil {
			tk.ch <- take{} // not delivered: that Next looks again
		}
		return nil, err
	}
	r.turns[t.ID] = t
	r.tickets[t.Ticket] = t
	r.publishTurn(EventQueued, t, t.Brief)
	if tk != nil {
		r.opened(m, t, next)
		tk.ch <- take{msg: Message{TurnID: t.ID, From: t.Lead, Content: t.Brief}, ok: true}
		return t, nil
	}
	m.queue = append(m.queue, t)
	r.armReadyTimer(m, t)
	m.wake()
	return t, nil
}

// emit records an outcome of t: it goes to the lead's blocked call if there is
// one, and is otherwise held on the ticket. A terminal outcome stays held
// either way: until the lead's next call when a call returned it (in case the
// connection that carried it broke), until acked otherwise. A failure to write
// the outcome is logged: the state in memory stays right. r.mu must be held.
func (r *Rendezvous) emit(t *turn, o Outcome) { _ = r.record(t, o, saveNow) }

// writeMode says when record writes the turn.
type writeMode int

const (
	// saveNow writes after the change, under r.mu, logging a failure:
	// the state in memory stays right.
	saveNow writeMode = iota
	// writeFirst writes before the change, with r.mu released (r.wmu
	// held), and refuses the change if the write fails.
	writeFirst
	// writeAfter writes nothing: the caller writes, before (the record
	// t.recorded makes) or once r.mu can be released, with r.wmu held.
	writeAfter
)

// record is emit, writing as mode says; with writeFirst, if the write
// fails nothing changes and the error is returned, so that the caller can
// refuse what it cannot keep.
func (r *Rendezvous) record(t *turn, o Outcome, mode writeMode) error {
	next, o := t.recorded(o)
	if d := r.opt.HoldReturned; d > 0 && o.terminal() && t.waiter != nil {
		// The call waiting returns the outcome (see hand): the hold's end
		// goes in the same write.
		until := time.Now().Add(d)
		next.HeldUntil = &until
	}
	if mode == writeFirst {
		if err := r.write(func() error { return r.j.persistRecord(t, &next) }); err != nil {
			return err
		}
	}
	t.turnRecord = next
	if t.HeldUntil != nil && t.waiter == nil && t.State == TicketDone && !t.handed {
		// The call gave up while the record was written: the outcome is
		// not returned, so it is held until acked.
		t.HeldUntil = nil
		if mode == writeFirst {
			r.j.save(t)
		}
	}
	t.seen = false // news for the lead
	if o.terminal() {
		t.stopTimers()
		var out *Outcome
		if len(r.subs) > 0 { // a copy for the subscribers only
			c := o
			out = &c
		}
		r.publish(Event{Kind: EventOutcome, Member: t.Member, Lead: t.Lead, TurnID: t.ID, Ticket: t.Ticket,
			Outcome: out, Held: t.waiter == nil})
	} else if o.Kind == OutcomeQuestion {
		r.publishTurn(EventAsked, t, o.Content)
	}
	if w := t.waiter; w != nil {
		t.waiter = nil
		if o.terminal() {
			// Handed over: the call returns it, and the ticket keeps it
			// until the lead shows it got it.
			r.hand(t, mode != writeAfter)
			t.seen = true
			o.Ticket, o.State = t.Ticket, ""
			w.ch <- result{o: o}
			if mode == saveNow {
				r.j.save(t)
			}
			r.changed(t.Lead)
			return nil
		}
		o.Ticket, o.State = t.Ticket, t.State
		w.ch <- result{o: o}
		t.seen = true // the call shows it to the lead
	}
	if mode == saveNow {
		r.j.save(t)
	}
	r.changed(t.Lead)
	if o.terminal() {
		r.queueNudge(t)
	}
	return nil
}

// recorded returns t's record once o is recorded, and o as recorded.
func (t *turn) recorded(o Outcome) (turnRecord, Outcome) {
	o.TurnID, o.From = t.ID, t.Member
	next := t.turnRecord
	if o.terminal() {
		if t.Usage != nil {
			u := *t.Usage
			o.Usage = &u
		}
		held := o
		next.State, next.Held, next.Question = TicketDone, &held, ""
	}
	return next, o
}

// hand notes that a call of t's lead returns t's outcome. written says that
// the record this change writes is t's record as it stands (see record):
// with a hold, its end is in it. r.mu must be held.
func (r *Rendezvous) hand(t *turn, written bool) {
	if t.handed {
		return
	}
	t.handed = true
	if d := r.opt.HoldReturned; d > 0 {
		saved := written && t.HeldUntil != nil // written with the outcome (see record)
		if t.HeldUntil == nil {
			until := time.Now().Add(d)
			t.HeldUntil = &until
		}
		r.armHold(t, time.Until(*t.HeldUntil))
		// Held for a re-poll only: its record, with the hold's end, moves
		// to the held log and its slot to the pool (see
		// rendezvous_journal.go); a remote journal saves it unless saved.
		r.j.retire(t, saved)
		return
	}
	l := r.lead(t.Lead)
	l.handed = append(l.handed, t)
}

// armHold forgets t, whose outcome a call of the lead returned, after d.
// r.mu must be held.
func (r *Rendezvous) armHold(t *turn, d time.Duration) {
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		r.lockW()
		defer r.unlockW()
		if t.holdTimer == tm && t.handed && r.tickets[t.Ticket] == t {
			r.forget(t)
			r.changed(t.Lead)
		}
	})
	t.holdTimer = tm
}

// releaseHanded forgets the outcomes that calls of lead returned before
// this call of the lead: by calling again, the lead shows it got them.
// Polls show them instead (see Poll), so that a lead whose connection
// broke finds them. r.mu must be held.
func (r *Rendezvous) releaseHanded(lead string) {
	l := r.leads[lead]
	if l == nil {
		return
	}
	for i, t := range l.handed {
		if t.handed && r.tickets[t.Ticket] == t {
			r.forget(t)
		}
		l.handed[i] = nil
	}
	l.handed = l.handed[:0]
}

// detach unhooks w from t after the lead stopped waiting. If an outcome
// reached w in the meantime, it is returned (handed off, never dropped);
// otherwise the turn goes on without a waiter and the lead gets its ticket.
func (r *Rendezvous) detach(t *turn, w *waiter) result {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case res := <-w.ch:
		return res
	default:
	}
	if t.waiter == w {
		t.waiter = nil
		r.changed(t.Lead)
	}
	return result{o: t.view()}
}

// unhand keeps t's outcome until acked after all: the call that was to
// return it had given up. r.mu must be held.
func (t *turn) unhand() {
	t.handed = false
	if t.holdTimer != nil {
		t.holdTimer.Stop()
		t.holdTimer = nil
	}
}

// forget removes a turn whose outcome reached the lead. Its slot is freed by
// unlockW, once the rendezvous's lock is let go. r.mu and r.wmu must be held.
func (r *Rendezvous) forget(t *turn) {
	t.stopTimers()
	t.handed = false
	delete(r.turns, t.ID)
	delete(r.tickets, t.Ticket)
	if r.freeing == nil {
		r.freeing, r.spare = r.spare, nil
	}
	r.freeing = append(r.freeing, t)
	r.publishTurn(EventAcked, t, "")
}

// armReadyTimer fails t with member_not_ready if m is not ready within
// ReadyTimeout. r.mu must be held.
func (r *Rendezvous) armReadyTimer(m *member, t *turn) {
	if m.ready || t.readyTimer != nil || r.closed {
		return
	}
	t.readyTimer = time.AfterFunc(r.opt.ReadyTimeout, func() {
		r.lockW()
		defer r.unlockW()
		if r.closed || t.State != TicketQueued || m.ready || r.turns[t.ID] != t {
			return
		}
		t.readyTimer = nil
		m.queue = removeTurn(m.queue, t)
		r.emit(t, Outcome{Kind: OutcomeFailed, Reason: ReasonMemberNotReady,
			Content: "member " + m.name + " did not become ready within " + r.opt.ReadyTimeout.String()})
	})
}

func removeTurn(q []*turn, t *turn) []*turn {
	for i, x := range q {
		if x == t {
			return append(q[:i:i], q[i+1:]...)
		}
	}
	return q
}
