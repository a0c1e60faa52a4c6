package fleetstate

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fleetstate/fleetstate/internal/usage"
)

// Budget bounds the tokens, input plus output, that a member or the whole
// fleet may use, over the fleet's life or per day (see
// [Rendezvous.SetBudget]).
type Budget = usage.Budget

// BudgetState is a budget and what it has counted.
type BudgetState struct {
	Member string `json:"member,omitempty"` // "" for the fleet's budget
	Budget
	// Spent is what the budget counted: the member's usage (the fleet's
	// for the fleet's budget), over the fleet's life or that day.
	Spent int64 `json:"spent"`
	// Held is set while Spent is at the limit: no new turn starts.
	Held bool `json:"held,omitempty"`
}

// BudgetError is the detail of [ErrBudgetExhausted]: the budget that
// refused a send, and what it counted.
type BudgetError struct {
	BudgetState
	// Reserved is what the turns not yet ended hold of the budget (see
	// Budget.Reserve).
	Reserved int64
}

func (e *BudgetError) Error() string {
	who := "the fleet's budget"
	if e.Member != "" {
		who = "member " + quote(e.Member) + "'s budget"
	}
	s := fmt.Sprintf("%s of %s: %d spent", who, e.Budget, e.Spent)
	if e.Reserved > 0 || e.Budget.Reserve > 0 {
		s += fmt.Sprintf(", %d held by turns not ended, %d for this one", e.Reserved, e.Budget.Reserve)
	}
	return s
}

// budget is one budget the rendezvous keeps, guarded by Rendezvous.mu.
type budget struct {
	Budget
	day       string // of the crossings below (see usage.Day); "" for a budget over the fleet's life
	warned    bool   // the warning was published
	exhausted bool   // the exhaustion was published
}

// SetBudget sets the budget of member, or of the whole fleet for member
// "": a send to the member (to any member, for the fleet's) is refused
// with [ErrBudgetExhausted] once what the budget counts reaches its
// limit, or when the turn's Budget.Reserve would not fit. A member whose
// budget is spent gets no new turn: its queued turns wait, held, and go
// on when the budget is raised, removed (b nil) or renews. Crossing the
// budget's warning share, and its limit, publishes [EventBudgetWarning]
// and [EventBudgetExhausted]. The budget is written before SetBudget
// returns nil; the member need not be registered.
func (r *Rendezvous) SetBudget(member string, b *Budget) error {
	const op = "set budget"
	if member != "" {
		if err := checkAgentName(op, member); err != nil {
			return err
		}
	}
	if b != nil {
		if err := b.Check(); err != nil {
			return &Error{Code: CodeInvalidArgument, Op: op, Err: err}
		}
	}
	id, rec, err := usage.EncodeBudget(member, b)
	if err != nil {
		return &Error{Code: CodeInternal, Op: op, Err: err}
	}
	r.lockW()
	defer r.unlockW()
	if r.j.Closed() {
		return &Error{Code: CodeClosed, Op: op}
	}
	if err := r.write(func() error { return r.j.Save(id, rec) }); err != nil {
		return withOp(op, err)
	}
	r.setBudget(member, b)
	st := r.budgetState(member, r.budgets[member])
	r.publish(Event{Kind: EventBudgetSet, Member: member, Budget: st})
	r.crossings(member, nil)
	r.wakeHeld()
	return nil
}

// setBudget sets member's budget in memory, keeping what was published
// of it. r.mu must be held.
func (r *Rendezvous) setBudget(member string, b *Budget) {
	if b == nil {
		delete(r.budgets, member)
		return
	}
	old := r.budgets[member]
	nb := &budget{Budget: *b}
	if old != nil {
		nb.day, nb.warned, nb.exhausted = old.day, old.warned, old.exhausted
	}
	r.budgets[member] = nb
}

// Budgets returns the fleet's budget, if it has one, then the members'
// by name, with what each counted.
func (r *Rendezvous) Budgets() []BudgetState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []BudgetState
	for name, b := range r.budgets {
		out = append(out, *r.budgetState(name, b))
	}
	slices.SortFunc(out, func(a, b BudgetState) int { return cmp.Compare(a.Member, b.Member) })
	return out
}

// budgetState returns b, member's budget, with what it counted; nil for
// none. r.mu must be held.
func (r *Rendezvous) budgetState(member string, b *budget) *BudgetState {
	if b == nil {
		return nil
	}
	spent := r.spent(member, b.Budget, usage.Day(time.Now()))
	return &BudgetState{Member: member, Budget: b.Budget, Spent: spent, Held: spent >= b.Tokens}
}

// spent returns what budget b of member ("" for the fleet) counted on
// day. r.mu must be held.
func (r *Rendezvous) spent(member string, b Budget, day string) int64 {
	if member != "" {
		if m := r.members[member]; m != nil {
			return m.usage.Spent(b, day)
		}
		return 0
	}
	var n int64
	for _, m := range r.members {
		n += m.usage.Spent(b, day)
	}
	return n
}

// held reports whether m may not start a turn now: its budget, or the
// fleet's, is spent. r.mu must be held.
func (r *Rendezvous) held(m *member) bool {
	if len(r.budgets) == 0 {
		return false
	}
	day := usage.Day(time.Now())
	for _, name := range [2]string{m.name, ""} {
		if b := r.budgets[name]; b != nil && r.spent(name, b.Budget, day) >= b.Tokens {
			r.armRenewal(b)
			return true
		}
	}
	return false
}

// admit refuses a send to m that m's budget, or the fleet's, has no room
// for. r.mu must be held.
func (r *Rendezvous) admit(op string, m *member) error {
	if len(r.budgets) == 0 {
		return nil
	}
	day := usage.Day(time.Now())
	for _, name := range [2]string{m.name, ""} {
		b := r.budgets[name]
		if b == nil {
			continue
		}
		spent := r.spent(name, b.Budget, day)
		reserved := r.reserved(name, b.Reserve)
		if spent >= b.Tokens || b.Reserve > 0 && spent+reserved+b.Reserve > b.Tokens {
			return &Error{Code: CodeBudgetExhausted, Op: op, Err: &BudgetError{
				BudgetState: BudgetState{Member: name, Budget: b.Budget, Spent: spent, Held: spent >= b.Tokens},
				Reserved:    reserved}}
		}
	}
	return nil
}

// reserved returns what the turns of member (of every member for "")
// not yet ended hold of a budget whose reserve per turn is reserve.
// r.mu must be held.
func (r *Rendezvous) reserved(member string, reserve int64) int64 {
	if reserve == 0 {
		return 0
	}
	var n int64
	hold := func(t *turn) {
		used := int64(0)
		if t.Usage != nil {
			used = t.Usage.Counted()
		}
		n += max(reserve-used, 0)
	}
	for _, m := range r.members {
		if member != "" && m.name != member {
			continue
		}
		if m.open != nil {
			hold(m.open)
		}
		for _, t := range m.queue {
			hold(t)
		}
	}
	return n
}

// crossings publishes the warnings and exhaustions that member's usage
// ("" for any member's) crossed in its budget and the fleet's, and ends
// the open turns a budget with Stop stops but spare. r.mu and r.wmu must
// be held.
func (r *Rendezvous) crossings(member string, spare *turn) {
	day := usage.Day(time.Now())
	names := []string{""}
	if member != "" {
		names = []string{member, ""}
	}
	for _, name := range names {
		b := r.budgets[name]
		if b == nil {
			continue
		}
		if b.Per == usage.PerDay && b.day != day {
			b.day, b.warned, b.exhausted = day, false, false
		}
		spent := r.spent(name, b.Budget, day)
		if spent >= b.Warn() && !b.warned {
			b.warned = true
			r.publish(Event{Kind: EventBudgetWarning, Member: name, Budget: r.budgetState(name, b)})
		}
		if spent >= b.Tokens && !b.exhausted {
			b.exhausted = true
			st := r.budgetState(name, b)
			r.publish(Event{Kind: EventBudgetExhausted, Member: name, Budget: st})
			r.armRenewal(b)
			if b.Stop {
				r.stopTurns(name, spare, (&BudgetError{BudgetState: *st}).Error())
			}
		}
		if spent < b.Tokens {
			b.exhausted = false
		}
		if spent < b.Warn() {
			b.warned = false
		}
	}
}

// stopTurns stops the open turns of member (of every member for ""), as
// a budget with Stop does: why says which budget. r.mu and r.wmu must be
// held.
func (r *Rendezvous) stopTurns(member string, spare *turn, why string) {
	for _, m := range r.members {
		if t := m.open; t != nil && t != spare && (member == "" || m.name == member) {
			r.stopTurn(m, t, Outcome{Kind: OutcomeFailed, Reason: ReasonBudgetExhausted, Content: why})
		}
	}
}

// armRenewal wakes the held members when a daily budget b renews, at the
// next 00:00 UTC. r.mu must be held.
func (r *Rendezvous) armRenewal(b *budget) {
	if b.Per != usage.PerDay || r.renewal != nil || r.closed {
		return
	}
	now := time.Now().UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	r.renewal = time.AfterFunc(next.Sub(now), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.renewal = nil
		if !r.closed {
			r.wakeHeld()
		}
	})
}

// wakeHeld wakes every member with turns queued, so that those no budget
// holds any longer take them. r.mu must be held.
func (r *Rendezvous) wakeHeld() {
	for _, m := range r.members {
		if len(m.queue) > 0 {
			m.wake()
		}
	}
}

// restoreBudgets takes up the budgets an earlier owner wrote. r.mu must
// be held.
func (r *Rendezvous) restoreBudgets(recs []usage.BudgetRecord) {
	for _, rec := range recs {
		r.setBudget(rec.Member, rec.Budget)
	}
}
