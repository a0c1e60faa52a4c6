package fleetnats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStoreSuite runs the store contract (package fleetstatetest), the
// same tests a state directory passes, on JetStream: each store on a
// fleet of its own on one server, so that the tests are as isolated as
// tests on fresh file systems.
func TestStoreSuite(t *testing.T) {
	srv := natstest.Run(t)
	fleetstatetest.TestBackend(t, func(t *testing.T) fleetstate.Backend { return newTestFleet(t, srv.URL()) })
}

// TestStoreStateMachine runs the store's state machine (package
// fleetstatetest) on JetStream, each run on a fleet of its own.
func TestStoreStateMachine(t *testing.T) {
	srv := natstest.Run(t)
	fleetstatetest.TestStoreStateMachine(t, func(t *testing.T) *fleetstate.Store {
		return fleetstate.OpenBackend(newTestFleet(t, srv.URL()), nil)
	})
}

// TestJournalSuite runs the journal contract (package fleetstatetest) on
// the ownerships of fleets on one server, a fleet per test. An ownership
// expires as a lease does when its TTL runs out: its key is purged, and
// the ownership, which is not told, must be fenced out of the turns.
func TestJournalSuite(t *testing.T) {
	srv := natstest.Run(t)
	fleetstatetest.TestJournal(t, func(t *testing.T) fleetstatetest.JournalFleet {
		return journalFleet{newTestFleet(t, srv.URL()).fleet}
	})
}

// journalFleet takes the ownership of a fleet.
type journalFleet struct{ f *fleetnats.Fleet }

func (f journalFleet) Own(fleetstatetest.TB) (fleetstate.Journal, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	o, err := f.f.Own(ctx, fleetnats.OwnOptions{})
	if err != nil {
		return nil, err // a nil *Ownership is no nil Journal
	}
	return o, nil
}

func (f journalFleet) Expire(t fleetstatetest.TB, _ fleetstate.Journal) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	kv, err := f.f.JetStream().KeyValue(ctx, f.f.Name()+"-owner")
	if err == nil {
		err = kv.Purge(ctx, "owner")
	}
	if err != nil {
		t.Fatalf("expiring the lease of fleet %s: %v", f.f.Name(), err)
	}
	return true
}

// testFleet is a fleet's store with what the store suite needs to look at
// it from outside: its run log and snapshots of its streams.
type testFleet struct {
	fleetstate.Backend
	fleet *fleetnats.Fleet
}

// fleetName returns a fresh name for a fleet of one test.
func fleetName() string { return "t" + strings.ReplaceAll(uuid.NewString(), "-", "")[:24] }

// newTestFleet connects to a fresh fleet on the server at url, whose
// streams are deleted when the test ends.
func newTestFleet(t *testing.T, url string) *testFleet {
	t.Helper()
	name := fleetName()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	f, err := fleetnats.Connect(ctx, fleetnats.Options{URL: url, Fleet: name, Timeout: callTimeout})
	if err != nil {
		t.Fatalf("fleetnats.Connect(%s): %v", url, err)
	}
	b := &testFleet{Backend: f.Store(), fleet: f}
	t.Cleanup(func() {
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := deleteStreams(ctx, f); err != nil {
			t.Errorf("deleting the streams of fleet %s: %v", name, err)
		}
	})
	return b
}

// RunLog is the run log of the fleet's store.
func (b *testFleet) RunLog(ctx context.Context) (string, error) {
	return b.Backend.(fleetstatetest.RunLogger).RunLog(ctx)
}

// Snapshot records the last sequence and the number of messages of each
// stream of the fleet that ever held one: any write to the fleet changes
// it. A stream made but never written to is no change of the store's
// state, and is left out.
func (b *testFleet) Snapshot(ctx context.Context) (map[string]string, error) {
	streams, err := fleetStreams(ctx, b.fleet)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, si := range streams {
		if si.State.LastSeq > 0 {
			out[si.Config.Name] = fmt.Sprintf("last sequence %d, %d messages", si.State.LastSeq, si.State.Msgs)
		}
	}
	return out, nil
}

// fleetStreams returns the streams of fleet f: those whose name holds
// "_FLEET-" (KV_FLEET-files, ...).
func fleetStreams(ctx context.Context, f *fleetnats.Fleet) ([]*jetstream.StreamInfo, error) {
	l := f.JetStream().ListStreams(ctx)
	var out []*jetstream.StreamInfo
	for si := range l.Info() {
		if strings.Contains(si.Config.Name, "_"+f.Name()+"-") {
			out = append(out, si)
		}
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("listing the streams of fleet %s: %w", f.Name(), err)
	}
	return out, nil
}

// deleteStreams deletes the streams of fleet f. It lists names only: the
// tests that open a fleet in each of hundreds of rounds leave that many on
// the server until they end.
func deleteStreams(ctx context.Context, f *fleetnats.Fleet) error {
	l := f.JetStream().StreamNames(ctx)
	var names []string
	for n := range l.Name() {
		if strings.Contains(n, "_"+f.Name()+"-") {
			names = append(names, n)
		}
	}
	errs := []error{l.Err()}
	for _, n := range names {
		errs = append(errs, f.JetStream().DeleteStream(ctx, n))
	}
	return errors.Join(errs...)
}
