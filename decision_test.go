package fleetstate_test

import (
	"testing"

	"github.com/fleetstate/fleetstate/fleetmem"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/spf13/afero"
)

// TestUnconfirmedDecisionDisk runs the contract of a decision whose write
// failed on the journal of a state directory.
func TestUnconfirmedDecisionDisk(t *testing.T) {
	fleetstatetest.TestUnconfirmedDecision(t, func(t *testing.T) fleetstatetest.JournalFleet {
		return diskFleet{open(t, afero.NewMemMapFs(), "/state", nil)}
	})
}

// TestUnconfirmedDecisionMem runs it on the memory backend's journal.
func TestUnconfirmedDecisionMem(t *testing.T) {
	fleetstatetest.TestUnconfirmedDecision(t, func(*testing.T) fleetstatetest.JournalFleet { return memFleet{new(fleetmem.Fleet)} })
}
