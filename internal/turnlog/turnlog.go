// Package turnlog is the rendezvous's side of its journal: it bounds each
// call, gathers the records of the turns handed during one writer's step
// so that the step's end holds them in one go, and logs the failures no
// caller hears of.
//
// A Log does not lock: its caller, the rendezvous, calls it from one
// writer at a time (under its writers' lock).
package turnlog

import (
	"context"
	"slices"
	"time"
)

// Journal is the seam a Log writes through. It is the method set of
// fleetstate.Journal, restated here so that this package does not import
// the root; the root's documentation is the contract.
type Journal interface {
	Load(ctx context.Context) ([][]byte, error)
	Save(ctx context.Context, id string, rec []byte) error
	Hold(ctx context.Context, id string, rec []byte, saved bool) error
	Release(ctx context.Context, id string) error
	Flush(ctx context.Context) error
	Reset(ctx context.Context) error
	Close() error
}

// Log wraps a Journal. The zero Log is not usable; call New.
type Log struct {
	j       Journal
	timeout time.Duration // of each call to j; zero means none
	log     func(msg string, args ...any)
	held    []held // records that the next Settle holds
	arena   []byte // their bytes, reused from one step to the next
	closed  bool   // nothing more is written: closed, or crashed
}

// held is a record due to be held: arena[start:end].
type held struct {
	id         string
	start, end int
	saved      bool
}

// New returns a Log on j. With a positive timeout each call to j gets a
// deadline that far ahead; a journal that waits on no one (the disk's)
// gets none, and a round trip allocates no timer. log receives what no
// caller hears of.
func New(j Journal, timeout time.Duration, log func(msg string, args ...any)) *Log {
	return &Log{j: j, timeout: timeout, log: log}
}

// Journal returns the journal l writes through.
func (l *Log) Journal() Journal { return l.j }

// Closed reports whether l writes nothing more.
func (l *Log) Closed() bool { return l.closed }

func (l *Log) ctx() (context.Context, context.CancelFunc) {
	if l.timeout <= 0 {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), l.timeout)
}

// Load reads every record an earlier owner left.
func (l *Log) Load() ([][]byte, error) {
	ctx, cancel := l.ctx()
	defer cancel()
	return l.j.Load(ctx)
}

// Save writes rec as the record of id, durably when it returns nil.
func (l *Log) Save(id string, rec []byte) error {
	ctx, cancel := l.ctx()
	defer cancel()
	return l.j.Save(ctx, id, rec)
}

// Release forgets id, and a hold of it that is still due.
func (l *Log) Release(id string) error {
	l.Unhold(id)
	ctx, cancel := l.ctx()
	defer cancel()
	return l.j.Release(ctx, id)
}

// Forget releases id and logs a failure, which no caller hears of: what
// it leaves is taken up by a later owner, as after a crash. what says what
// id is, for the log.
func (l *Log) Forget(id, what string) {
	if err := l.Release(id); err != nil {
		l.log("fleetstate: forget "+what, "id", id, "err", err)
	}
}

// Hold notes that rec, as it stands now, is to be held as id's record at
// the next Settle; saved says rec is the record last saved. rec is copied.
func (l *Log) Hold(id string, rec []byte, saved bool) {
	if l.closed {
		return
	}
	start := len(l.arena)
	l.arena = append(l.arena, rec...)
	l.held = append(l.held, held{id: id, start: start, end: len(l.arena), saved: saved})
}

// Unhold undoes a Hold of id that Settle has not carried out yet.
func (l *Log) Unhold(id string) {
	l.held = slices.DeleteFunc(l.held, func(h held) bool { return h.id == id })
}

// Settle ends a writer's step: it holds the records noted since the last
// one and flushes what the journal put off. A failure is logged: it only
// leaves a finished turn to be taken up again later, as a crash would.
func (l *Log) Settle() {
	if l.closed {
		return
	}
	ctx, cancel := l.ctx()
	defer cancel()
	for _, h := range l.held {
		if err := l.j.Hold(ctx, h.id, l.arena[h.start:h.end], h.saved); err != nil {
			l.log("fleetstate: hold a returned outcome", "turn", h.id, "err", err)
		}
	}
	clear(l.held)
	l.held, l.arena = l.held[:0], l.arena[:0]
	if err := l.j.Flush(ctx); err != nil {
		l.log("fleetstate: flush the journal", "err", err)
	}
}

// Reset forgets every record, and every hold still due.
func (l *Log) Reset() error {
	l.held, l.arena = l.held[:0], l.arena[:0]
	ctx, cancel := l.ctx()
	defer cancel()
	return l.j.Reset(ctx)
}

// Close settles what is due and gives the journal's ownership up.
func (l *Log) Close() {
	if l.closed {
		return
	}
	l.Settle()
	l.closed = true
	if err := l.j.Close(); err != nil {
		l.log("fleetstate: close the journal", "err", err)
	}
}

// Crash writes nothing more, as a process killed at this instant would
// (for tests of restarts). A journal that can be abandoned, as the disk's
// can, gives its ownership up as the kernel would.
func (l *Log) Crash() {
	l.closed = true
	if a, ok := l.j.(interface{ Abandon() }); ok {
		a.Abandon()
	}
}
