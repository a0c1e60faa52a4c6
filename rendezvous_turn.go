package fleetstate

import (
	"time"

	"github.com/google/uuid"
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
	Held     *Outcome    `json:"held,omitempty"` // the terminal outcome, once State is done
}

// turn is one message to a member and everything that follows from it until
// its outcome reaches the lead. All fields are guarded by Rendezvous.mu.
type turn struct {
	turnRecord
	slot       slot        // the file holding the turn's records; see rendezvous_journal.go
	waiter     *waiter     // the lead's call blocked on the next outcome; nil if none
	asker      chan answer // the member's Ask blocked on an answer; nil if none
	readyTimer *time.Timer // fails the turn if its member is not ready in time
	nudged     int         // nudges delivered to the lead about this ticket
	seen       bool        // the lead polled the ticket since it finished
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

func newWaiter() *waiter { return &waiter{ch: make(chan result, 1)} }

// view returns the outcome a lead sees for t now. r.mu must be held.
func (t *turn) view() Outcome {
	o := Outcome{TurnID: t.ID, Ticket: t.Ticket, From: t.Member, State: t.State}
	switch t.State {
	case TicketDone:
		o = *t.Held
		o.Ticket, o.State = t.Ticket, TicketDone
	case TicketQuestion:
		o.Kind, o.Content = OutcomeQuestion, t.Question
	default:
		o.Kind = OutcomePending
	}
	return o
}

func (t *turn) stopReadyTimer() {
	if t.readyTimer != nil {
		t.readyTimer.Stop()
		t.readyTimer = nil
	}
}

// newTurn creates a queued turn from lead to m and writes it to disk.
// r.mu must be held.
func (r *Rendezvous) newTurn(leadName string, m *member, content string) (*turn, error) {
	r.seq++
	t := &turn{turnRecord: turnRecord{
		ID:      "turn-" + uuid.NewString(),
		Ticket:  "ticket-" + uuid.NewString(),
		Lead:    leadName,
		Member:  m.name,
		Brief:   content,
		Seq:     r.seq,
		Created: time.Now().UTC(),
		State:   TicketQueued,
	}}
	if err := r.persist(t); err != nil {
		return nil, err
	}
	r.turns[t.ID] = t
	r.tickets[t.Ticket] = t
	m.queue = append(m.queue, t)
	r.armReadyTimer(m, t)
	return t, nil
}

// emit records an outcome of t: it goes to the lead's blocked call if there
// is one, and is otherwise held on the ticket. A terminal outcome handed to
// a blocked call ends the turn's life; one held on the ticket stays until
// acked. A failure to write a held outcome is logged: the state in memory
// stays right. r.mu must be held.
func (r *Rendezvous) emit(t *turn, o Outcome) { _ = r.record(t, o, false) }

// record is emit; with durable, an outcome to be held on the ticket is
// written first, and if that fails nothing changes and the error is
// returned, so that the caller can refuse what it cannot keep.
func (r *Rendezvous) record(t *turn, o Outcome, durable bool) error {
	o.TurnID, o.From = t.ID, t.Member
	was := t.turnRecord
	if o.terminal() {
		held := o
		t.State, t.Held, t.Question = TicketDone, &held, ""
	}
	if w := t.waiter; w != nil {
		t.waiter = nil
		if o.terminal() {
			o.State = ""
			w.ch <- result{o: o}
			r.forget(t)
			return nil
		}
		o.Ticket, o.State = t.Ticket, t.State
		w.ch <- result{o: o}
	}
	if !durable {
		r.save(t)
	} else if err := r.persist(t); err != nil {
		t.turnRecord = was
		return err
	}
	r.changed(t.Lead)
	if o.terminal() {
		r.queueNudge(t)
	}
	return nil
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

// forget removes a turn whose outcome reached the lead. r.mu must be held.
func (r *Rendezvous) forget(t *turn) {
	t.stopReadyTimer()
	delete(r.turns, t.ID)
	delete(r.tickets, t.Ticket)
	r.releaseSlot(t)
}

// armReadyTimer fails t with member_not_ready if m is not ready within
// ReadyTimeout. r.mu must be held.
func (r *Rendezvous) armReadyTimer(m *member, t *turn) {
	if m.ready || t.readyTimer != nil || r.closed {
		return
	}
	t.readyTimer = time.AfterFunc(r.opt.ReadyTimeout, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
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

func (r *Rendezvous) turnDir() string { return r.store.path(privateDir, rendezvousDir, "turns") }
