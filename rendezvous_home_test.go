package fleetstate_test

import (
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/spf13/afero"
)

// TestRendezvous runs the rendezvous's flow and failure suites (package
// fleetstatetest) on state directories of in-memory file systems, one per
// test. The tests of package fleetnats run them on JetStream.
func TestRendezvous(t *testing.T) { fleetstatetest.TestRendezvous(t, newFileHome) }

// TestRendezvousStateMachine runs the rendezvous's state machine (package
// fleetstatetest) on state directories of in-memory file systems,
// comparing every ticket as the rendezvous holds it with the model.
func TestRendezvousStateMachine(t *testing.T) {
	fleetstatetest.TestRendezvousStateMachine(t, newFileHome)
}

// fileHome keeps a fleet in the state directory /state of fs.
type fileHome struct{ fs afero.Fs }

func newFileHome(fleetstatetest.TB) fleetstatetest.Home { return &fileHome{fs: afero.NewMemMapFs()} }

func (h *fileHome) Open(t fleetstatetest.TB, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous, error) {
	t.Helper()
	st, err := fleetstate.Open(h.fs, "/state", nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	r, err := fleetstate.NewRendezvous(st, opts)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { r.Close() })
	return st, r, nil
}

// Crash crashes r; the lock of the state directory is released with it,
// as the operating system releases a dead process's.
func (h *fileHome) Crash(_ fleetstatetest.TB, r *fleetstate.Rendezvous) { fleetstate.Crash(r) }
