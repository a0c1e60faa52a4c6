package usage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/fleetstate/fleetstate/internal/names"
)

// Ledger bounds.
const (
	// MaxSources is how many sources a Ledger remembers: a coding agent
	// writes one transcript per session, so these are its recent
	// sessions. The source reported least recently is forgotten first; a
	// total of it reported again counts whole.
	MaxSources = 64
	// MaxSource bounds a source's name, in bytes.
	MaxSource = 1024
)

// Ledger adds up one agent's usage from running totals, each of a source
// (a transcript's path, say): a total counts what it adds over the
// highest total of its source seen before, field by field, so that a
// total reported twice, or after a later one, counts once. The zero
// Ledger is empty. A Ledger does not lock.
type Ledger struct {
	total   Tokens
	sources []source // least recently reported first
	day     string   // of the last report (see Day)
	dayBase Tokens   // total before that day's first report
}

type source struct {
	Name  string `json:"name"`
	Total Tokens `json:"total"`
}

// Total returns what the ledger counted, over every source.
func (l *Ledger) Total() Tokens { return l.total }

// Check returns an error naming what is wrong with a report of total
// from source, and nil for a report Report takes.
func Check(source string, total Tokens) error {
	switch {
	case source == "":
		return errors.New("no source: name where the totals come from (a transcript's path, say)")
	case len(source) > MaxSource:
		return fmt.Errorf("a source of %d bytes; at most %d", len(source), MaxSource)
	case total.Input < 0 || total.Output < 0 || total.CacheRead < 0 || total.CacheWrite < 0:
		return errors.New("a negative count of tokens")
	}
	return nil
}

// Report takes total, what source has used so far, reported on day (see
// Day), and returns what it adds to the ledger. The caller has checked it
// with Check.
func (l *Ledger) Report(name string, total Tokens, day string) Tokens {
	if l.day != day {
		l.day, l.dayBase = day, l.total
	}
	i := slices.IndexFunc(l.sources, func(s source) bool { return s.Name == name })
	var last Tokens
	if i >= 0 {
		last = l.sources[i].Total
		l.sources = slices.Delete(l.sources, i, i+1)
	} else if len(l.sources) == MaxSources {
		l.sources = slices.Delete(l.sources, 0, 1)
	}
	high := last.Max(total)
	l.sources = append(l.sources, source{Name: name, Total: high})
	d := high.Sub(last)
	l.total = l.total.Add(d)
	return d
}

// ledgerJSON is a Ledger as its record holds it.
type ledgerJSON struct {
	Total   Tokens   `json:"total"`
	Sources []source `json:"sources,omitempty"`
	Day     string   `json:"day,omitempty"`
	DayBase Tokens   `json:"day_base"`
}

// MarshalJSON writes l as its record keeps it.
func (l *Ledger) MarshalJSON() ([]byte, error) {
	return json.Marshal(ledgerJSON{Total: l.total, Sources: l.sources, Day: l.day, DayBase: l.dayBase})
}

// UnmarshalJSON reads what MarshalJSON wrote; a ledger that could not
// have been written (a negative count, too many sources) is an error.
func (l *Ledger) UnmarshalJSON(data []byte) error {
	var v ledgerJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if len(v.Sources) > MaxSources {
		return fmt.Errorf("usage: a ledger of %d sources; at most %d", len(v.Sources), MaxSources)
	}
	if err := Check("total", v.Total); err != nil {
		return fmt.Errorf("usage: ledger: %v", err)
	}
	for _, s := range v.Sources {
		if err := Check(s.Name, s.Total); err != nil {
			return fmt.Errorf("usage: ledger: %v", err)
		}
	}
	if err := Check("day", v.Total.Sub(v.DayBase)); err != nil || Check("day", v.DayBase) != nil {
		return fmt.Errorf("usage: ledger: a day's base of %+v beside a total of %+v", v.DayBase, v.Total)
	}
	*l = Ledger{total: v.Total, sources: v.Sources, day: v.Day, dayBase: v.DayBase}
	return nil
}

// Record is a member's usage as a rendezvous's journal keeps it, beside
// the turns: its ledger, and its open turn's usage, which the turn's own
// record holds once the turn is written again.
type Record struct {
	ID        string  `json:"id"` // RecordID(Member): a journal may read a record's key from it
	Kind      string  `json:"kind"`
	Member    string  `json:"member"`
	Ledger    *Ledger `json:"ledger"`
	Turn      string  `json:"turn,omitempty"`
	TurnUsage *Tokens `json:"turn_usage,omitempty"`
}

// recordKind marks a usage record among a journal's records.
const recordKind = "usage"

// RecordID is the journal's key of member's usage record: letters,
// digits, - and _ alone, as every journal takes.
func RecordID(member string) string {
	return "usage_" + base64.RawURLEncoding.EncodeToString([]byte(member))
}

// Encode returns the record of member's ledger l, with its open turn and
// that turn's usage (turn "" for none), and its key.
func Encode(member string, l *Ledger, turn string, turnUsage *Tokens) (id string, rec []byte, err error) {
	r := Record{ID: RecordID(member), Kind: recordKind, Member: member, Ledger: l, Turn: turn, TurnUsage: turnUsage}
	rec, err = json.Marshal(r)
	return r.ID, rec, err
}

// Decode reads data as a usage record. isRecord is false for another
// kind of record; valid is false for a usage record that cannot be read
// back: no ledger, an invalid member name, a negative count.
func Decode(data []byte) (rec Record, isRecord, valid bool) {
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &head) != nil || head.Kind != recordKind {
		return Record{}, false, false
	}
	if json.Unmarshal(data, &rec) != nil || rec.Ledger == nil || names.Agent(rec.Member) != nil ||
		rec.TurnUsage != nil && Check("turn", *rec.TurnUsage) != nil {
		return Record{}, true, false
	}
	return rec, true, true
}
