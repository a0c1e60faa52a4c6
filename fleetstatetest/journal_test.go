package fleetstatetest_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetstatetest"
)

// TestJournal runs the journal contract on memFleet, the smallest journal
// that keeps it: a check of the suite itself.
func TestJournal(t *testing.T) {
	fleetstatetest.TestJournal(t, func(*testing.T) fleetstatetest.JournalFleet { return &memFleet{} })
}

// memFleet keeps a fleet's turns in a map; its ownership is an epoch,
// which each Own and Expire moves on, and which every write of a journal
// must still hold.
type memFleet struct {
	mu    sync.Mutex
	epoch int  // of the current ownership
	owned bool // a journal holds the current epoch
	turns map[string][]byte
}

type memJournal struct {
	f      *memFleet
	epoch  int
	closed bool // guarded by f.mu
}

func (f *memFleet) Own(fleetstatetest.TB) (fleetstate.Journal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owned {
		return nil, &fleetstate.Error{Code: fleetstate.CodeFleetOwned, Op: "own", Err: &fleetstate.OwnedError{Dir: "memory"}}
	}
	f.epoch++
	f.owned = true
	return &memJournal{f: f, epoch: f.epoch}, nil
}

func (f *memFleet) Expire(_ fleetstatetest.TB, j fleetstate.Journal) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j.(*memJournal).epoch == f.epoch {
		f.epoch++
		f.owned = false
	}
	return true
}

// write runs fn under the fleet's lock if j still owns it.
func (j *memJournal) write(fn func()) error {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	if j.closed || j.epoch != j.f.epoch {
		return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "journal", Err: errors.New("not the owner")}
	}
	fn()
	return nil
}

func (j *memJournal) Load(context.Context) ([][]byte, error) {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return slices.Collect(maps.Values(j.f.turns)), nil
}

func (j *memJournal) Save(_ context.Context, id string, rec []byte) error {
	return j.write(func() {
		if j.f.turns == nil {
			j.f.turns = map[string][]byte{}
		}
		j.f.turns[id] = slices.Clone(rec)
	})
}

func (j *memJournal) Release(_ context.Context, id string) error {
	return j.write(func() { delete(j.f.turns, id) })
}

func (j *memJournal) Reset(context.Context) error {
	return j.write(func() { clear(j.f.turns) })
}

func (j *memJournal) Close() error {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	if !j.closed && j.epoch == j.f.epoch {
		j.f.owned = false
	}
	j.closed = true
	return nil
}
