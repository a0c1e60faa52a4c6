package fleetstate

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/afero"
)

// turnRecord is the durable part of a turn, as written under
// .fleetstate/rendezvous/turns/ID.json.
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
// acked. r.mu must be held.
func (r *Rendezvous) emit(t *turn, o Outcome) {
	o.TurnID, o.From = t.ID, t.Member
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
			return
		}
		o.Ticket, o.State = t.Ticket, t.State
		w.ch <- result{o: o}
	}
	r.save(t)
	r.changed(t.Lead)
	if o.terminal() {
		r.queueNudge(t)
	}
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
	if err := r.store.fs.Remove(r.turnPath(t.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Error("fleetstate: remove finished turn", "turn", t.ID, "err", r.store.ioError("forget", err))
	}
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

func (r *Rendezvous) turnPath(id string) string { return filepath.Join(r.turnDir(), id+".json") }

// persist writes t's record atomically. r.mu must be held.
func (r *Rendezvous) persist(t *turn) error {
	const op = "persist turn"
	data, err := json.Marshal(&t.turnRecord)
	if err != nil {
		return &Error{Code: CodeInternal, Op: op, Err: err}
	}
	if err := r.store.fs.MkdirAll(r.turnDir(), dirPerm); err != nil {
		return r.store.ioError(op, err)
	}
	return r.store.writeFile(op, r.turnPath(t.ID), data, true)
}

// save persists t and logs a failure: the state in memory stays right, and
// the change is lost only if the process dies before the next save.
func (r *Rendezvous) save(t *turn) {
	if err := r.persist(t); err != nil {
		r.log.Error("fleetstate: persist turn", "turn", t.ID, "err", err)
	}
}

// restore loads the turns an earlier rendezvous left on disk.
func (r *Rendezvous) restore() error {
	const op = "restore rendezvous"
	entries, err := r.store.readDir(r.turnDir())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return r.store.ioError(op, err)
	}
	var loaded []*turn
	for _, e := range entries {
		if !e.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := afero.ReadFile(r.store.fs, filepath.Join(r.turnDir(), e.Name()))
		if err != nil {
			return r.store.ioError(op, err)
		}
		t := &turn{}
		if err := json.Unmarshal(data, &t.turnRecord); err != nil || t.ID+".json" != e.Name() || t.Ticket == "" {
			r.log.Error("fleetstate: skip unreadable turn record", "file", e.Name(), "err", err)
			continue
		}
		if t.State == TicketDone && t.Held == nil {
			continue
		}
		loaded = append(loaded, t)
	}
	sort.Slice(loaded, func(i, j int) bool { return loaded[i].Seq < loaded[j].Seq })
	for _, t := range loaded {
		r.turns[t.ID] = t
		r.tickets[t.Ticket] = t
		r.seq = max(r.seq, t.Seq)
		m := r.member(t.Member)
		switch t.State {
		case TicketQueued:
			m.queue = append(m.queue, t)
		case TicketWorking, TicketQuestion:
			// The member's call that asked died with the old process;
			// the question stays visible but can no longer be answered.
			if m.open == nil {
				m.open = t
			}
		}
	}
	return nil
}
