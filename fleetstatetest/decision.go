package fleetstatetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetmem"
)

// TestUnconfirmedDecision runs the contract of a decision on a permission
// request whose write to the journal fails, on a rendezvous over a
// journal from each fleet of newFleet, one per test. Its Save fails as a
// write whose acknowledgement never came does: after the record landed,
// or without it. [fleetstate.Rendezvous.DecidePermission] then fails with
// [fleetstate.ErrDecisionUnconfirmed] and refuses any other decision
// ([fleetstate.ErrRequestDecided]); the agent waiting on the request gets
// the decision once a later write goes through, and the journal holds it
// for the next owner. A decision that never landed before its owner
// stopped never takes effect: the next owner finds the request pending,
// and decides it anew.
//
// The tests run in real time: the writes tried again come within a few
// seconds.
func TestUnconfirmedDecision(t *testing.T, newFleet func(t *testing.T) JournalFleet) {
	t.Run("LandedThenConfirmed", func(t *testing.T) { testDecisionLandedThenConfirmed(t, newFleet(t)) })
	t.Run("LostThenOwnerChanged", func(t *testing.T) { testDecisionLostThenOwnerChanged(t, newFleet(t)) })
}

// failingJournal is a journal whose saves fail while fail is set, after
// writing the record when land is set.
type failingJournal struct {
	fleetstate.Journal
	mu         sync.Mutex
	fail, land bool
}

func (j *failingJournal) set(fail, land bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.fail, j.land = fail, land
}

func (j *failingJournal) Save(ctx context.Context, id string, rec []byte) error {
	j.mu.Lock()
	fail, land := j.fail, j.land
	j.mu.Unlock()
	if !fail || land {
		if err := j.Journal.Save(ctx, id, rec); err != nil || !fail {
			return err
		}
	}
	return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "save", Err: context.DeadlineExceeded}
}

// decisionRendezvous opens a rendezvous that owns f through a
// failingJournal, closed when the test ends.
func decisionRendezvous(t *testing.T, f JournalFleet) (*fleetstate.Rendezvous, *failingJournal) {
	t.Helper()
	j, err := f.Own(t)
	if err != nil {
		t.Fatalf("Own: %v", err)
	}
	fj := &failingJournal{Journal: j}
	st := fleetstate.OpenBackend(new(fleetmem.Backend), nil)
	r, err := fleetstate.NewRendezvous(st, &fleetstate.RendezvousOptions{Journal: fj})
	if err != nil {
		j.Close()
		t.Fatalf("NewRendezvous: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r, fj
}

// askPermission raises scout's request in a goroutine, once the returned
// request is pending.
func askPermission(t *testing.T, r *fleetstate.Rendezvous, key string) (fleetstate.PermissionRequest, <-chan decided) {
	t.Helper()
	sub, _ := r.Subscribe(0)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan decided, 1)
	go func() {
		d, ok, err := r.RequestPermission(ctx, "scout", bashRequest("rm -rf build", key))
		ch <- decided{d, ok, err}
	}()
	for {
		select {
		case e := <-sub.Events():
			if e.Kind == fleetstate.EventPermissionRequested {
				return *e.Permission, ch
			}
		case <-time.After(callTimeout):
			t.Fatalf("no permission request within %v", callTimeout)
		}
	}
}

// decideUnconfirmed decides p allow while the journal fails, and checks
// that the decision is unconfirmed, that no other is taken, and that the
// agent still waits.
func decideUnconfirmed(t *testing.T, r *fleetstate.Rendezvous, p fleetstate.PermissionRequest, got <-chan decided) {
	t.Helper()
	wantCode(t, r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow}), fleetstate.CodeDecisionUnconfirmed)
	wantCode(t, r.DecidePermission("lead", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny}), fleetstate.CodeRequestDecided)
	if left := r.PermissionRequests(); len(left) != 0 {
		t.Fatalf("pending with an unconfirmed decision: %+v; want none", left)
	}
	select {
	case res := <-got:
		t.Fatalf("RequestPermission returned %+v before the decision was written", res)
	default:
	}
}

// The write landed although Save failed: once a later write goes through,
// the agent gets the decision, and the next owner finds it decided so.
func testDecisionLandedThenConfirmed(t *testing.T, f JournalFleet) {
	r, j := decisionRendezvous(t, f)
	p, got := askPermission(t, r, "k1")
	j.set(true, true)
	decideUnconfirmed(t, r, p, got)
	j.set(false, false)
	select {
	case res := <-got:
		if res.err != nil || !res.ok || res.d.Behavior != fleetstate.BehaviorAllow || res.d.By != "operator" {
			t.Fatalf("RequestPermission = %+v, %v, %v; want allow by operator", res.d, res.ok, res.err)
		}
	case <-time.After(callTimeout):
		t.Fatalf("the unconfirmed decision did not take effect within %v of the journal's recovery", callTimeout)
	}
	r.Close()
	r2, _ := decisionRendezvous(t, f)
	d, ok, err := r2.RequestPermission(context.Background(), "scout", bashRequest("rm -rf build", "k1"))
	if err != nil || !ok || d.Behavior != fleetstate.BehaviorAllow || d.By != "operator" {
		t.Fatalf("the request asked again of the next owner = %+v, %v, %v; want allow by operator", d, ok, err)
	}
}

// The write never landed, and the owner stopped before a write went
// through: the next owner finds the request pending, and a decision
// there is the one the agent gets.
func testDecisionLostThenOwnerChanged(t *testing.T, f JournalFleet) {
	r, j := decisionRendezvous(t, f)
	p, got := askPermission(t, r, "k2")
	j.set(true, false)
	decideUnconfirmed(t, r, p, got)
	r.Close()
	if res := <-got; fleetstate.CodeOf(res.err) != fleetstate.CodeClosed {
		t.Fatalf("RequestPermission at Close = %+v, %v, %v; want %s", res.d, res.ok, res.err, fleetstate.CodeClosed)
	}
	r2, _ := decisionRendezvous(t, f)
	pending := r2.PermissionRequests()
	if len(pending) != 1 || pending[0].ID != p.ID || pending[0].Decision != nil {
		t.Fatalf("the next owner's pending requests = %+v; want %s undecided", pending, p.ID)
	}
	got2 := make(chan decided, 1)
	go func() {
		d, ok, err := r2.RequestPermission(context.Background(), "scout", bashRequest("rm -rf build", "k2"))
		got2 <- decided{d, ok, err}
	}()
	if err := r2.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: "no"}); err != nil {
		t.Fatal(err)
	}
	if res := <-got2; res.err != nil || !res.ok || res.d.Behavior != fleetstate.BehaviorDeny {
		t.Fatalf("RequestPermission on the next owner = %+v, %v, %v; want the deny", res.d, res.ok, res.err)
	}
}
