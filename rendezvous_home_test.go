package fleetstate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/afero"
)

// Where the rendezvous suites keep their fleets.
//
// The flow and failure suites of the rendezvous (rendezvous_test.go,
// rendezvous_owner_test.go, rendezvous_port_test.go, events_test.go,
// rendezvous_disconnect_test.go, rendezvous_delegate_test.go,
// rendezvous_held_test.go and the state machine of
// rendezvous_rapid_test.go) open their rendezvous through a
// home, so that the same tests run on both backends: by default on a
// state directory of an in-memory file system; with
// FLEETSTATE_TEST_BACKEND=nats on a fresh fleet of the JetStream server at
// FLEETSTATE_TEST_NATS_URL (package fleetnats: its store as the store's
// Backend, its ownership as the rendezvous's Journal). The tests of
// package fleetnats start a server and run these suites so in a child go
// test: this package links the NATS client only, never the server.
//
// A test whose subject only a state directory has (the flock of the
// owner, the journal's slot files, faults of a disk) calls fileOnly and
// is skipped on JetStream.
//
// Most of the suites run in synctest bubbles, and a bubble must not share
// channels with goroutines outside it, as a NATS connection's are. So every
// call to NATS goes through natsRunner, whose goroutines live outside any
// bubble: to the bubble such a call is blocking I/O, which is not durably
// blocking, so fake time stands still while it runs, as it does while a
// state directory is written.

const (
	// envTestBackend selects the home of the rendezvous suites: "nats"
	// for JetStream, empty for the in-memory file system.
	envTestBackend = "FLEETSTATE_TEST_BACKEND"
	// envHomeNATSURL is the JetStream server of the "nats" home.
	envHomeNATSURL = "FLEETSTATE_TEST_NATS_URL"
	// homeNATSTimeout bounds each call of the tests to the server, in
	// real time.
	homeNATSTimeout = 10 * time.Second
)

// homeOnNATS reports whether the suites run on JetStream.
func homeOnNATS() bool { return os.Getenv(envTestBackend) == "nats" }

// fileOnly skips t when the suites run on JetStream: what it tests only a
// state directory has. In the default run it does nothing.
func fileOnly(t *testing.T, why string) {
	t.Helper()
	if homeOnNATS() {
		t.Skip("file backend only: " + why)
	}
}

// homeTB is what a home needs of a test: *testing.T and *rapid.T have it.
type homeTB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// A home is where one test's fleet lives. A rendezvous opened in it is
// closed when the test ends.
type home interface {
	// open opens a store and a rendezvous on the fleet, the rendezvous
	// restoring what an earlier one left. While another rendezvous owns
	// the fleet it fails with fleetstate.ErrFleetOwned.
	open(t homeTB, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous, error)
	// crashed finishes fleetstate.Crash of the last rendezvous opened, as
	// the world around a killed process does: a state directory's lock is
	// already released; a JetStream lease runs out.
	crashed(t homeTB)
}

// newHome returns a fresh home for one test.
func newHome(t homeTB) home {
	t.Helper()
	if !homeOnNATS() {
		return &fileHome{fs: afero.NewMemMapFs()}
	}
	if natsTests == nil {
		t.Fatalf("%s=nats without %s: no JetStream server to run on", envTestBackend, envHomeNATSURL)
	}
	return natsTests.newHome(t)
}

// fileHome keeps the fleet in the state directory /state of fs.
type fileHome struct{ fs afero.Fs }

func (h *fileHome) open(t homeTB, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous, error) {
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

func (h *fileHome) crashed(homeTB) {}

// openRendezvous opens a rendezvous in h, failing the test if it cannot.
func openRendezvous(t homeTB, h home, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous) {
	t.Helper()
	st, r, err := h.open(t, opts)
	if err != nil {
		t.Fatalf("opening a rendezvous: %v", err)
	}
	return st, r
}

// natsTests is the connection of the "nats" home, set up by TestMain
// (see withHome) before any test runs, so that no bubble holds it.
var natsTests *natsRunner

// withHome returns m, made to connect to the JetStream server first when
// the suites run on it, and to disconnect before goleak looks.
func withHome(m *testing.M) interface{ Run() int } {
	if !homeOnNATS() {
		return m
	}
	return homeMain{m}
}

type homeMain struct{ m *testing.M }

func (h homeMain) Run() int {
	url := os.Getenv(envHomeNATSURL)
	if url == "" {
		fmt.Fprintf(os.Stderr, "%s=nats needs %s, the URL of a JetStream server\n", envTestBackend, envHomeNATSURL)
		return 2
	}
	nc, err := nats.Connect(url, nats.Timeout(homeNATSTimeout))
	if err != nil {
		fmt.Fprintf(os.Stderr, "connecting to %s: %v\n", url, err)
		return 2
	}
	// The tests of package fleetnats look for this line.
	fmt.Printf("rendezvous suites on JetStream at %s\n", url)
	natsTests = &natsRunner{nc: nc, reqs: make(chan func())}
	go natsTests.loop()
	code := h.m.Run()
	natsTests.stop()
	natsTests = nil
	return code
}

// natsRunner makes the tests' calls to NATS in goroutines of its own,
// outside of any synctest bubble, on one connection.
type natsRunner struct {
	nc      *nats.Conn
	reqs    chan func() // made outside any bubble
	running sync.WaitGroup
}

func (x *natsRunner) loop() {
	for fn := range x.reqs {
		x.running.Go(fn)
	}
}

func (x *natsRunner) stop() {
	close(x.reqs)
	x.running.Wait()
	x.nc.Close()
}

// do runs fn with a context bounded by homeNATSTimeout in a goroutine
// outside any bubble, and returns when fn has. It waits on a mutex, not a
// channel: a channel made in a bubble must not be touched outside it.
func (x *natsRunner) do(fn func(ctx context.Context)) {
	var done sync.Mutex
	done.Lock()
	x.reqs <- func() {
		defer done.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), homeNATSTimeout)
		defer cancel()
		fn(ctx)
	}
	done.Lock()
}

// natsHome keeps the fleet in a fleet of its own on the server, whose
// streams are deleted when the test ends.
type natsHome struct {
	x     *natsRunner
	fleet *fleetnats.Fleet

	mu    sync.Mutex
	owned []*fleetnats.Ownership // every ownership taken, to end at cleanup
	last  *fleetnats.Ownership   // that of the last rendezvous opened
}

func (x *natsRunner) newHome(t homeTB) *natsHome {
	t.Helper()
	name := "t" + strings.ReplaceAll(uuid.NewString(), "-", "")[:24]
	h := &natsHome{x: x}
	var err error
	x.do(func(ctx context.Context) {
		h.fleet, err = fleetnats.Connect(ctx, fleetnats.Options{Conn: x.nc, Fleet: name, Timeout: homeNATSTimeout})
	})
	if err != nil {
		t.Fatalf("fleetnats.Connect(%s): %v", name, err)
	}
	t.Cleanup(func() { h.cleanup(t) })
	return h
}

func (h *natsHome) open(t homeTB, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous, error) {
	t.Helper()
	var o fleetstate.RendezvousOptions
	if opts != nil {
		o = *opts
	}
	var (
		own *fleetnats.Ownership
		err error
	)
	h.x.do(func(ctx context.Context) {
		own, err = h.fleet.Own(ctx, fleetnats.OwnOptions{Addr: o.Addr})
	})
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	h.owned = append(h.owned, own)
	h.mu.Unlock()
	st := fleetstate.OpenBackend(&homeBackend{x: h.x, b: h.fleet.Store().(fleetstate.OwnedBackend)}, nil)
	o.Journal = &homeJournal{x: h.x, o: own}
	r, err := fleetstate.NewRendezvous(st, &o)
	if err != nil {
		h.x.do(func(context.Context) { own.Close() })
		return nil, nil, err
	}
	h.mu.Lock()
	h.last = own
	h.mu.Unlock()
	t.Cleanup(func() { r.Close() })
	return st, r, nil
}

// crashed abandons the last ownership, which stops renewing its lease and
// fences its later writes out, and removes the lease, as its TTL would.
func (h *natsHome) crashed(t homeTB) {
	t.Helper()
	h.mu.Lock()
	own := h.last
	h.last = nil
	h.mu.Unlock()
	if own == nil {
		t.Fatalf("crashed: no rendezvous was opened")
	}
	var err error
	h.x.do(func(ctx context.Context) {
		own.Abandon()
		var kv jetstream.KeyValue
		if kv, err = h.fleet.JetStream().KeyValue(ctx, h.fleet.Name()+"-owner"); err == nil {
			err = kv.Purge(ctx, "owner")
		}
	})
	if err != nil {
		t.Fatalf("expiring the lease of fleet %s: %v", h.fleet.Name(), err)
	}
}

// cleanup ends every ownership (a closed rendezvous closed its own) and
// deletes the fleet's streams.
func (h *natsHome) cleanup(t homeTB) {
	h.mu.Lock()
	owned := h.owned
	h.mu.Unlock()
	var errs []error
	h.x.do(func(ctx context.Context) {
		for _, o := range owned {
			o.Abandon() // only stops the renewal of one not closed yet
		}
		// Names only: the tests that open a fleet in each of hundreds of
		// rounds leave that many on the server until they end.
		l := h.fleet.JetStream().StreamNames(ctx)
		var names []string
		for n := range l.Name() {
			if strings.Contains(n, "_"+h.fleet.Name()+"-") { // KV_NAME-turns, ...
				names = append(names, n)
			}
		}
		errs = append(errs, l.Err())
		for _, n := range names {
			errs = append(errs, h.fleet.JetStream().DeleteStream(ctx, n))
		}
		h.fleet.Close()
	})
	if err := errors.Join(errs...); err != nil {
		t.Errorf("deleting the streams of fleet %s: %v", h.fleet.Name(), err)
	}
}

// homeBackend is a fleet's store, called through the runner.
type homeBackend struct {
	x *natsRunner
	b fleetstate.OwnedBackend
}

func (p *homeBackend) CurrentSession(context.Context) (sess fleetstate.Session, ok bool, err error) {
	p.x.do(func(ctx context.Context) { sess, ok, err = p.b.CurrentSession(ctx) })
	return sess, ok, err
}

func (p *homeBackend) StartSession(_ context.Context, next fleetstate.Session) (err error) {
	p.x.do(func(ctx context.Context) { err = p.b.StartSession(ctx, next) })
	return err
}

func (p *homeBackend) Put(_ context.Context, id fleetstate.FileID, content []byte, overwrite bool) (err error) {
	p.x.do(func(ctx context.Context) { err = p.b.Put(ctx, id, content, overwrite) })
	return err
}

func (p *homeBackend) Get(_ context.Context, id fleetstate.FileID) (data []byte, err error) {
	p.x.do(func(ctx context.Context) { data, err = p.b.Get(ctx, id) })
	return data, err
}

func (p *homeBackend) List(_ context.Context, session, agent string) (files []fleetstate.FileInfo, exists bool, err error) {
	p.x.do(func(ctx context.Context) { files, exists, err = p.b.List(ctx, session, agent) })
	return files, exists, err
}

func (p *homeBackend) Clean(context.Context) (err error) {
	p.x.do(func(ctx context.Context) { err = p.b.Clean(ctx) })
	return err
}

func (p *homeBackend) FleetOwner(context.Context) (o fleetstate.Owner, ok bool, err error) {
	p.x.do(func(ctx context.Context) { o, ok, err = p.b.FleetOwner(ctx) })
	return o, ok, err
}

// homeJournal is an ownership's journal, called through the runner.
type homeJournal struct {
	x *natsRunner
	o *fleetnats.Ownership
}

func (j *homeJournal) Load(context.Context) (recs [][]byte, err error) {
	j.x.do(func(ctx context.Context) { recs, err = j.o.Load(ctx) })
	return recs, err
}

func (j *homeJournal) Save(_ context.Context, id string, rec []byte) (err error) {
	j.x.do(func(ctx context.Context) { err = j.o.Save(ctx, id, rec) })
	return err
}

func (j *homeJournal) Release(_ context.Context, id string) (err error) {
	j.x.do(func(ctx context.Context) { err = j.o.Release(ctx, id) })
	return err
}

func (j *homeJournal) Reset(context.Context) (err error) {
	j.x.do(func(ctx context.Context) { err = j.o.Reset(ctx) })
	return err
}

func (j *homeJournal) Close() (err error) {
	j.x.do(func(context.Context) { err = j.o.Close() })
	return err
}
