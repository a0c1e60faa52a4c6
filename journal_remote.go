package fleetstate

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"time"
)

// Journal keeps a rendezvous's turns somewhere other than its store's
// state directory: in a replicated engine that several daemons share, such
// as NATS JetStream (package fleetnats). Whoever holds a Journal owns the
// fleet: obtaining one is how a process becomes the fleet's only writer,
// and a Journal whose ownership passed to another process must fail every
// later write (fenced by the engine's compare-and-swap, not by clocks), so
// that two processes never both act on one turn.
//
// Records are opaque to a Journal: the rendezvous encodes and decodes them.
// The rendezvous calls a Journal from one goroutine at a time.
type Journal interface {
	// Load returns the last record saved of each turn not released since,
	// in any order.
	Load(ctx context.Context) ([][]byte, error)
	// Save writes rec as the record of the turn id, replacing the one
	// before. When it returns nil the record is durable; on an error the
	// record may or may not have been written, and if ownership was lost
	// the error has the code [CodeUnavailable].
	Save(ctx context.Context, id string, rec []byte) error
	// Release forgets the turn id.
	Release(ctx context.Context, id string) error
	// Reset forgets every turn.
	Reset(ctx context.Context) error
	// Close gives up the fleet's ownership; a later owner takes the turns
	// up from the records.
	Close() error
}

// DefaultJournalTimeout bounds each call of a rendezvous to a [Journal].
const DefaultJournalTimeout = 10 * time.Second

// openRemoteJournal wraps rj as the rendezvous's journal.
func openRemoteJournal(store *Store, rj Journal, logErr func(string, ...any)) *journal {
	return &journal{store: store, remote: rj, log: logErr}
}

func (j *journal) rctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), DefaultJournalTimeout)
}

// remotePersist saves rec as t's record in the remote journal.
func (j *journal) remotePersist(t *turn, rec *turnRecord) error {
	j.buf = appendRecord(j.buf[:0], rec)
	ctx, cancel := j.rctx()
	defer cancel()
	if err := j.remote.Save(ctx, t.ID, j.buf); err != nil {
		return withOp("persist turn", err)
	}
	return nil
}

// remoteSettle saves, in the remote journal, the records of the turns
// retired since the last settle (they now say when their hold ends), and
// forgets the turns released since. A failure only leaves a finished turn
// to be taken up again by a later owner, as a crash would: held until its
// hold's end, or, without that record, until acked.
func (j *journal) remoteSettle() {
	if len(j.released) == 0 && len(j.moving) == 0 {
		return
	}
	ctx, cancel := j.rctx()
	defer cancel()
	for _, m := range j.moving {
		if slices.Contains(j.released, m.t.ID) {
			continue // released in the same step: nothing to hold
		}
		j.buf = appendRecord(j.buf[:0], &m.rec)
		if err := j.remote.Save(ctx, m.t.ID, j.buf); err != nil {
			j.log("fleetstate: save the end of a returned outcome's hold", "turn", m.t.ID, "err", err)
		}
	}
	clear(j.moving)
	j.moving = j.moving[:0]
	for _, id := range j.released {
		if err := j.remote.Release(ctx, id); err != nil {
			j.log("fleetstate: release a finished turn", "turn", id, "err", err)
		}
	}
	j.released = j.released[:0]
}

func (j *journal) remoteReset() error {
	j.released, j.moving = nil, nil
	ctx, cancel := j.rctx()
	defer cancel()
	return withOp("reset", j.remote.Reset(ctx))
}

func (j *journal) remoteClose() {
	if err := j.remote.Close(); err != nil {
		j.log("fleetstate: close the journal", "err", err)
	}
}

// remoteLoad reads the turns an earlier owner left in the remote journal,
// oldest first.
func (j *journal) remoteLoad() ([]*turn, error) {
	const op = "restore rendezvous"
	ctx, cancel := j.rctx()
	defer cancel()
	recs, err := j.remote.Load(ctx)
	if err != nil {
		return nil, withOp(op, err)
	}
	var loaded []*turn
	seen := map[string]bool{}
	for _, data := range recs {
		var rec turnRecord
		if json.Unmarshal(data, &rec) != nil || rec.ID == "" || rec.Ticket == "" || seen[rec.ID] || !rec.valid() {
			j.log("fleetstate: skip unreadable turn record", "bytes", len(data)) // not its content: briefs stay out of logs
			continue
		}
		if rec.State == TicketDone && rec.Held == nil {
			continue
		}
		seen[rec.ID] = true
		loaded = append(loaded, &turn{turnRecord: rec})
	}
	sort.Slice(loaded, func(i, k int) bool { return loaded[i].Seq < loaded[k].Seq })
	return loaded, nil
}
