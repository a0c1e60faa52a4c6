package fleetstatetest_test

import (
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetmem"
	"github.com/fleetstate/fleetstate/fleetstatetest"
)

// TestJournal runs the journal contract on package fleetmem's journal,
// the smallest that keeps it: a check of the suite itself.
func TestJournal(t *testing.T) {
	fleetstatetest.TestJournal(t, func(*testing.T) fleetstatetest.JournalFleet { return memFleet{new(fleetmem.Fleet)} })
}

// memFleet is a fleetmem.Fleet as the suite takes a fleet.
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
