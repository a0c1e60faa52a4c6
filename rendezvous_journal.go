package fleetstate

import (
	"encoding/json"
	"log/slog"
	"sort"

	"github.com/fleetstate/fleetstate/internal/dirstore"
	"github.com/fleetstate/fleetstate/internal/names"
	"github.com/fleetstate/fleetstate/internal/permit"
	"github.com/fleetstate/fleetstate/internal/record"
	"github.com/fleetstate/fleetstate/internal/turnlog"
	"github.com/fleetstate/fleetstate/internal/usage"
)

// journal is the rendezvous's side of its [Journal]: a [turnlog.Log] that also
// encodes the turns' records. Its fields are guarded by Rendezvous.wmu, the
// writers' lock: a writer may call it with the rendezvous's own lock released.
type journal struct {
	*turnlog.Log
	buf []byte // the record being encoded
	log func(msg string, args ...any)
}

// OpenJournal takes the ownership of the fleet kept in s's state directory
// and returns its journal, or fails with [ErrFleetOwned] while another
// holds it. addr, which may be empty, says where the owner serves the
// fleet. A [Rendezvous] on s opens it itself unless given another in
// [RendezvousOptions.Journal]; a store opened with [OpenBackend] has a
// private one in memory. Failures no caller hears of go to slog.Default.
func (s *Store) OpenJournal(addr string) (Journal, error) {
	return s.openJournal("open journal", addr, slog.Default().Error)
}

func (s *Store) openJournal(op, addr string, logErr func(string, ...any)) (*dirstore.Journal, error) {
	dj, err := dirstore.OpenJournal(s.local, addr, logErr)
	if err != nil {
		return nil, withOp(op, dirError(s.local, err))
	}
	return dj, nil
}

// openJournal wraps impl as the rendezvous's journal; with impl nil, the
// store's own, which takes the fleet's ownership. The disk's journal
// waits on no one: its calls get no deadline.
func openJournal(store *Store, impl Journal, addr string, logErr func(string, ...any)) (*journal, error) {
	timeout := DefaultJournalTimeout
	if impl == nil {
		dj, err := store.openJournal("new rendezvous", addr, logErr)
		if err != nil {
			return nil, err
		}
		impl, timeout = dj, 0
	}
	return &journal{Log: turnlog.New(impl, timeout, logErr), log: logErr}, nil
}

// persist writes t's record.
func (j *journal) persist(t *turn) error { return j.persistRecord(t, &t.turnRecord) }

// persistRecord writes rec as t's record, which it is about to become: the
// caller may have released Rendezvous.mu, so rec is a copy, not t's own.
func (j *journal) persistRecord(t *turn, rec *turnRecord) error {
	j.buf = appendRecord(j.buf[:0], rec)
	return withOp("persist turn", j.Save(t.ID, j.buf))
}

// appendRecord appends the JSON of rec to b, as encoding/json writes it,
// without reflection (package record): a record is written at every
// step of every turn.
func appendRecord(b []byte, rec *turnRecord) []byte {
	r := record.Turn{ID: rec.ID, Ticket: rec.Ticket, Lead: rec.Lead, Member: rec.Member, Brief: rec.Brief,
		Seq: rec.Seq, Created: rec.Created, State: string(rec.State), Question: rec.Question, Asked: rec.Asked,
		Answer: rec.Answer, Opened: rec.Opened, HeldUntil: rec.HeldUntil, Usage: rec.Usage}
	var held record.Outcome
	if o := rec.Held; o != nil {
		held = record.Outcome{Kind: string(o.Kind), TurnID: o.TurnID, Ticket: o.Ticket, From: o.From, Content: o.Content,
			Partial: o.Partial, Reason: string(o.Reason), State: string(o.State), Returned: o.Returned}
		r.Held = &held
	}
	return record.Append(b, &r)
}

// save persists t and logs a failure: the state in memory stays right, and
// the change is lost only if the process dies before the next save.
func (j *journal) save(t *turn) {
	if err := j.persist(t); err != nil {
		j.log("fleetstate: persist turn", "turn", t.ID, "err", err)
	}
}

// retire notes that t, done, was handed to its lead and is now held only
// in case the response was lost: the next Settle holds its record as it
// stands, which says when the hold ends. saved says that record was
// written already. r.mu and r.wmu must be held.
func (j *journal) retire(t *turn, saved bool) {
	if j.Closed() || t.State != TicketDone {
		return
	}
	j.buf = appendRecord(j.buf[:0], &t.turnRecord)
	j.Hold(t.ID, j.buf, saved)
}

// loaded is what an earlier owner left in the journal.
type loaded struct {
	turns   []*turn // oldest first
	perms   []PermissionRequest
	usages  []usage.Record
	budgets []usage.BudgetRecord
	prices  []usage.PricesRecord
}

// decodeInto decodes data with decode into *into, and reports whether data is
// a record of decode's kind; one that cannot be read back is logged as
// what and skipped.
func decodeInto[T any](j *journal, data []byte, decode func([]byte) (T, bool, bool), into *[]T, what string) bool {
	v, isKind, valid := decode(data)
	if !isKind {
		return false
	}
	if valid {
		*into = append(*into, v)
	} else {
		j.log("fleetstate: skip unreadable "+what+" record", "bytes", len(data))
	}
	return true
}

// load reads the turns an earlier owner left, its permission requests,
// the members' usage, the budgets and the prices.
func (j *journal) load() (loaded, error) {
	const op = "restore rendezvous"
	recs, err := j.Load()
	if err != nil {
		return loaded{}, withOp(op, err)
	}
	var l loaded
	seen := map[string]bool{}
	decodePerm := func(data []byte) (PermissionRequest, bool, bool) {
		req, isPerm, valid := permit.Decode(data)
		return req, isPerm, valid && names.Agent(req.Member) == nil
	}
	for _, data := range recs {
		if decodeInto(j, data, usage.DecodeBudget, &l.budgets, "budget") ||
			decodeInto(j, data, usage.DecodePrices, &l.prices, "prices") ||
			decodeInto(j, data, usage.Decode, &l.usages, "usage") ||
			decodeInto(j, data, decodePerm, &l.perms, "permission") {
			continue
		}
		var rec turnRecord
		if json.Unmarshal(data, &rec) != nil || rec.ID == "" || rec.Ticket == "" || seen[rec.ID] || !rec.valid() {
			j.log("fleetstate: skip unreadable turn record", "bytes", len(data)) // not its content: briefs stay out of logs
			continue
		}
		if rec.State == TicketDone && rec.Held == nil {
			continue
		}
		seen[rec.ID] = true
		l.turns = append(l.turns, &turn{turnRecord: rec})
	}
	sort.Slice(l.turns, func(i, k int) bool { return l.turns[i].Seq < l.turns[k].Seq })
	return l, nil
}

// valid reports whether a record read back could have been written by a
// rendezvous: a known state, and a lead and member with valid names. A
// record that is not would restore as a ticket that can never end.
func (rec *turnRecord) valid() bool {
	switch rec.State {
	case TicketQueued, TicketWorking, TicketQuestion, TicketDone:
	default:
		return false
	}
	return names.Agent(rec.Lead) == nil && names.Agent(rec.Member) == nil
}
