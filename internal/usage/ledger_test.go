package usage

import (
	"encoding/json"
	"fmt"
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
			added = added.Add(l.Report(src, tok, "d"))
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
		l.Report(fmt.Sprint(i), one, "d")
	}
	l.Report("0", one, "d") // 0 is now the most recent; 1 the oldest
	l.Report("new", one, "d")
	if got := l.Report("0", one, "d"); !got.IsZero() {
		t.Fatalf("a source still remembered counted again: %+v", got)
	}
	if got := l.Report("1", one, "d"); got != one {
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
// for the fleet's life, everything; both survive the ledger's record.
func TestLedgerSpentPerDay(t *testing.T) {
	var l Ledger
	l.Report("a", Tokens{Input: 100, Output: 10, CacheRead: 999}, "2026-12-05")
	l.Report("a", Tokens{Input: 130, Output: 20}, "2026-12-06")
	l.Report("b", Tokens{Input: 5, Output: 5}, "2026-12-06")
	life, day := Budget{Tokens: 1000}, Budget{Tokens: 1000, Per: PerDay}
	check := func(l *Ledger) {
		t.Helper()
		if got := l.Spent(life, "2026-12-06"); got != 160 {
			t.Errorf("spent over the life = %d; want 160", got)
		}
		if got := l.Spent(day, "2026-12-06"); got != 50 {
			t.Errorf("spent on the day = %d; want 50 (30+10 of a, 10 of b)", got)
		}
		if got := l.Spent(day, "2026-12-07"); got != 0 {
			t.Errorf("spent on a day with no report = %d; want 0", got)
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
}

func TestBudgetCheckAndRecord(t *testing.T) {
	for _, bad := range []Budget{{}, {Tokens: -1}, {Tokens: 10, Per: "week"}, {Tokens: 10, WarnAt: 100}, {Tokens: 10, Reserve: 11}} {
		if bad.Check() == nil {
			t.Errorf("Check(%+v) = nil; want an error", bad)
		}
	}
	b := Budget{Tokens: 500, Per: PerDay, WarnAt: 90, Reserve: 50}
	if err := b.Check(); err != nil || b.Warn() != 450 || (Budget{Tokens: 500}).Warn() != 400 {
		t.Errorf("Check = %v, Warn = %d", err, b.Warn())
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
