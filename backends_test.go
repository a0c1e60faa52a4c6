package fleetstate_test

import (
	"sync"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetmem"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/spf13/afero"
)

// The disk's journal and the memory backend pass the suites that the
// disk's store (TestStore, TestRendezvous) and JetStream (package
// fleetnats) pass.

// TestDiskJournal runs the journal contract on the journal of a state
// directory: its slot files and held log.
func TestDiskJournal(t *testing.T) {
	fleetstatetest.TestJournal(t, func(t *testing.T) fleetstatetest.JournalFleet {
		return diskFleet{open(t, afero.NewMemMapFs(), "/state", nil)}
	})
}

// diskFleet takes the ownership of a state directory's fleet.
type diskFleet struct{ st *fleetstate.Store }

func (f diskFleet) Own(fleetstatetest.TB) (fleetstate.Journal, error) { return f.st.OpenJournal("") }

// Expire reports false: a state directory's ownership ends only with its
// owner's process.
func (diskFleet) Expire(fleetstatetest.TB, fleetstate.Journal) bool { return false }

// TestMemBackend runs the store contract on the memory backend.
func TestMemBackend(t *testing.T) {
	fleetstatetest.TestBackend(t, func(*testing.T) fleetstate.Backend { return new(fleetmem.Backend) })
}

// TestMemStoreStateMachine runs the store's state machine on the memory
// backend.
func TestMemStoreStateMachine(t *testing.T) {
	fleetstatetest.TestStoreStateMachine(t, func(*testing.T) *fleetstate.Store {
		return fleetstate.OpenBackend(new(fleetmem.Backend), nil)
	})
}

// TestMemJournal runs the journal contract on the memory backend's
// journal.
func TestMemJournal(t *testing.T) {
	fleetstatetest.TestJournal(t, func(*testing.T) fleetstatetest.JournalFleet { return memFleet{new(fleetmem.Fleet)} })
}

type memFleet struct{ f *fleetmem.Fleet }

func (m memFleet) Own(fleetstatetest.TB) (fleetstate.Journal, error) {
	j, err := m.f.Own()
	if err != nil {
		return nil, err
	}
	return j, nil
}

func (m memFleet) Expire(_ fleetstatetest.TB, j fleetstate.Journal) bool {
	m.f.Expire(j.(*fleetmem.Journal))
	return true
}

// TestMemRendezvous runs the rendezvous's flow and failure suites on the
// memory backend: its store and its journal.
func TestMemRendezvous(t *testing.T) { fleetstatetest.TestRendezvous(t, newMemHome) }

// TestMemRendezvousStateMachine runs the rendezvous's state machine on the
// memory backend.
func TestMemRendezvousStateMachine(t *testing.T) {
	fleetstatetest.TestRendezvousStateMachine(t, newMemHome)
}

// memHome keeps a fleet in the memory backend.
type memHome struct {
	b *fleetmem.Backend
	f *fleetmem.Fleet

	mu       sync.Mutex
	journals map[*fleetstate.Rendezvous]*fleetmem.Journal
}

func newMemHome(fleetstatetest.TB) fleetstatetest.Home {
	f := new(fleetmem.Fleet)
	return &memHome{b: f.Backend(), f: f, journals: map[*fleetstate.Rendezvous]*fleetmem.Journal{}}
}

func (h *memHome) Open(t fleetstatetest.TB, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous, error) {
	t.Helper()
	st := fleetstate.OpenBackend(h.b, nil)
	j, err := h.f.Own()
	if err != nil {
		return nil, nil, err
	}
	var o fleetstate.RendezvousOptions
	if opts != nil {
		o = *opts
	}
	o.Journal = j
	r, err := fleetstate.NewRendezvous(st, &o)
	if err != nil {
		j.Close()
		return nil, nil, err
	}
	h.mu.Lock()
	h.journals[r] = j
	h.mu.Unlock()
	t.Cleanup(func() { r.Close() })
	return st, r, nil
}

// Crash crashes r, whose ownership then runs out as a lease does.
func (h *memHome) Crash(_ fleetstatetest.TB, r *fleetstate.Rendezvous) {
	fleetstate.Crash(r)
	h.mu.Lock()
	j := h.journals[r]
	h.mu.Unlock()
	h.f.Expire(j)
}
