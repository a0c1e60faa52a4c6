package usage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	// MaxModels is how many models a Ledger tells apart.
	MaxModels = 64
)

// Ledger adds up one agent's usage from running totals, each of a source
// (a transcript's path, say) and a model: a total counts what it adds
// over the highest total of its source and model seen before, field by
// field, so that a total reported twice, or after a later one, counts
// once. The zero Ledger is empty. A Ledger does not lock.
type Ledger struct {
	models  ByModel  // what the ledger counted, by model
	sources []source // least recently reported first
	day     string   // of the last report (see Day)
	dayBase ByModel  // models before that day's first report
}

type source struct {
	Name  string `json:"name"`
	Model string `json:"model,omitempty"`
	Total Tokens `json:"total"`
}

// Total returns what the ledger counted, over every source.
func (l *Ledger) Total() Tokens { return l.models.Sum() }

// Models returns what the ledger counted, by model. The caller must not
// change it.
func (l *Ledger) Models() ByModel { return l.models }

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

// CheckModels returns an error if the ledger cannot take reports of
// models: a name too long, or more models than MaxModels in all.
func (l *Ledger) CheckModels(models ...string) error {
	n := len(l.models)
	seen := map[string]bool{}
	for _, m := range models {
		if len(m) > MaxModel {
			return fmt.Errorf("a model's name of %d bytes; at most %d", len(m), MaxModel)
		}
		if _, ok := l.models[m]; !ok && !seen[m] {
			seen[m] = true
			n++
		}
	}
	if n > MaxModels {
		return fmt.Errorf("usage of %d models; a member's usage tells at most %d apart", n, MaxModels)
	}
	return nil
}

// Report takes total, what source has used of model so far, reported on
// day (see Day), and returns what it adds to the ledger. The caller has
// checked it with Check and CheckModels.
func (l *Ledger) Report(name, model string, total Tokens, day string) Tokens {
	if l.day != day {
		l.day, l.dayBase = day, maps.Clone(l.models)
	}
	i := slices.IndexFunc(l.sources, func(s source) bool { return s.Name == name && s.Model == model })
	var last Tokens
	if i >= 0 {
		last = l.sources[i].Total
		l.sources = slices.Delete(l.sources, i, i+1)
	} else if len(l.sources) == MaxSources {
		l.sources = slices.Delete(l.sources, 0, 1)
	}
	high := last.Max(total)
	l.sources = append(l.sources, source{Name: name, Model: model, Total: high})
	d := high.Sub(last)
	if !d.IsZero() {
		if l.models == nil {
			l.models = ByModel{}
		}
		l.models[model] = l.models[model].Add(d)
	}
	return d
}

// Since returns what the ledger counted on day, by model: nothing if it
// took no report that day.
func (l *Ledger) Since(day string) ByModel {
	out := ByModel{}
	if l.day != day {
		return out
	}
	for m, t := range l.models {
		if d := t.Sub(l.dayBase[m]); !d.IsZero() {
			out[m] = d
		}
	}
	return out
}

// ledgerJSON is a Ledger as its record holds it.
type ledgerJSON struct {
	Total   Tokens   `json:"total"`
	Models  ByModel  `json:"models,omitempty"`
	Sources []source `json:"sources,omitempty"`
	Day     string   `json:"day,omitempty"`
	DayBase ByModel  `json:"day_base_models,omitempty"`
}

// MarshalJSON writes l as its record keeps it.
func (l *Ledger) MarshalJSON() ([]byte, error) {
	return json.Marshal(ledgerJSON{Total: l.models.Sum(), Models: l.models, Sources: l.sources, Day: l.day, DayBase: l.dayBase})
}

// UnmarshalJSON reads what MarshalJSON wrote; a ledger that could not
// have been written (a negative count, too many sources) is an error.
func (l *Ledger) UnmarshalJSON(data []byte) error {
	var v ledgerJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if len(v.Sources) > MaxSources || len(v.Models) > MaxModels || len(v.DayBase) > MaxModels {
		return fmt.Errorf("usage: a ledger of %d sources and %d models; at most %d and %d", len(v.Sources), len(v.Models), MaxSources, MaxModels)
	}
	if v.Models == nil && !v.Total.IsZero() {
		v.Models = ByModel{"": v.Total} // written before ledgers kept models
	}
	if v.Models.Sum() != v.Total {
		return fmt.Errorf("usage: ledger: models of %+v beside a total of %+v", v.Models.Sum(), v.Total)
	}
	for _, s := range v.Sources {
		if err := Check(s.Name, s.Total); err != nil || len(s.Model) > MaxModel {
			return fmt.Errorf("usage: ledger: source %q of model %q: %+v", s.Name, s.Model, s.Total)
		}
	}
	for m, t := range v.Models {
		if err := Check("model", t); err != nil || len(m) > MaxModel {
			return fmt.Errorf("usage: ledger: model %q: %+v", m, t)
		}
		if b := v.DayBase[m]; Check("day", t.Sub(b)) != nil || Check("day", b) != nil {
			return fmt.Errorf("usage: ledger: a day's base of %+v beside a total of %+v for model %q", b, t, m)
		}
	}
	for m := range v.DayBase {
		if _, ok := v.Models[m]; !ok {
			return fmt.Errorf("usage: ledger: a day's base of model %q, which counted nothing", m)
		}
	}
	*l = Ledger{models: v.Models, sources: v.Sources, day: v.Day, dayBase: v.DayBase}
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
	return decode(data, recordKind, func(rec Record) bool {
		return rec.Ledger != nil && names.Agent(rec.Member) == nil && (rec.TurnUsage == nil || Check("turn", *rec.TurnUsage) == nil)
	})
}

// decode reads data as a record of kind: isRecord is false for another
// kind; valid is false for one that does not decode, or that ok refuses.
func decode[T any](data []byte, kind string, ok func(T) bool) (rec T, isRecord, valid bool) {
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &head) != nil || head.Kind != kind {
		return rec, false, false
	}
	var zero T
	if json.Unmarshal(data, &rec) != nil || !ok(rec) {
		return zero, true, false
	}
	return rec, true, true
}
