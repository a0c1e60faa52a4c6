package usage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/internal/names"
)

// Budget bounds what a member, or a whole fleet, may use: tokens (input
// plus output) or cost (priced by Prices), over the fleet's life or per
// day (from 00:00 UTC).
type Budget struct {
	// Tokens is the limit of a budget in tokens: input plus output.
	Tokens int64 `json:"tokens,omitempty"`
	// Cost is the limit of a budget in cost, in the currency of the
	// prices. A budget has Tokens or Cost, not both.
	Cost float64 `json:"cost,omitempty"`
	// Per is "" for the fleet's life, or "day" for a budget that renews
	// at 00:00 UTC.
	Per string `json:"per,omitempty"`
	// WarnAt is the share of the limit, in percent, whose crossing raises
	// a warning; 0 means 80.
	WarnAt int `json:"warn_at,omitempty"`
	// Reserve is what each turn holds of the budget, in its unit, from
	// its send until it ends: a send is admitted only while the spend and
	// every reserve, its own included, fit. A budget in tokens takes what
	// the turn used meanwhile off its reserve; one in cost holds it whole.
	// 0 admits sends while anything is left.
	Reserve float64 `json:"reserve,omitempty"`
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
	case b.Tokens < 0 || b.Cost < 0 || math.IsNaN(b.Cost) || math.IsInf(b.Cost, 0):
		return errors.New("a budget of a negative or not finite amount")
	case b.Tokens == 0 && b.Cost == 0:
		return errors.New("a budget needs a positive number of tokens, or a positive cost")
	case b.Tokens > 0 && b.Cost > 0:
		return errors.New("a budget is in tokens or in cost, not both")
	case b.Per != "" && b.Per != PerDay:
		return fmt.Errorf("per %q: a budget is per %q or for the fleet's life (no per)", b.Per, PerDay)
	case b.WarnAt < 0 || b.WarnAt >= 100:
		return fmt.Errorf("warn_at %d: a percent of the budget from 1 to 99", b.WarnAt)
	case !(b.Reserve >= 0 && b.Reserve <= b.Limit()):
		return fmt.Errorf("reserve %v: from 0 to the budget's %v", b.Reserve, b.Limit())
	case b.Tokens > 0 && b.Reserve != math.Trunc(b.Reserve):
		return fmt.Errorf("reserve %v: a whole number of tokens", b.Reserve)
	}
	return nil
}

// Limit returns b's limit in its unit: tokens, or cost.
func (b Budget) Limit() float64 {
	if b.Cost > 0 {
		return b.Cost
	}
	return float64(b.Tokens)
}

// Warn returns the spend at which b warns.
func (b Budget) Warn() float64 {
	p := b.WarnAt
	if p == 0 {
		p = 80
	}
	if b.Cost > 0 {
		return b.Cost * float64(p) / 100
	}
	return float64(b.Tokens * int64(p) / 100)
}

// String says b as a person reads it: "1000 tokens per day", "cost 5".
func (b Budget) String() string {
	s := fmt.Sprintf("%d tokens", b.Tokens)
	if b.Cost > 0 {
		s = "cost " + FormatCost(b.Cost)
	}
	if b.Per == PerDay {
		s += " per day"
	}
	return s
}

// Refusal says why b, of member ("" for the fleet), refuses a send: the
// limit, the spend, the reserves and the models with no price.
func (b Budget) Refusal(member string, spent, reserved float64, unpriced []string) string {
	who := "the fleet's budget"
	if member != "" {
		who = "member " + strconv.Quote(member) + "'s budget"
	}
	s := fmt.Sprintf("%s of %s: %s spent", who, b, b.amount(spent))
	if reserved > 0 || b.Reserve > 0 {
		s += fmt.Sprintf(", %s held by turns not ended, %s for this one", b.amount(reserved), b.amount(b.Reserve))
	}
	if len(unpriced) > 0 {
		q := make([]string, len(unpriced))
		for i, m := range unpriced {
			q[i] = strconv.Quote(m)
		}
		s += fmt.Sprintf("; no price for model %s: give the fleet's prices one, or one for %q", strings.Join(q, ", "), AnyModel)
	}
	return s
}

// amount writes v in b's unit.
func (b Budget) amount(v float64) string {
	if b.Cost > 0 {
		return FormatCost(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// FormatCost writes a cost as a person reads it: two decimals, more
// below 1 where they matter.
func FormatCost(c float64) string {
	s := strconv.FormatFloat(c, 'f', 2, 64)
	if c != 0 && c < 1 {
		s = strconv.FormatFloat(c, 'f', 4, 64)
		s = strings.TrimRight(s, "0")
		if len(s) < 4 {
			s = strconv.FormatFloat(c, 'f', 2, 64)
		}
	}
	return s
}

// Day names t's day, UTC, as ledgers key their daily counts.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Counted is what a budget in tokens counts of t: input plus output.
func (t Tokens) Counted() int64 { return t.Input + t.Output }

// Price is what a model's tokens cost, per million tokens, in the
// currency of a fleet's budgets.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read,omitempty"`
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// Prices are prices by model; the price of "*", if given, is that of
// every model not named.
type Prices map[string]Price

// AnyModel is the model name of Prices whose price is that of models
// not named.
const AnyModel = "*"

// Check returns an error naming what is wrong with p.
func (p Prices) Check() error {
	if len(p) > 4*MaxModels {
		return fmt.Errorf("prices of %d models; at most %d", len(p), 4*MaxModels)
	}
	for m, pr := range p {
		if m == "" || len(m) > MaxModel {
			return fmt.Errorf("the price of model %q: a model's name has 1 to %d bytes", m, MaxModel)
		}
		for _, v := range [...]float64{pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite} {
			if !(v >= 0) || math.IsInf(v, 0) {
				return fmt.Errorf("the price of model %q: prices are not negative and finite", m)
			}
		}
	}
	return nil
}

// Cost returns what u costs, and the models of u that have no price
// (sorted), whose usage it does not count.
func (p Prices) Cost(u ByModel) (cost float64, unpriced []string) {
	for m, t := range u {
		pr, ok := p[m]
		if !ok {
			pr, ok = p[AnyModel]
		}
		if !ok {
			unpriced = append(unpriced, m)
			continue
		}
		cost += (float64(t.Input)*pr.Input + float64(t.Output)*pr.Output +
			float64(t.CacheRead)*pr.CacheRead + float64(t.CacheWrite)*pr.CacheWrite) / 1e6
	}
	slices.Sort(unpriced)
	return cost, unpriced
}

// Spent returns what l counts against b on day: its total, or for a
// daily budget what it counted since day began; in tokens, or priced by
// p, with the models p has no price for.
func (l *Ledger) Spent(b Budget, day string, p Prices) (spent float64, unpriced []string) {
	u := l.models
	if b.Per == PerDay {
		u = l.Since(day)
	}
	if b.Cost > 0 {
		return p.Cost(u)
	}
	return float64(u.Sum().Counted()), nil
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
	return decode(data, budgetKind, func(rec BudgetRecord) bool {
		return (rec.Member == "" || names.Agent(rec.Member) == nil) && (rec.Budget == nil || rec.Budget.Check() == nil)
	})
}

// pricesKind marks the prices' record among a journal's records.
const pricesKind = "prices"

// PricesRecord is a fleet's prices as a rendezvous's journal keeps them.
type PricesRecord struct {
	ID     string `json:"id"` // PricesID
	Kind   string `json:"kind"`
	Prices Prices `json:"prices"`
}

// PricesID is the journal's key of the prices' record.
const PricesID = "prices"

// EncodePrices returns the record of p.
func EncodePrices(p Prices) ([]byte, error) {
	return json.Marshal(PricesRecord{ID: PricesID, Kind: pricesKind, Prices: p})
}

// DecodePrices reads data as the prices' record, as Decode reads a usage
// record.
func DecodePrices(data []byte) (rec PricesRecord, isRecord, valid bool) {
	return decode(data, pricesKind, func(rec PricesRecord) bool { return rec.Prices.Check() == nil })
}
