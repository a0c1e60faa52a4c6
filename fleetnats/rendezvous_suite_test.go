package fleetnats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// homeTimeout bounds each call of the rendezvous suites to the server, in
// real time.
const homeTimeout = 10 * time.Second

// homeLease is the lease of the suites' ownerships: no test waits for one
// to run out (Crash removes it), and on a loaded machine renewals may
// stall for longer than the default lease's half, which would end the
// ownership in the middle of a test.
const homeLease = time.Minute

// TestRendezvousSuite runs the rendezvous's flow and failure suites
// (package fleetstatetest), the same tests a state directory passes, on
// JetStream: each test's fleet a fresh one on one server, its store this
// package's store and its journal an ownership of the fleet.
func TestRendezvousSuite(t *testing.T) {
	x := newNATSRunner(t, natstest.Run(t).URL())
	fleetstatetest.TestRendezvous(t, x.newHome)
}

// TestRendezvousStateMachine runs the rendezvous's state machine (package
// fleetstatetest) on JetStream, each run on a fleet of its own, the
// tickets compared as the rendezvous's Snapshot shows them, as on the
// disk and in memory.
func TestRendezvousStateMachine(t *testing.T) {
	x := newNATSRunner(t, natstest.Run(t).URL())
	fleetstatetest.TestRendezvousStateMachine(t, x.newHome)
}

// natsRunner makes the suites' calls to NATS in goroutines of its own,
// outside of any synctest bubble, on one connection: a bubble must not
// share channels with goroutines outside it, as a connection's are. To
// the bubble such a call is blocking I/O, so fake time stands still while
// it runs.
type natsRunner struct {
	nc      *nats.Conn
	reqs    chan func() // made outside any bubble
	running sync.WaitGroup
}

// newNATSRunner connects to url and runs calls until the test ends.
func newNATSRunner(t *testing.T, url string) *natsRunner {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(homeTimeout))
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	x := &natsRunner{nc: nc, reqs: make(chan func())}
	go x.loop()
	t.Cleanup(x.stop)
	return x
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

// do runs fn with a context bounded by homeTimeout in a goroutine outside
// any bubble, and returns when fn has. It waits on a mutex, not a
// channel: a channel made in a bubble must not be touched outside it.
func (x *natsRunner) do(fn func(ctx context.Context)) {
	var done sync.Mutex
	done.Lock()
	x.reqs <- func() {
		defer done.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), homeTimeout)
		defer cancel()
		fn(ctx)
	}
	done.Lock()
}

// natsHome keeps a test's fleet in a fleet of its own on the server,
// whose streams are deleted when the test ends.
type natsHome struct {
	x     *natsRunner
	fleet *fleetnats.Fleet

	mu       sync.Mutex
	owned    []*fleetnats.Ownership // every ownership taken, to end at cleanup
	journals map[*fleetstate.Rendezvous]*homeJournal
}

func (x *natsRunner) newHome(t fleetstatetest.TB) fleetstatetest.Home {
	t.Helper()
	name := fleetName()
	h := &natsHome{x: x, journals: map[*fleetstate.Rendezvous]*homeJournal{}}
	var err error
	x.do(func(ctx context.Context) {
		h.fleet, err = fleetnats.Connect(ctx, fleetnats.Options{Conn: x.nc, Fleet: name, Timeout: homeTimeout})
	})
	if err != nil {
		t.Fatalf("fleetnats.Connect(%s): %v", name, err)
	}
	t.Cleanup(func() { h.cleanup(t) })
	return h
}

func (h *natsHome) Open(t fleetstatetest.TB, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous, error) {
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
		own, err = h.fleet.Own(ctx, fleetnats.OwnOptions{Addr: o.Addr, LeaseTTL: homeLease})
	})
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	h.owned = append(h.owned, own)
	h.mu.Unlock()
	st := fleetstate.OpenBackend(&homeBackend{x: h.x, b: h.fleet.Store().(fleetstate.OwnedBackend)}, nil)
	j := &homeJournal{x: h.x, o: own}
	o.Journal = j
	r, err := fleetstate.NewRendezvous(st, &o)
	if err != nil {
		h.x.do(func(context.Context) { own.Close() })
		return nil, nil, err
	}
	h.mu.Lock()
	h.journals[r] = j
	h.mu.Unlock()
	t.Cleanup(func() { r.Close() })
	return st, r, nil
}

// Crash closes r without giving up its ownership, which is then abandoned
// (it stops renewing its lease and fences its later writes out), and
// removes the lease, as its TTL would. A rendezvous on a Journal writes
// nothing when it closes but the journal's Close: closed with that
// skipped, it stops as a crashed one does.
func (h *natsHome) Crash(t fleetstatetest.TB, r *fleetstate.Rendezvous) {
	t.Helper()
	h.mu.Lock()
	j := h.journals[r]
	h.mu.Unlock()
	if j == nil {
		t.Fatalf("Crash: the rendezvous was not opened in this home")
	}
	j.crash()
	r.Close()
	var err error
	h.x.do(func(ctx context.Context) {
		j.o.Abandon()
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
func (h *natsHome) cleanup(t fleetstatetest.TB) {
	h.mu.Lock()
	owned := h.owned
	h.mu.Unlock()
	var err error
	h.x.do(func(ctx context.Context) {
		for _, o := range owned {
			o.Abandon() // only stops the renewal of one not closed yet
		}
		err = deleteStreams(ctx, h.fleet)
		h.fleet.Close()
	})
	if err != nil {
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

	mu      sync.Mutex
	crashed bool // Close leaves the ownership alone
}

// crash makes Close leave the ownership as it is, as a killed process
// does.
func (j *homeJournal) crash() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.crashed = true
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

func (j *homeJournal) Hold(_ context.Context, id string, rec []byte, saved bool) (err error) {
	j.x.do(func(ctx context.Context) { err = j.o.Hold(ctx, id, rec, saved) })
	return err
}

func (j *homeJournal) Flush(context.Context) (err error) {
	j.x.do(func(ctx context.Context) { err = j.o.Flush(ctx) })
	return err
}

func (j *homeJournal) Reset(context.Context) (err error) {
	j.x.do(func(ctx context.Context) { err = j.o.Reset(ctx) })
	return err
}

func (j *homeJournal) Close() (err error) {
	j.mu.Lock()
	crashed := j.crashed
	j.mu.Unlock()
	if crashed {
		return nil
	}
	j.x.do(func(context.Context) { err = j.o.Close() })
	return err
}
