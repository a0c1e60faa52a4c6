package fleetstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/internal/loop"
)

// gate is the status gating of one pane: a message is written only while
// the pane is IDLE or BLOCKED, and after a delivery the next waits for the
// WORKING pickup of the one before. Guarded by Rendezvous.mu.
type gate struct {
	last        Status    // the last status read other than UNKNOWN
	awaiting    bool      // delivered, pickup not seen yet
	deliveredAt time.Time // when the awaited delivery was made
}

// observe feeds a status read into the gate. It reports whether the pane
// ended a turn: it went from WORKING to IDLE, or, with a delivery never
// picked up, it is still idle after the grace period, which means the
// whole turn fitted between two reads. UNKNOWN changes nothing: it is
// neither a pickup nor a transition.
func (g *gate) observe(st Status, now time.Time, grace time.Duration) (turnEnded bool) {
	if st == StatusUnknown {
		return false
	}
	prev := g.last
	g.last = st
	if g.awaiting {
		switch {
		case st == StatusWorking:
			g.awaiting = false
		case st == StatusIdle && now.Sub(g.deliveredAt) >= grace:
			g.awaiting = false
			return true
		}
		return false
	}
	return prev == StatusWorking && st == StatusIdle
}

// ready reports whether the gate lets a message through now.
func (g *gate) ready(st Status) bool { return !g.awaiting && st.deliverable() }

func (g *gate) delivered(now time.Time) { g.awaiting, g.deliveredAt = true, now }

// StatusNotifier is implemented by a [Member] port that can tell when its
// status changes. The rendezvous then reads the status when told (and once more
// when a delivery's pickup grace passes) instead of every PollInterval.
type StatusNotifier interface {
	// StatusChanged returns a channel that is closed at the next change
	// of the status. It is called before each read of the status, so a
	// change between the two is never missed.
	StatusChanged() <-chan struct{}
}

// watchMember reads the status of a member with a port every PollInterval (or
// when woken, or when the port says its status changed), delivers the head of
// its FIFO when the gate allows, and triages turns that end without a reply. It
// ends when the member loses its port; one goroutine at most watches a member.
func (r *Rendezvous) watchMember(m *member) {
	r.watchPort(m.kick, &m.port, &m.watching, &m.gate, func(p Member) { r.stepMember(m, p) })
}

// watchPort watches the port held in *port (guarded by r.mu), running step
// with it each round, until the port is removed: then it clears *watching,
// under the same lock that AddMember or SetLeadPort checks it under, so
// that a port given back starts exactly one new watcher. g is the port's
// gate, which says when a notifying port must be read again.
func (r *Rendezvous) watchPort(kick <-chan struct{}, port *Member, watching *bool, g *gate, step func(Member)) {
	defer r.wg.Done()
	loop.Run(r.done, r.opt.PollInterval, kick, func() (bool, <-chan struct{}, time.Duration) {
		r.mu.Lock()
		p := *port
		if p == nil {
			*watching = false
		}
		r.mu.Unlock()
		if p == nil {
			return false, nil, 0
		}
		changed := statusChanged(p)
		step(p)
		r.mu.Lock()
		defer r.mu.Unlock()
		return true, changed, g.recheck(time.Now(), r.opt.PickupGrace)
	})
}

// Questioner is implemented by a [Member] port that tells when its member waits
// on a question of its program's own (a permission prompt, a first-run
// question): Question returns it, or "", as of the last status read. Nothing is
// delivered to a member that shows one; [MemberInfo] shows it.
type Questioner interface{ Question() string }

// Interrupter is implemented by a [Member] port that can stop its member's
// work, as Esc does in a coding agent: a turn cancelled while open is.
type Interrupter interface {
	Interrupt(ctx context.Context) error
}

// asking returns the question of a port whose status read st, if any.
func asking(port Member, st Status) string {
	if qp, ok := port.(Questioner); ok && st == StatusBlocked {
		return qp.Question()
	}
	return ""
}

// statusChanged returns the port's change notice, or nil if it gives none.
func statusChanged(port Member) <-chan struct{} {
	if n, ok := port.(StatusNotifier); ok {
		return n.StatusChanged()
	}
	return nil
}

// recheck says when the gate needs another read although the status did not
// change: when the grace of a delivery not yet picked up passes. Zero
// means never.
func (g *gate) recheck(now time.Time, grace time.Duration) time.Duration {
	if !g.awaiting {
		return 0
	}
	return max(g.deliveredAt.Add(grace).Sub(now), time.Millisecond)
}

// stepMember does one round of watching m: read, gate, deliver, triage.
func (r *Rendezvous) stepMember(m *member, port Member) {
	ctx, cancel := r.portContext()
	st, err := port.Status(ctx)
	cancel()
	gone := errors.Is(err, ErrMemberGone)
	if err != nil {
		st = StatusUnknown
	}

	r.lockW()
	if r.closed || m.port != port {
		r.unlockW()
		return
	}
	if gone {
		// The member's readiness (its connection) is not the pane's to
		// revoke: a status read that raced with the member's mount would
		// otherwise undo it. A gone pane reads as not deliverable anyway.
		if t := m.open; t != nil {
			_ = r.endTurn(m, t, Outcome{Kind: OutcomeFailed, Reason: ReasonMemberGone,
				Content: "the member's pane or process went away during the turn"}, saveNow)
		}
		m.gate, m.status = gate{}, StatusUnknown
		r.unlockW()
		return
	}
	q := asking(port, st)
	if m.status != st || m.question != q {
		r.publish(Event{Kind: EventStatus, Member: m.name, Status: st.String(), Content: q})
	}
	m.status, m.question = st, q
	var triage *turn
	if m.gate.observe(st, time.Now(), r.opt.PickupGrace) && m.open != nil {
		triage = m.open
	}
	var deliver *turn
	if triage == nil && m.open == nil && m.ready && len(m.queue) > 0 && m.gate.ready(st) && q == "" && !r.held(m) {
		if err := r.open(m, m.queue[0]); err != nil {
			// Not recorded, not delivered: the next round tries again.
			r.log.Warn("fleetstate: cannot record a delivery; message stays queued", "member", m.name, "err", err)
		} else {
			deliver = m.queue[0]
			m.queue = m.queue[1:]
			m.gate.delivered(time.Now())
		}
	}
	r.unlockW()

	if triage != nil {
		r.triage(m, port, triage)
		return
	}
	if deliver != nil {
		ctx, cancel := r.portContext()
		err := port.Deliver(ctx, deliver.Brief)
		cancel()
		if err != nil {
			r.undeliver(m, deliver, err)
			return
		}
		r.mu.Lock() // the grace runs from when the brief is all typed
		if m.open == deliver && m.gate.awaiting {
			m.gate.deliveredAt = time.Now()
		}
		r.mu.Unlock()
	}
}

// undeliver puts back at the head of the FIFO a turn whose delivery
// failed, so the message is neither lost nor delivered twice.
func (r *Rendezvous) undeliver(m *member, t *turn, err error) {
	r.lockW()
	defer r.unlockW()
	r.log.Warn("fleetstate: delivery failed; message stays queued", "member", m.name, "turn", t.ID, "err", err)
	if m.open != t || t.State != TicketWorking {
		return // the turn moved on meanwhile (replied or ended)
	}
	m.open = nil
	m.gate.awaiting = false
	t.State = TicketQueued
	m.queue = append([]*turn{t}, m.queue...)
	r.j.save(t)
	r.changed(t.Lead)
}

// triage ends a turn that finished without a reply, from the pane tail.
func (r *Rendezvous) triage(m *member, port Member, t *turn) {
	ctx, cancel := r.portContext()
	tail, clipped, err := port.Tail(ctx, r.opt.TailLines)
	cancel()
	if err != nil {
		r.log.Warn("fleetstate: read pane tail", "member", m.name, "err", err)
		tail, clipped = "", false
	}
	o := r.classify(t.Brief, tail, clipped)
	r.lockW()
	defer r.unlockW()
	if m.open != t || r.closed {
		return // replied while the tail was read
	}
	_ = r.endTurn(m, t, o, saveNow)
}

// portContext bounds one call to a port by PortTimeout and by Close.
func (r *Rendezvous) portContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, r.opt.PortTimeout)
}

// queueNudge notes that the lead of t should be told its ticket finished,
// if the lead has a port and no call of the lead took the outcome.
// r.mu must be held.
func (r *Rendezvous) queueNudge(t *turn) {
	l := r.lead(t.Lead)
	if l.port == nil || r.opt.NudgeLimit < 0 || t.nudged >= r.opt.NudgeLimit {
		return
	}
	l.nudges = append(l.nudges, t)
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// watchLead delivers nudges to a lead's pane, status gated like member
// deliveries: one nudge message names every finished ticket not yet seen.
func (r *Rendezvous) watchLead(name string, l *lead) {
	r.watchPort(l.kick, &l.port, &l.watch, &l.gate, func(p Member) { r.stepLead(name, l, p) })
}

func (r *Rendezvous) stepLead(name string, l *lead, port Member) {
	ctx, cancel := r.portContext()
	st, err := port.Status(ctx)
	cancel()
	if err != nil {
		st = StatusUnknown
	}
	r.mu.Lock()
	l.gate.observe(st, time.Now(), r.opt.PickupGrace)
	var due []*turn
	for _, t := range l.nudges {
		if r.tickets[t.Ticket] == t && !t.seen && t.nudged < r.opt.NudgeLimit {
			due = append(due, t)
		}
	}
	l.nudges = due
	if len(due) == 0 || !l.gate.ready(st) || asking(port, st) != "" || r.closed {
		r.mu.Unlock()
		return
	}
	l.nudges = nil
	parts := make([]string, 0, len(due))
	for _, t := range due {
		t.nudged++
		parts = append(parts, fmt.Sprintf("ticket %s from %s (%s)", t.Ticket, t.Member, t.Held.Kind))
		if t.nudged < r.opt.NudgeLimit {
			l.nudges = append(l.nudges, t)
		}
	}
	l.gate.delivered(time.Now())
	r.mu.Unlock()

	ctx, cancel = r.portContext()
	err = port.Deliver(ctx, "[fleetstate] finished: "+strings.Join(parts, ", ")+". Collect with fleet_poll.")
	cancel()
	if err != nil {
		r.log.Warn("fleetstate: nudge failed", "lead", name, "err", err)
	}
}

// classify names what a turn that ended without a reply left in the
// pane (see agent.Exhausted.Triage): a failure, or turn_done with the tail
// as a hint, partial when the report was longer than the scrape window.
func (r *Rendezvous) classify(brief, tail string, clipped bool) Outcome {
	switch reason := Reason(r.exhaust.Triage(brief, tail)); reason {
	case ReasonBackendExhausted:
		return Outcome{Kind: OutcomeFailed, Reason: reason, Content: tail}
	case ReasonEchoedBrief:
		return Outcome{Kind: OutcomeFailed, Reason: reason, Content: "the pane shows only the brief that was sent: the member never started"}
	}
	return Outcome{Kind: OutcomeTurnDone, Content: tail, Partial: clipped}
}
