package fleetstate

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/fleetstate/fleetstate/internal/usage"
)

// Budget bounds what a member or the whole fleet may use: tokens (input
// plus output) or cost (see [Rendezvous.SetPrices]), over the fleet's
// life or per day (see [Rendezvous.SetBudget]).
type Budget = usage.Budget

// Price is what a model's tokens cost, per million tokens (see
// [Rendezvous.SetPrices]).
type Price = usage.Price

// BudgetState is a budget and what it has counted.
type BudgetState struct {
	Member string `json:"member,omitempty"` // "" for the fleet's budget
	Budget
	// Spent is what the budget counted, in its unit (tokens or cost): the
	// member's usage (the fleet's for the fleet's budget), over the
	// fleet's life or that day.
	Spent float64 `json:"spent"`
	// Unpriced names the models whose usage a budget in cost counted and
	// no price covers: while there are any, the budget is held, as if
	// spent.
	Unpriced []string `json:"unpriced,omitempty"`
	// Held is set while Spent is at the limit, or Unpriced is not empty:
	// no new turn starts.
	Held bool `json:"held,omitempty"`
}

// BudgetError is the detail of [ErrBudgetExhausted]: the budget that
// refused a send, and what it counted.
type BudgetError struct {
	BudgetState
	// Reserved is what the turns not yet ended hold of the budget (see
	// Budget.Reserve).
	Reserved float64
}

func (e *BudgetError) Error() string {
	return e.Budget.Refusal(e.Member, e.Spent, e.Reserved, e.Unpriced)
}

// SetPrices sets what each model's tokens cost, per million tokens, for
// the budgets in cost (Budget.Cost): the price of model "*" is that of
// every model not named. A budget in cost whose usage includes a model
// with no price is held, as if spent, until the model has one. Budgets
// are priced with the prices of the moment: new prices count for what
// was used before them too. The prices are written before SetPrices
// returns nil; nil removes them.
func (r *Rendezvous) SetPrices(prices map[string]Price) error {
	const op = "set prices"
	p := usage.Prices(maps.Clone(prices))
	if err := p.Check(); err != nil {
		return &Error{Code: CodeInvalidArgument, Op: op, Err: err}
	}
	rec, err := usage.EncodePrices(p)
	return r.saveSetting(op, usage.PricesID, rec, err, func() {
		r.prices = p
		for _, m := range r.members {
			if m.registered && !m.usage.Total().IsZero() {
				r.publishUsage(m, "")
			}
		}
		r.crossings("", nil)
	})
}

// saveSetting writes rec, a budget or the prices made with err, under
// key id, then applies it with apply and wakes the members it may no
// longer hold, r.mu and r.wmu held.
func (r *Rendezvous) saveSetting(op, id string, rec []byte, err error, apply func()) error {
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
	apply()
	r.wakeHeld()
	return nil
}

// costOf returns what m's usage costs at the fleet's prices, nil without
// prices or usage, and whether calls of a model with no price were left
// out. r.mu must be held.
func (r *Rendezvous) costOf(m *member) (*float64, bool) {
	if models := m.usage.Models(); len(models) > 0 && r.prices != nil {
		cost, unpriced := r.prices.Cost(models)
		return &cost, len(unpriced) > 0
	}
	return nil, false
}

// publishUsage publishes m's usage and cost, grown during turn ("" for
// none). r.mu must be held.
func (r *Rendezvous) publishUsage(m *member, turn string) {
	now := m.usage.Total()
	cost, unpriced := r.costOf(m)
	r.publish(Event{Kind: EventUsage, Member: m.name, TurnID: turn, Usage: &now, Cost: cost, Unpriced: unpriced})
}

// Prices returns the prices SetPrices set.
func (r *Rendezvous) Prices() map[string]Price {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.prices)
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
	return r.saveSetting(op, id, rec, err, func() {
		r.setBudget(member, b)
		st := r.budgetState(member, r.budgets[member])
		r.publish(Event{Kind: EventBudgetSet, Member: member, Budget: st})
		r.crossings(member, nil)
	})
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
	return r.state(member, b.Budget, usage.Day(time.Now()))
}

// state returns budget b of member ("" for the fleet) with what it
// counted on day. r.mu must be held.
func (r *Rendezvous) state(member string, b Budget, day string) *BudgetState {
	st := &BudgetState{Member: member, Budget: b}
	for _, m := range r.members {
		if member != "" && m.name != member {
			continue
		}
		spent, unpriced := m.usage.Spent(b, day, r.prices)
		st.Spent += spent
		st.Unpriced = append(st.Unpriced, unpriced...)
	}
	slices.Sort(st.Unpriced)
	st.Unpriced = slices.Compact(st.Unpriced)
	st.Held = st.Spent >= b.Limit() || len(st.Unpriced) > 0
	return st
}

// held reports whether m may not start a turn now: its budget, or the
// fleet's, is spent. r.mu must be held.
func (r *Rendezvous) held(m *member) bool {
	if len(r.budgets) == 0 {
		return false
	}
	day := usage.Day(time.Now())
	for _, name := range [2]string{m.name, ""} {
		if b := r.budgets[name]; b != nil && r.state(name, b.Budget, day).Held {
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
		st := r.state(name, b.Budget, day)
		reserved := r.reserved(name, b.Budget)
		if st.Held || b.Reserve > 0 && st.Spent+reserved+b.Reserve > b.Limit() {
			return &Error{Code: CodeBudgetExhausted, Op: op, Err: &BudgetError{BudgetState: *st, Reserved: reserved}}
		}
	}
	return nil
}

// reserved returns what the turns of member (of every member for "")
// not yet ended hold of budget b (see Budget.Reserve). r.mu must be held.
func (r *Rendezvous) reserved(member string, b Budget) float64 {
	if b.Reserve == 0 {
		return 0
	}
	var n float64
	hold := func(t *turn) {
		used := 0.0
		if t.Usage != nil && b.Cost == 0 {
			used = float64(t.Usage.Counted())
		}
		n += max(b.Reserve-used, 0)
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
		st := r.state(name, b.Budget, day)
		if st.Spent >= b.Warn() && !b.warned {
			b.warned = true
			r.publish(Event{Kind: EventBudgetWarning, Member: name, Budget: st})
		}
		if st.Held && !b.exhausted {
			b.exhausted = true
			r.publish(Event{Kind: EventBudgetExhausted, Member: name, Budget: st})
			r.armRenewal(b)
		}
		if st.Held && b.Stop {
			// Also where Stop was set on a budget already spent.
			r.stopTurns(name, spare, (&BudgetError{BudgetState: *st}).Error())
		}
		if !st.Held {
			b.exhausted = false
		}
		if st.Spent < b.Warn() {
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

// restoreBudgets takes up the budgets and prices an earlier owner wrote.
// r.mu must be held.
func (r *Rendezvous) restoreBudgets(recs []usage.BudgetRecord, prices []usage.PricesRecord) {
	for _, rec := range recs {
		r.setBudget(rec.Member, rec.Budget)
	}
	for _, rec := range prices {
		r.prices = rec.Prices
	}
}
