package fleetstate

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/fleetstate/fleetstate/internal/usage"
)

// Next returns the next message for a member that pulls its messages (one
// added with a nil port), waiting up to wait (capped at MaxWait) for one.
// ok is false when none came in time. Calling Next marks the member ready.
// If the member's previous turn is still open, Next first ends it as
// turn_done: a member asking for new work has finished the old. A message
// handed to a Next at the instant its wait, ctx or the rendezvous ended is
// returned all the same: it is delivered, and not delivered again.
func (r *Rendezvous) Next(ctx context.Context, member string, wait time.Duration) (msg Message, ok bool, err error) {
	return r.next(ctx, member, wait, nil)
}

// NextAfter is Next naming the turn the caller took last (afterTurn, ""
// for none). Sent again after a Next whose answer was lost, it gets that
// call's open turn again rather than ending it. With no turn open, a late
// call (held up while its client sent again) naming a turn older than the
// member's last gets ErrSuperseded; "" is never refused.
func (r *Rendezvous) NextAfter(ctx context.Context, member, afterTurn string, wait time.Duration) (msg Message, ok bool, err error) {
	return r.next(ctx, member, wait, &afterTurn)
}

func (r *Rendezvous) next(ctx context.Context, member string, wait time.Duration, after *string) (msg Message, ok bool, err error) {
	const op = "next"
	deadline := r.waitTimer(wait)
	defer r.putTimer(deadline)
	// A member with no open turn and nothing queued has nothing to write:
	// it parks under r.mu alone, without waiting for a writer, so that a
	// send writing meanwhile finds it parked and hands it its message.
	r.mu.Lock()
	if m, err := r.registered(op, member); err == nil && m.open == nil && len(m.queue) == 0 && m.mayTake(after) == nil {
		r.setReady(m, true)
		m.cancelled = ""
		return r.waitNext(ctx, m, deadline, false)
	}
	r.mu.Unlock()
	r.lockW()
	m, err := r.registered(op, member)
	if err != nil {
		r.unlockW()
		return Message{}, false, err
	}
	if err := m.mayTake(after); err != nil {
		r.unlockW()
		return Message{}, false, err
	}
	r.setReady(m, true)
	if t := m.open; t != nil && after != nil && *after != t.ID {
		// Handed to a call whose answer was lost: hand it again.
		r.unlockW()
		return Message{TurnID: t.ID, From: t.Lead, Content: t.Brief}, true, nil
	}
	// A member asking for work has finished its open turn; the end of that
	// turn and the delivery of the next message are written together, with
	// r.mu released, and then made visible together.
	prev := m.open
	var head *turn
	if len(m.queue) > 0 && !r.held(m) {
		head = m.queue[0]
	}
	var prevRec, headRec turnRecord
	var prevErr, headErr error
	if prev != nil {
		prevRec, _ = prev.recorded(Outcome{Kind: OutcomeTurnDone})
	}
	if head != nil {
		headRec = head.delivered(time.Now().UTC())
	}
	if prev != nil || head != nil {
		_ = r.write(func() error {
			if prev != nil {
				prevErr = r.j.persistRecord(prev, &prevRec)
			}
			if head != nil {
				headErr = r.j.persistRecord(head, &headRec)
			}
			return nil
		})
	}
	if prev != nil {
		if prevErr != nil {
			// As a save: the state in memory stays right.
			r.log.Error("fleetstate: persist turn", "turn", prev.ID, "err", prevErr)
		}
		_ = r.endTurn(m, prev, Outcome{Kind: OutcomeTurnDone}, writeAfter)
	}
	m.cancelled = ""
	if head != nil {
		if headErr != nil {
			r.unlockW()
			return Message{}, false, headErr
		}
		r.opened(m, head, headRec)
		m.queue = m.queue[1:]
		r.unlockW()
		return Message{TurnID: head.ID, From: head.Lead, Content: head.Brief}, true, nil
	}
	return r.waitNext(ctx, m, deadline, true)
}

// mayTake refuses a Next of a member with a port, and a late one (see
// NextAfter). r.mu must be held.
func (m *member) mayTake(after *string) error {
	if m.port != nil {
		return newError(CodeNotPermitted, "next", "member %s is delivered to through its port", quote(m.name))
	} else if after == nil || *after == "" || m.open != nil || m.took == "" || *after == m.took {
		return nil
	}
	return newError(CodeSuperseded, "next", "member %s took turn %s after turn %s, which this late call names", quote(m.name), m.took, *after)
}

// waitNext waits for m's next message, as Next: it takes the head of the
// FIFO, or parks until a send hands it a message or wakes it. r.mu must be
// held, and r.wmu too if writer; both are released on return.
func (r *Rendezvous) waitNext(ctx context.Context, m *member, deadline *time.Timer, writer bool) (Message, bool, error) {
	const op = "next"
	for {
		if len(m.queue) > 0 && !r.held(m) { // as a writer: Next parks without r.wmu only on an empty FIFO
			t := m.queue[0]
			if err := r.open(m, t); err != nil {
				r.unlockW()
				return Message{}, false, err
			}
			m.queue = m.queue[1:]
			r.unlockW()
			return Message{TurnID: t.ID, From: t.Lead, Content: t.Brief}, true, nil
		}
		// Park: a send that finds the FIFO empty hands its message
		// straight to this call, written once, as delivered.
		tk := r.getTaker()
		m.takers = append(m.takers, tk)
		if writer {
			r.unlockW()
		} else {
			r.mu.Unlock()
		}
		var tr take
		var stop error // why this call stops waiting, if it does
		timedOut := false
		select {
		case tr = <-tk.ch:
		case <-deadline.C:
			tr, timedOut = r.unpark(m, tk), true
		case <-ctx.Done():
			tr, stop = r.unpark(m, tk), ctx.Err()
		case <-r.done:
			tr, stop = r.unpark(m, tk), &Error{Code: CodeClosed, Op: op}
		}
		r.takers.Put(tk) // no one else holds it, and its channel is empty
		if tr.ok {
			// Delivered and written: handed off, never dropped, even
			// when this call was giving up at the same instant.
			return tr.msg, true, nil
		}
		if timedOut || stop != nil {
			return Message{}, false, stop
		}
		r.lockW()
		writer = true
		if r.closed {
			r.unlockW()
			return Message{}, false, &Error{Code: CodeClosed, Op: op}
		}
	}
}

// open makes t, the head of m's FIFO, the member's open turn, delivered.
// The state is written before the message leaves, so a crash cannot
// deliver it twice; if it cannot be written, open fails and t stays
// queued: the message does not leave. The caller takes t off the FIFO.
// r.mu and r.wmu must be held; r.mu is released during the write.
func (r *Rendezvous) open(m *member, t *turn) error {
	next := t.delivered(time.Now().UTC())
	// Written with r.mu released: only writers, kept out by r.wmu, change
	// the FIFO, so t stays its head meanwhile.
	if err := r.write(func() error { return r.j.persistRecord(t, &next) }); err != nil {
		return err
	}
	r.opened(m, t, next)
	return nil
}

// delivered returns t's record once it is delivered at now.
func (t *turn) delivered(now time.Time) turnRecord {
	next := t.turnRecord
	next.State, next.Opened = TicketWorking, &now
	return next
}

// opened makes t, whose record next says delivered and is written, m's
// open turn. The caller takes t off the FIFO. r.mu must be held.
func (r *Rendezvous) opened(m *member, t *turn, next turnRecord) {
	t.turnRecord = next
	t.stopReadyTimer()
	m.open, m.took, m.cancelled = t, t.ID, ""
	r.publishTurn(EventDelivered, t, "")
	r.changed(t.Lead)
}

// endTurn ends m's open turn t with a terminal outcome, releasing a pending
// Ask. mode says when the outcome is written (see record); with writeFirst, an
// outcome held on the ticket must be written first; if it cannot be, the turn
// stays open and the error is returned (see record). r.mu must be held.
func (r *Rendezvous) endTurn(m *member, t *turn, o Outcome, mode writeMode) error {
	if err := r.record(t, o, mode); err != nil {
		return err
	}
	if m.open == t {
		m.open = nil
	}
	if a := t.asker; a != nil {
		t.asker = nil
		err := newError(CodeNoOpenTurn, "ask", "the turn ended")
		if o.Reason == ReasonCancelled {
			err = newError(CodeTurnCancelled, "ask", "turn %s", t.ID)
		}
		a <- answer{err: err}
	}
	m.wake()
	return nil
}

// openTurn returns the member's open turn for a call about turn turnID
// (any open turn when turnID is empty). A turn the lead cancelled is
// [ErrTurnCancelled]; no open turn, or another one, [ErrNoOpenTurn]. r.mu
// must be held.
func (m *member) openTurn(op, turnID string) (*turn, error) {
	t := m.open
	switch {
	case t != nil && (turnID == "" || turnID == t.ID):
		return t, nil
	case m.cancelled != "" && (turnID == "" || turnID == m.cancelled):
		return nil, newError(CodeTurnCancelled, op, "turn %s", m.cancelled)
	case turnID != "":
		return nil, newError(CodeNoOpenTurn, op, "turn %s is not the open turn of member %s: it ended, or another connection of the member took another", quote(turnID), quote(m.name))
	}
	return nil, newError(CodeNoOpenTurn, op, "member %s", quote(m.name))
}

// Reply ends member's open turn with its reply. The reply reaches the
// lead's blocked call if there is one, and is held on the ticket otherwise.
// A member without an open turn gets [ErrNoOpenTurn].
func (r *Rendezvous) Reply(member, content string) error { return r.ReplyTurn(member, "", content) }

// ReplyTurn is Reply bound to the turn turnID, which Next gave: if the
// member's open turn is another one (it ended, or another process of the
// member took the next), the reply is refused with [ErrNoOpenTurn] rather
// than landing on a turn it is not about. An empty turnID is Reply.
func (r *Rendezvous) ReplyTurn(member, turnID, content string) error {
	const op = "reply"
	if int64(len(content)) > r.store.maxContent {
		return newError(CodeContentTooLarge, op, "%d bytes, limit %d", len(content), r.store.maxContent)
	}
	r.lockW()
	defer r.unlockW()
	m, err := r.registered(op, member)
	if err != nil {
		return err
	}
	t, err := m.openTurn(op, turnID)
	if err != nil {
		return err
	}
	// The reply, held on the ticket, is written before the member hears
	// that it was taken, or refused so that the member can send it again:
	// never acknowledged and then lost with the process. A waiting call of
	// the lead gets it once it is written: the lead's next call then finds
	// the writers' lock free, and the member, parking in its next Next
	// without that lock, is there to take the lead's next message at once.
	return r.endTurn(m, t, Outcome{Kind: OutcomeReply, Content: content}, writeFirst)
}

// Ask puts a question to the lead in member's open turn and blocks for the
// answer. The lead sees a question outcome with the turn's ID and answers
// with [Rendezvous.Answer]; the turn goes on. If no answer comes within
// AskTimeout, Ask returns def with timedOut set, and the question is
// withdrawn. If ctx ends first, Ask returns ctx.Err() (or the answer, if it
// arrived at the same instant). The same question asked again while it
// waits moves to the newer call (the first returns ErrSuperseded).
func (r *Rendezvous) Ask(ctx context.Context, member, question, def string) (text string, timedOut bool, err error) {
	return r.AskTurn(ctx, member, "", question, def)
}

// AskTurn is Ask bound to the turn turnID, as [Rendezvous.ReplyTurn] is
// Reply. An empty turnID is Ask.
func (r *Rendezvous) AskTurn(ctx context.Context, member, turnID, question, def string) (text string, timedOut bool, err error) {
	const op = "ask"
	if err := r.checkContent(op, question); err != nil {
		return "", false, err
	}
	r.lockW()
	m, err := r.registered(op, member)
	if err != nil {
		r.unlockW()
		return "", false, err
	}
	t, err := m.openTurn(op, turnID)
	if err != nil {
		r.unlockW()
		return "", false, err
	}
	again := t.asker != nil
	if again && t.Question != question {
		r.unlockW()
		return "", false, newError(CodeQuestionPending, op, "turn %s", t.ID)
	} else if again { // sent again before the first call was seen gone
		t.asker <- answer{err: newError(CodeSuperseded, op, "turn %s: the question was asked again", t.ID)}
	}
	if a := t.Answer; a != nil {
		// The lead answered the question this turn asked before a
		// restart cut that Ask short.
		t.Answer = nil
		r.j.save(t)
		r.unlockW()
		return *a, false, nil
	}
	now := time.Now()
	if t.State != TicketQuestion {
		t.Asked = &now
	}
	// else: asked again after a restart; the question keeps its window.
	t.stopAskTimer()
	window := t.Asked.Add(r.opt.AskTimeout).Sub(now)
	ch := make(chan answer, 1)
	t.asker = ch
	t.State, t.Question = TicketQuestion, question
	if !again {
		r.emit(t, Outcome{Kind: OutcomeQuestion, Content: question})
	}
	r.unlockW()

	timer := time.NewTimer(window)
	defer timer.Stop()
	select {
	case a := <-ch:
		return a.text, false, a.err
	case <-timer.C:
		if a, ok := r.withdraw(t, ch); ok {
			return a.text, false, a.err
		}
		return def, true, nil
	case <-ctx.Done():
		if a, ok := r.abandon(m, t, ch); ok {
			return a.text, false, a.err
		}
		return "", false, ctx.Err()
	}
}

// abandonGrace is how long the question of an Ask whose caller stopped
// waiting stays: the end of the call and of the member's connection (its
// daemon died, say) come in either order.
const abandonGrace = time.Second

// abandon handles the Ask of member m, on ch, whose caller stopped waiting:
// an answer that reached ch meanwhile is returned. Otherwise the question
// stays, without an asker, for abandonGrace, and while m is away within
// its presence window: m's Ask again in the turn finds it, with the
// lead's answer if one came. A question nobody asks again is withdrawn.
func (r *Rendezvous) abandon(m *member, t *turn, ch chan answer) (answer, bool) {
	return r.dropAsker(t, ch, func() {
		if r.opt.PresenceWindow < 0 {
			r.unask(t)
			return
		}
		t.stopAskTimer()
		var tm *time.Timer
		tm = time.AfterFunc(abandonGrace, func() {
			r.lockW()
			defer r.unlockW()
			if r.closed || t.askTimer != tm || t.asker != nil || t.State != TicketQuestion {
				return
			}
			t.askTimer = nil
			if m.rejoin != nil && m.open == t {
				// Away, within its window: the question keeps its own
				// window, and goes with the turn if the member stays away.
				r.armQuestionWindow(t, time.Now())
				return
			}
			r.unask(t)
		})
		t.askTimer = tm
	})
}

// withdraw takes back t's question after its asker stopped waiting. If an
// answer reached ch in the meantime it is returned instead.
func (r *Rendezvous) withdraw(t *turn, ch chan answer) (answer, bool) {
	return r.dropAsker(t, ch, func() { r.unask(t) })
}

// dropAsker returns an answer that reached ch, the channel of an Ask in t
// whose caller stopped waiting; otherwise, if ch still asks in t, it
// unhooks it and runs then, under the writers' lock.
func (r *Rendezvous) dropAsker(t *turn, ch chan answer, then func()) (answer, bool) {
	r.lockW()
	defer r.unlockW()
	select {
	case a := <-ch:
		return a, true
	default:
	}
	if t.asker == ch {
		t.asker = nil
		then()
	}
	return answer{}, false
}

// unask withdraws t's question: the turn works again. r.mu must be held.
func (r *Rendezvous) unask(t *turn) {
	t.State, t.Question = TicketWorking, ""
	r.j.save(t)
	r.publishTurn(EventWithdrawn, t, "")
	r.changed(t.Lead)
}

// Disconnect tells the rendezvous that member's connection is gone: its MCP
// session ended, or the stream it listened on broke. The member is no longer
// ready: new messages wait for it at most ReadyTimeout. A member that pulls
// keeps its open turn and its question for PresenceWindow, as its connection
// may have gone with a daemon and come back through another: back in time (a
// call, [Rendezvous.SetReady]), it finishes the turn; otherwise the turn ends
// failed member_gone and a blocked Ask returns [ErrNoOpenTurn]. A member
// reached through a port keeps its turn: its pane tells when the turn ends.
func (r *Rendezvous) Disconnect(member string) error {
	r.lockW()
	defer r.unlockW()
	m, err := r.registered("disconnect", member)
	if err != nil {
		return err
	}
	r.setReady(m, false)
	if t := m.open; t != nil && m.port == nil {
		if r.opt.PresenceWindow < 0 {
			return r.dropTurn(m, t, "the member's connection closed during the turn")
		}
		if m.rejoin == nil {
			r.armRejoin(m, r.opt.PresenceWindow, "of its connection closing")
		}
	}
	return nil
}

// Drop ends the open turn of member, a pulling member, at once, failed
// member_gone: a second connection of the member took over while the one
// that took the turn is still there. Readiness is left as it is.
func (r *Rendezvous) Drop(member string) error {
	r.lockW()
	defer r.unlockW()
	m, err := r.registered("drop", member)
	if err != nil {
		return err
	}
	if t := m.open; t != nil && m.port == nil {
		m.stopRejoin()
		return r.dropTurn(m, t, "another connection of the member took over during the turn")
	}
	return nil
}

// dropTurn ends m's open turn t as member_gone. r.mu must be held.
func (r *Rendezvous) dropTurn(m *member, t *turn, why string) error {
	return r.endTurn(m, t, Outcome{Kind: OutcomeFailed, Reason: ReasonMemberGone, Content: why}, saveNow)
}

// ReportUsage takes reports of member's usage: each a running total of
// what member's calls of one model have used so far as one source counts
// them, and adds what each adds over the highest total of its source and
// model reported before, field by field, to the member's usage and to its
// open turn's. A total reported twice, or after a later one, counts once,
// so a report may be sent again. The rendezvous remembers the 64 sources
// and models reported last of each member; one forgotten counts whole
// when reported again. A member's usage tells 64 models apart at most.
// The reports are taken together or not at all, and are written before
// ReportUsage returns nil.
func (r *Rendezvous) ReportUsage(member string, reports ...UsageReport) error {
	return r.reportUsage(member, reports, false)
}

// ReplyTurnUsage is ReportUsage and then ReplyTurn: the usage counts in
// the turn it replies to, and a budget with Stop that it crosses does not
// stop that turn, whose reply ends it. With no report, it is ReplyTurn.
func (r *Rendezvous) ReplyTurnUsage(member, turnID, content string, reports ...UsageReport) error {
	if int64(len(content)) > r.store.maxContent {
		return newError(CodeContentTooLarge, "reply", "%d bytes, limit %d", len(content), r.store.maxContent)
	}
	if len(reports) > 0 {
		if err := r.reportUsage(member, reports, true); err != nil {
			return err
		}
	}
	return r.ReplyTurn(member, turnID, content)
}

// reportUsage is ReportUsage; with replying, the member's open turn is
// spared a budget's Stop.
func (r *Rendezvous) reportUsage(member string, reports []UsageReport, replying bool) error {
	const op = "report usage"
	if len(reports) == 0 {
		return &Error{Code: CodeInvalidArgument, Op: op, Err: errors.New("no report")}
	}
	models := make([]string, len(reports))
	for i, rep := range reports {
		if err := usage.Check(rep.Source, rep.Total); err != nil {
			return &Error{Code: CodeInvalidArgument, Op: op, Err: err}
		}
		models[i] = rep.Model
	}
	r.lockW()
	defer r.unlockW()
	m, err := r.registered(op, member)
	if err != nil {
		return err
	}
	if r.j.Closed() {
		return &Error{Code: CodeClosed, Op: op}
	}
	if err := m.usage.CheckModels(models...); err != nil {
		return &Error{Code: CodeInvalidArgument, Op: op, Err: err}
	}
	var spare *turn // of a report with the reply
	if replying {
		spare = m.open
	}
	day := usage.Day(time.Now())
	var d Usage
	for _, rep := range reports {
		d = d.Add(m.usage.Report(rep.Source, rep.Model, rep.Total, day))
	}
	if !d.IsZero() && m.open != nil {
		u := d.Add(*cmp.Or(m.open.Usage, &Usage{}))
		m.open.Usage = &u
	}
	var turn string
	var turnUsage *Usage
	if t := m.open; t != nil {
		turn, turnUsage = t.ID, t.Usage
	}
	id, rec, err := usage.Encode(m.name, &m.usage, turn, turnUsage)
	if err != nil {
		return &Error{Code: CodeInternal, Op: op, Err: err}
	}
	err = r.write(func() error { return r.j.Save(id, rec) })
	if err == nil && !d.IsZero() {
		r.publishUsage(m, turn)
		r.crossings(m.name, spare)
	}
	return withOp(op, err)
}

// restoreUsage takes up the members' usage records, and their open turns'
// usage where the record is newer than the turn's (usage only grows). A
// finished turn's outcome gets the usage its record holds. r.mu must be
// held.
func (r *Rendezvous) restoreUsage(recs []usage.Record) {
	for _, rec := range recs {
		r.member(rec.Member).usage = *rec.Ledger
		t := r.turns[rec.Turn]
		if t == nil || t.Member != rec.Member || rec.TurnUsage == nil {
			continue
		}
		u := rec.TurnUsage.Max(*cmp.Or(t.Usage, &Usage{}))
		t.Usage = &u
	}
	for _, t := range r.turns {
		if t.Held != nil && t.Usage != nil {
			u := *t.Usage
			t.Held.Usage = &u
		}
	}
}
