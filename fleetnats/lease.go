package fleetnats

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// How a fleet on JetStream gets one owner.
//
// The owner is the daemon whose rendezvous runs the fleet's turns; every
// other daemon forwards to it. Ownership is a lease: the key "owner" of
// the bucket NAME-owner, created with Create (so one contender wins) and
// kept alive by an Update on its revision every LeaseTTL/3. The bucket's
// TTL removes a lease its holder stopped renewing, a crashed daemon's
// say, and a contender's next Create wins it.
//
// A lease alone does not fence: a holder that was cut off may not know
// yet that its lease ran out. The turns are fenced by the stream instead:
// every write to NAME-turns expects the stream's last sequence to be the
// one this owner wrote last, and a new owner begins by writing an epoch
// record there. From then on every write of the old owner fails, so two
// daemons never both act on one turn, whatever their clocks say.

// ErrLeasePassed is why an [Ownership] was lost when another daemon holds
// the lease now: the fleet has a new owner, rather than none this daemon
// can reach.
var ErrLeasePassed = errors.New("the lease passed to another daemon")

// DefaultLeaseTTL is how long a lease lives unrenewed when
// [OwnOptions.LeaseTTL] is zero: the longest a fleet waits for a new owner
// after its owner died.
const DefaultLeaseTTL = 5 * time.Second

const (
	ownerBucket = "owner"
	ownerKey    = "owner"
)

// OwnerRecord is what the lease says of its holder.
type OwnerRecord struct {
	ID    string    `json:"id"` // this ownership's own ID, fresh each time
	PID   int       `json:"pid"`
	Addr  string    `json:"addr,omitempty"` // where the owner serves the fleet
	Host  string    `json:"host,omitempty"`
	Since time.Time `json:"since"`
}

// Owner returns the record as the root package describes an owner.
func (o OwnerRecord) Owner() fleetstate.Owner {
	return fleetstate.Owner{PID: o.PID, Addr: o.Addr, Since: o.Since}
}

// OwnOptions configure [Fleet.Own].
type OwnOptions struct {
	// Addr says where this daemon serves the fleet, so that the others
	// can forward to it.
	Addr string
	// LeaseTTL: see DefaultLeaseTTL. Every daemon of a fleet must use the
	// same; the bucket keeps the first one's.
	LeaseTTL time.Duration
}

// ownerKV returns the fleet's owner bucket, created with the lease's ttl
// if it does not exist.
func (f *Fleet) ownerKV(ctx context.Context, ttl time.Duration) (jetstream.KeyValue, error) {
	return f.kv(ctx, ownerBucket, jetstream.KeyValueConfig{
		Description: "the owner of the fleet " + f.name + ": a lease",
		History:     1,
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
	})
}

// Owner returns the fleet's owner. ok is false when the fleet has none.
func (f *Fleet) Owner(ctx context.Context) (rec OwnerRecord, ok bool, err error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	// The lease's bucket is looked up, never created here: its TTL is
	// the lease's, which the first daemon to own the fleet sets (--lease),
	// not a reader that came first.
	f.mu.Lock()
	kv, ok := f.buckets[ownerBucket]
	f.mu.Unlock()
	if !ok {
		var err error
		kv, err = f.js.KeyValue(ctx, f.bucketName(ownerBucket))
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return OwnerRecord{}, false, nil
		}
		if err != nil {
			return OwnerRecord{}, false, unavailable("read the fleet's owner", err)
		}
	}
	e, err := kv.Get(ctx, ownerKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return OwnerRecord{}, false, nil
	}
	if err != nil {
		return OwnerRecord{}, false, unavailable("read the fleet's owner", err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return OwnerRecord{}, false, unavailable("read the fleet's owner", err)
	}
	return rec, true, nil
}

// Ownership is this daemon's lease on the fleet and the fleet's journal
// ([fleetstate.Journal]), which only the lease's holder writes. Pass it as
// [fleetstate.RendezvousOptions.Journal]; closing the rendezvous closes it
// and gives the lease up.
type Ownership struct {
	f     *Fleet
	kv    jetstream.KeyValue
	rec   OwnerRecord
	ttl   time.Duration
	turns *turnLog
	lost  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	rev   uint64 // the lease's revision
	// held is when the last renewal that went through began, or the
	// lease's creation: the lease is held for a TTL from then at least.
	held   time.Time
	why    error // why the ownership was lost
	closed bool
	// releasing holds the turns Release was told of, for Flush. The
	// rendezvous calls the Journal methods one at a time.
	releasing []string
}

// Own makes this daemon the fleet's owner, or fails with
// [fleetstate.ErrFleetOwned] (its detail a [*fleetstate.OwnedError] naming
// the owner) while another daemon holds the lease.
func (f *Fleet) Own(ctx context.Context, opts OwnOptions) (*Ownership, error) {
	const op = "own the fleet"
	ttl := opts.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	cctx, cancel := f.ctx(ctx)
	defer cancel()
	kv, err := f.ownerKV(cctx, ttl)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	rec := OwnerRecord{ID: uuid.NewString(), PID: os.Getpid(), Addr: opts.Addr, Host: host, Since: time.Now().UTC().Truncate(time.Millisecond)}
	data, _ := json.Marshal(rec)
	began := time.Now()
	rev, err := kv.Create(cctx, ownerKey, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		cur, ok, rerr := f.Owner(ctx)
		if rerr != nil {
			return nil, rerr
		}
		if !ok {
			// It went away between the two calls: the caller tries again.
			return nil, &fleetstate.Error{Code: fleetstate.CodeFleetOwned, Op: op, Err: &fleetstate.OwnedError{Dir: f.Where()}}
		}
		return nil, &fleetstate.Error{Code: fleetstate.CodeFleetOwned, Op: op, Err: &fleetstate.OwnedError{Dir: f.Where(), Owner: cur.Owner()}}
	}
	if err != nil {
		return nil, unavailable(op, err)
	}
	o := &Ownership{f: f, kv: kv, rec: rec, ttl: ttl, rev: rev, held: began,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	o.turns, err = f.openTurnLog(cctx, rec.ID)
	if err == nil {
		err = o.turns.fence(cctx)
	}
	if err != nil {
		o.giveUp(context.Background())
		return nil, err
	}
	// A write that finds the fleet fenced by another daemon ends the
	// ownership at once: the lease may still name this daemon (a
	// renewal that went through while another took the fleet over, in
	// a raft election), and an owner that can write nothing must give
	// the fleet up rather than hold it.
	o.turns.fenced = o.lose
	// Renewals start before the leader move, which may take a while: the
	// lease, taken above, must not run out meanwhile.
	go o.renew()
	o.turns.lead(cctx, min(leadWait, ttl/2))
	return o, nil
}

// Where names the fleet for people: "NATS fleet NAME".
func (f *Fleet) Where() string { return "NATS fleet " + f.name }

// Record returns what the lease says of this daemon.
func (o *Ownership) Record() OwnerRecord { return o.rec }

// Lost is closed when the ownership ends other than by Close: the lease
// could not be renewed in time, or another daemon took the fleet over. The
// daemon must then stop acting for the fleet.
func (o *Ownership) Lost() <-chan struct{} { return o.lost }

// Err says why the ownership was lost, once Lost is closed.
func (o *Ownership) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.why
}

func (o *Ownership) lose(why error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.why != nil || o.closed {
		return
	}
	o.why = why
	o.turns.lose(why)
	close(o.lost)
}

// renew keeps the lease alive until Close or until it cannot. A renewal
// that keeps failing for longer than half the TTL gives the ownership up
// before the lease can pass to another daemon, so that this one stops
// acting first.
func (o *Ownership) renew() {
	defer close(o.done)
	every := o.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-o.stop:
			return
		case <-o.lost:
			return
		case <-t.C:
		}
		data, _ := json.Marshal(o.rec)
		ctx, cancel := context.WithTimeout(context.Background(), every)
		began := time.Now()
		rev, err := o.kv.Update(ctx, ownerKey, data, o.currentRev())
		cancel()
		switch {
		case err == nil:
			o.mu.Lock()
			o.rev, o.held = rev, began
			o.mu.Unlock()
			lastOK = time.Now()
		case isWrongSequence(err) || errors.Is(err, jetstream.ErrKeyNotFound):
			o.lose(&fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "renew the fleet's lease", Err: ErrLeasePassed})
			return
		case time.Since(lastOK) > o.ttl/2:
			o.lose(&fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "renew the fleet's lease", Err: err})
			return
		}
	}
}

// Proven reports whether this daemon can prove it still holds the lease:
// a renewal went through within the last two thirds of the TTL (renewals
// come every third), so the lease cannot have passed to another daemon
// yet. A daemon that was paused, or cut off from NATS, past that is not
// sure, even before [Ownership.Lost] says so: it must not answer from
// what it keeps in memory, which another owner may have moved past.
func (o *Ownership) Proven() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.why == nil && !o.closed && time.Since(o.held) < o.ttl*2/3
}

func (o *Ownership) currentRev() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rev
}

// Abandon stops renewing the lease without giving it up, as a daemon that
// dies would: the lease passes to another daemon once its TTL runs out,
// and every later write of this ownership fails. It is for tests and
// drills of a crash; a daemon that stops calls Close.
func (o *Ownership) Abandon() {
	if !stopLoop(&o.mu, &o.closed, o.stop, o.done) {
		return
	}
	o.turns.lose(&fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "journal", Err: errors.New("ownership abandoned")})
}

// Close gives the lease up, so another daemon may own the fleet at once.
func (o *Ownership) Close() error {
	if !stopLoop(&o.mu, &o.closed, o.stop, o.done) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.f.timeout)
	defer cancel()
	o.turns.drain(ctx)
	o.turns.lose(&fleetstate.Error{Code: fleetstate.CodeClosed, Op: "journal", Err: errors.New("ownership closed")})
	return o.giveUp(ctx)
}

// giveUp deletes the lease if it is still this daemon's.
func (o *Ownership) giveUp(ctx context.Context) error {
	err := o.kv.Delete(ctx, ownerKey, jetstream.LastRevision(o.currentRev()))
	if err != nil && !isWrongSequence(err) {
		return unavailable("give the fleet up", err)
	}
	return nil
}

// isWrongSequence reports a failed compare-and-swap.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}

// The Journal methods, on the fleet's turn log.

// Load implements [fleetstate.Journal].
func (o *Ownership) Load(ctx context.Context) ([][]byte, error) { return o.turns.load(ctx) }

// Save implements [fleetstate.Journal].
func (o *Ownership) Save(ctx context.Context, id string, rec []byte) error {
	return o.turns.save(ctx, id, rec)
}

// Hold implements [fleetstate.Journal]: a held record is saved like any
// other, unless it was already.
func (o *Ownership) Hold(ctx context.Context, id string, rec []byte, saved bool) error {
	if saved {
		return nil
	}
	return o.turns.save(ctx, id, rec)
}

// Release implements [fleetstate.Journal]. The turn is forgotten at the
// next Flush, at the end of the rendezvous's step, so that no delete is on
// a caller's path.
func (o *Ownership) Release(_ context.Context, id string) error {
	o.releasing = append(o.releasing, id)
	return nil
}

// Flush implements [fleetstate.Journal]: it forgets the turns released
// since the last Flush, and returns the first failure. A turn whose
// release failed is taken up again by a later owner, as after a crash.
func (o *Ownership) Flush(ctx context.Context) error {
	var first error
	for _, id := range o.releasing {
		if err := o.turns.release(ctx, id); err != nil && first == nil {
			first = err
		}
	}
	clear(o.releasing)
	o.releasing = o.releasing[:0]
	return first
}

// Reset implements [fleetstate.Journal].
func (o *Ownership) Reset(ctx context.Context) error {
	o.releasing = o.releasing[:0]
	return o.turns.reset(ctx)
}

var _ fleetstate.Journal = (*Ownership)(nil)
