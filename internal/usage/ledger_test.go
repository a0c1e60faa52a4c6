package usage

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestLedgerCountsEachTotalOnce holds the ledger's invariant: whatever the
// order in which totals of its sources arrive, repeated or late, what it
// counts is the sum over the sources of the highest total of each, field
// by field, and what each Report returns adds up to it. It survives a
// round trip through its record at any point.
func TestLedgerCountsEachTotalOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l Ledger
		high := map[string]Tokens{}
		var added Tokens
		n := rapid.IntRange(0, 60).Draw(t, "reports")
		for i := range n {
			src := fmt.Sprintf("s%d", rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("source%d", i)))
			tok := rapid.Custom(func(t *rapid.T) Tokens {
				f := func(name string) int64 { return rapid.Int64Range(0, 1000).Draw(t, name) }
				return Tokens{f("input"), f("output"), f("cache_read"), f("cache_write")}
			}).Draw(t, fmt.Sprintf("total%d", i))
			added = added.Add(l.Report(src, "", tok, "d"))
			high[src] = high[src].Max(tok)
			if rapid.Bool().Draw(t, fmt.Sprintf("roundtrip%d", i)) {
				data, err := json.Marshal(&l)
				if err != nil {
					t.Fatal(err)
				}
				l = Ledger{}
				if err := json.Unmarshal(data, &l); err != nil {
					t.Fatalf("%s: %v", data, err)
				}
			}
		}
		var want Tokens
		for _, h := range high {
			want = want.Add(h)
		}
		if l.Total() != want || added != want {
			t.Fatalf("ledger counts %+v, its reports added %+v; want %+v", l.Total(), added, want)
		}
	})
}

// TestLedgerForgetsTheOldestSource: past MaxSources, the source reported
// least recently goes, and a total of it reported again counts whole.
func TestLedgerForgetsTheOldestSource(t *testing.T) {
	var l Ledger
	one := Tokens{Input: 1}
	for i := range MaxSources {
		l.Report(fmt.Sprint(i), "", one, "d")
	}
	l.Report("0", "", one, "d") // 0 is now the most recent; 1 the oldest
	l.Report("new", "", one, "d")
	if got := l.Report("0", "", one, "d"); !got.IsZero() {
		t.Fatalf("a source still remembered counted again: %+v", got)
	}
	if got := l.Report("1", "", one, "d"); got != one {
		t.Fatalf("the forgotten source's total added %+v; want %+v", got, one)
	}
	if want := int64(MaxSources + 2); l.Total().Input != want {
		t.Fatalf("total %d; want %d", l.Total().Input, want)
	}
}

func TestCheckNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		source string
		total  Tokens
		want   string
	}{
		{"", Tokens{}, "no source"},
		{strings.Repeat("x", MaxSource+1), Tokens{}, "at most"},
		{"a", Tokens{Output: -1}, "negative"},
	} {
		if err := Check(tc.source, tc.total); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%.10q, %+v) = %v; want an error saying %q", tc.source, tc.total, err, tc.want)
		}
	}
	if err := Check("a", Tokens{Input: 1}); err != nil {
		t.Errorf("Check of a good report: %v", err)
	}
}

func TestLedgerRecordRefusesWhatCouldNotBeWritten(t *testing.T) {
	for _, data := range []string{
		`{"total":{"input_tokens":-1,"output_tokens":0}}`,
		`{"total":{"input_tokens":0,"output_tokens":0},"sources":[{"name":"","total":{"input_tokens":0,"output_tokens":0}}]}`,
		`[]`,
	} {
		var l Ledger
		if err := json.Unmarshal([]byte(data), &l); err == nil {
			t.Errorf("%s read as a ledger", data)
		}
	}
}

// A daily budget counts what was reported since the day began; a budget
// for the fleet's life, everything; in tokens, or in cost by model; all
// survive the ledger's record.
func TestLedgerSpentPerDay(t *testing.T) {
	var l Ledger
	l.Report("a", "big", Tokens{Input: 100, Output: 10, CacheRead: 999}, "2026-12-05")
	l.Report("a", "big", Tokens{Input: 130, Output: 20, CacheRead: 999}, "2026-12-06")
	l.Report("b", "small", Tokens{Input: 5, Output: 5}, "2026-12-06")
	life, day := Budget{Tokens: 1000}, Budget{Tokens: 1000, Per: PerDay}
	costLife, costDay := Budget{Cost: 1}, Budget{Cost: 1, Per: PerDay}
	prices := Prices{"big": {Input: 1000, Output: 10000, CacheRead: 100}, "small": {Input: 1, Output: 2}}
	check := func(l *Ledger) {
		t.Helper()
		for _, c := range []struct {
			b     Budget
			day   string
			p     Prices
			want  float64
			nope  []string
			about string
		}{
			{life, "2026-12-06", nil, 160, nil, "tokens over the life"},
			{day, "2026-12-06", nil, 50, nil, "tokens on the day: 30+10 of a, 10 of b"},
			{day, "2026-12-07", nil, 0, nil, "tokens on a day with no report"},
			// big: (130*1000 + 20*10000 + 999*100) / 1e6; small: (5+10) / 1e6
			{costLife, "2026-12-06", prices, 0.4299 + 0.000015, nil, "cost over the life"},
			// big on the day: (30*1000 + 10*10000) / 1e6
			{costDay, "2026-12-06", prices, 0.13 + 0.000015, nil, "cost on the day"},
			{costLife, "2026-12-06", Prices{"small": {Input: 1, Output: 2}}, 0.000015, []string{"big"}, "cost with a model unpriced"},
			{costLife, "2026-12-06", Prices{"*": {Input: 1, Output: 2}, "small": {}}, (130 + 40) / 1e6, nil, "cost with a price for any model"},
		} {
			got, nope := l.Spent(c.b, c.day, c.p)
			if math.Abs(got-c.want) > 1e-12 || !slices.Equal(nope, c.nope) {
				t.Errorf("%s: spent %v, unpriced %v; want %v, %v", c.about, got, nope, c.want, c.nope)
			}
		}
	}
	check(&l)
	data, err := json.Marshal(&l)
	if err != nil {
		t.Fatal(err)
	}
	var back Ledger
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	check(&back)
	// A ledger written before ledgers kept models reads as one of an
	// unknown model.
	var old Ledger
	if err := json.Unmarshal([]byte(`{"total":{"input_tokens":7,"output_tokens":3},"day":"2026-12-06","day_base":{"input_tokens":0,"output_tokens":0}}`), &old); err != nil ||
		old.Models()[""] != (Tokens{Input: 7, Output: 3}) {
		t.Errorf("an older ledger: %+v, %v", old.Models(), err)
	}
}

func TestLedgerRefusesTooManyModels(t *testing.T) {
	var l Ledger
	for i := range MaxModels {
		if err := l.CheckModels(fmt.Sprint(i)); err != nil {
			t.Fatalf("model %d refused: %v", i, err)
		}
		l.Report("s", fmt.Sprint(i), Tokens{Input: 1}, "d")
	}
	if err := l.CheckModels("0", "another"); err == nil {
		t.Errorf("a model past %d taken", MaxModels)
	}
	if err := l.CheckModels("0", "1"); err != nil {
		t.Errorf("models already counted refused: %v", err)
	}
	if err := (&Ledger{}).CheckModels(strings.Repeat("m", MaxModel+1)); err == nil {
		t.Errorf("a model's name too long taken")
	}
}

func TestPricesCheck(t *testing.T) {
	for _, bad := range []Prices{{"": {}}, {"m": {Input: -1}}, {"m": {Output: math.Inf(1)}}, {"m": {CacheRead: math.NaN()}}} {
		if bad.Check() == nil {
			t.Errorf("Check(%+v) = nil; want an error", bad)
		}
	}
	if err := (Prices{"*": {Input: 3, Output: 15}}).Check(); err != nil {
		t.Error(err)
	}
}

func TestBudgetCheckAndRecord(t *testing.T) {
	for _, bad := range []Budget{{}, {Tokens: -1}, {Tokens: 10, Per: "week"}, {Tokens: 10, WarnAt: 100}, {Tokens: 10, Reserve: 11},
		{Tokens: 10, Cost: 1}, {Cost: math.NaN()}, {Cost: math.Inf(1)}, {Tokens: 10, Reserve: 1.5}, {Cost: 1, Reserve: 2}} {
		if bad.Check() == nil {
			t.Errorf("Check(%+v) = nil; want an error", bad)
		}
	}
	b := Budget{Tokens: 500, Per: PerDay, WarnAt: 90, Reserve: 50}
	if err := b.Check(); err != nil || b.Warn() != 450 || (Budget{Tokens: 500}).Warn() != 400 {
		t.Errorf("Check = %v, Warn = %v", err, b.Warn())
	}
	if c := (Budget{Cost: 2.5, Reserve: 0.25, WarnAt: 50}); c.Check() != nil || c.Warn() != 1.25 || c.Limit() != 2.5 || c.String() != "cost 2.50" {
		t.Errorf("a budget in cost: Check %v, Warn %v, Limit %v, String %q", c.Check(), c.Warn(), c.Limit(), c.String())
	}
	for _, member := range []string{"", "scout"} {
		id, rec, err := EncodeBudget(member, &b)
		if err != nil {
			t.Fatal(err)
		}
		got, isRec, valid := DecodeBudget(rec)
		if !isRec || !valid || got.ID != id || got.Member != member || *got.Budget != b {
			t.Errorf("DecodeBudget(EncodeBudget(%q)) = %+v, %v, %v", member, got, isRec, valid)
		}
		if _, isUsage, _ := Decode(rec); isUsage {
			t.Errorf("a budget record reads as a usage record")
		}
	}
	if _, isRec, valid := DecodeBudget([]byte(`{"kind":"budget","member":"x","budget":{"tokens":0}}`)); !isRec || valid {
		t.Errorf("a budget of no tokens reads as valid")
	}
}
