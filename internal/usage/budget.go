package usage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fleetstate/fleetstate/internal/names"
)

// Budget bounds the tokens (input plus output) a member, or a whole
// fleet, may use: over the fleet's life, or per day (from 00:00 UTC).
type Budget struct {
	// Tokens is the limit, input plus output tokens.
	Tokens int64 `json:"tokens"`
	// Per is "" for the fleet's life, or "day" for a budget that renews
	// at 00:00 UTC.
	Per string `json:"per,omitempty"`
	// WarnAt is the share of Tokens, in percent, whose crossing raises a
	// warning; 0 means 80.
	WarnAt int `json:"warn_at,omitempty"`
	// Reserve is what each turn holds of the budget from its send until
	// it ends, less what it used meanwhile: a send is admitted only
	// while the spend and every reserve, its own included, fit. 0 admits
	// sends while anything is left.
	Reserve int64 `json:"reserve,omitempty"`
	// Stop ends the open turns the budget covers when their member's
	// usage crosses the limit, failed with reason budget_exhausted, and
	// interrupts the members that can be.
	Stop bool `json:"stop,omitempty"`
}

// PerDay is Budget.Per of a daily budget.
const PerDay = "day"

// Check returns an error naming what is wrong with b.
func (b Budget) Check() error {
	switch {
	case b.Tokens <= 0:
		return errors.New("a budget needs a positive number of tokens")
	case b.Per != "" && b.Per != PerDay:
		return fmt.Errorf("per %q: a budget is per %q or for the fleet's life (no per)", b.Per, PerDay)
	case b.WarnAt < 0 || b.WarnAt >= 100:
		return fmt.Errorf("warn_at %d: a percent of the budget from 1 to 99", b.WarnAt)
	case b.Reserve < 0 || b.Reserve > b.Tokens:
		return fmt.Errorf("reserve %d: from 0 to the budget's %d tokens", b.Reserve, b.Tokens)
	}
	return nil
}

// Warn returns the spend at which b warns.
func (b Budget) Warn() int64 {
	p := b.WarnAt
	if p == 0 {
		p = 80
	}
	return b.Tokens * int64(p) / 100
}

// String says b as a person reads it: "1000 tokens per day".
func (b Budget) String() string {
	s := fmt.Sprintf("%d tokens", b.Tokens)
	if b.Per == PerDay {
		s += " per day"
	}
	return s
}

// Day names t's day, UTC, as ledgers key their daily counts.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Counted is what a budget counts of t: input plus output tokens.
func (t Tokens) Counted() int64 { return t.Input + t.Output }

// Spent returns what l counts against b on day: its total, or for a
// daily budget what it counted since day began.
func (l *Ledger) Spent(b Budget, day string) int64 {
	if b.Per != PerDay {
		return l.total.Counted()
	}
	if l.day != day {
		return 0
	}
	return l.total.Sub(l.dayBase).Counted()
}

// budgetKind marks a budget record among a journal's records.
const budgetKind = "budget"

// BudgetRecord is a budget as a rendezvous's journal keeps it: of a
// member, or of the fleet (Member "").
type BudgetRecord struct {
	ID     string  `json:"id"` // BudgetID(Member)
	Kind   string  `json:"kind"`
	Member string  `json:"member,omitempty"`
	Budget *Budget `json:"budget,omitempty"` // nil: removed
}

// BudgetID is the journal's key of member's budget record ("" for the
// fleet's).
func BudgetID(member string) string {
	if member == "" {
		return "budget_fleet"
	}
	return "budget_m_" + base64.RawURLEncoding.EncodeToString([]byte(member))
}

// EncodeBudget returns the record of member's budget b (nil: none), and
// its key.
func EncodeBudget(member string, b *Budget) (id string, rec []byte, err error) {
	r := BudgetRecord{ID: BudgetID(member), Kind: budgetKind, Member: member, Budget: b}
	rec, err = json.Marshal(r)
	return r.ID, rec, err
}

// DecodeBudget reads data as a budget record, as Decode reads a usage
// record.
func DecodeBudget(data []byte) (rec BudgetRecord, isRecord, valid bool) {
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &head) != nil || head.Kind != budgetKind {
		return BudgetRecord{}, false, false
	}
	if json.Unmarshal(data, &rec) != nil || rec.Member != "" && names.Agent(rec.Member) != nil ||
		rec.Budget != nil && rec.Budget.Check() != nil {
		return BudgetRecord{}, true, false
	}
	return rec, true, true
}
