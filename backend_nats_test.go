package fleetstate_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// envTestNATS names the NATS server, with JetStream, that TestStoreNATS
// runs the store suite on. The tests of package fleetnats start one in
// their process and run this package's TestStoreNATS with it set: this
// package links only the NATS client, never the server, which takes long
// to build.
const envTestNATS = "FLEETSTATE_TEST_NATS_URL"

// natsTimeout bounds each call of the tests to the server.
const natsTimeout = 10 * time.Second

// TestStoreNATS runs the store suite on JetStream (package fleetnats),
// each store on a fleet of its own, so that tests sharing one server are
// as isolated as tests on fresh file systems.
func TestStoreNATS(t *testing.T) {
	url := os.Getenv(envTestNATS)
	if url == "" {
		t.Skip(envTestNATS + " is not set; the tests of package fleetnats run this suite on an embedded server")
	}
	runStoreSuite(t, storeMaker{backend: func(t *testing.T) fleetstate.Backend { return natsFleet(t, url) }})
}

// natsBackend is a fleet's store with what the suite's helpers need to
// look at it from outside: the fleet, for snapshots.
type natsBackend struct {
	fleetstate.Backend
	fleet *fleetnats.Fleet
}

// natsFleet connects to a fresh fleet on the server at url, whose streams
// are deleted when the test ends.
func natsFleet(t *testing.T, url string) *natsBackend {
	t.Helper()
	name := "t" + strings.ReplaceAll(uuid.NewString(), "-", "")[:24]
	ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
	defer cancel()
	f, err := fleetnats.Connect(ctx, fleetnats.Options{URL: url, Fleet: name, Timeout: natsTimeout})
	if err != nil {
		t.Fatalf("fleetnats.Connect(%s): %v", url, err)
	}
	b := &natsBackend{Backend: f.Store(), fleet: f}
	t.Cleanup(func() {
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
		defer cancel()
		for _, si := range b.streams(t, ctx) {
			if err := f.JetStream().DeleteStream(ctx, si.Config.Name); err != nil {
				t.Errorf("deleting stream %s of fleet %s: %v", si.Config.Name, name, err)
			}
		}
	})
	return b
}

// RunLog is the run log of the fleet's store.
func (b *natsBackend) RunLog(ctx context.Context) (string, error) {
	return b.Backend.(runLogReader).RunLog(ctx)
}

// streams returns the streams of the fleet: those whose name holds
// "_FLEET-" (KV_FLEET-files, ...).
func (b *natsBackend) streams(t tb, ctx context.Context) []*jetstream.StreamInfo {
	t.Helper()
	l := b.fleet.JetStream().ListStreams(ctx)
	var out []*jetstream.StreamInfo
	for si := range l.Info() {
		if strings.Contains(si.Config.Name, "_"+b.fleet.Name()+"-") {
			out = append(out, si)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("listing the streams of fleet %s: %v", b.fleet.Name(), err)
	}
	return out
}

// snapshot records the last sequence and the number of messages of each
// stream of the fleet that ever held one: any write to the fleet changes
// it. A stream made but never written to is no change of the store's
// state, and is left out.
func (b *natsBackend) snapshot(t tb) map[string]node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
	defer cancel()
	tree := map[string]node{}
	for _, si := range b.streams(t, ctx) {
		if si.State.LastSeq > 0 {
			tree[si.Config.Name] = node{data: fmt.Sprintf("last sequence %d, %d messages", si.State.LastSeq, si.State.Msgs)}
		}
	}
	return tree
}
