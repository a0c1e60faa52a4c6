package fleetnats_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/natstest"
)

func leaseConnect(t *testing.T, url string) *fleetnats.Fleet {
	t.Helper()
	f, err := fleetnats.Connect(context.Background(), fleetnats.Options{URL: url, Fleet: "lease", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// takeOver removes the lease of the fleet "lease", as it would go had its
// owner's renewals been cut off (the owner does not know yet), and has b
// own the fleet; the test's cleanup closes the ownership.
func takeOver(t *testing.T, b *fleetnats.Fleet) *fleetnats.Ownership {
	t.Helper()
	ctx := context.Background()
	kv, err := b.JetStream().KeyValue(ctx, "lease-owner")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "owner"); err != nil {
		t.Fatal(err)
	}
	ob, err := b.Own(ctx, fleetnats.OwnOptions{})
	if err != nil {
		t.Fatalf("Own after the lease went: %v", err)
	}
	t.Cleanup(func() { ob.Close() })
	return ob
}

// TestOwnOneOwner: of two daemons the second is refused, named the first's
// address, until the first gives the fleet up.
func TestOwnOneOwner(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := leaseConnect(t, url), leaseConnect(t, url)
	ctx := context.Background()
	oa, err := a.Own(ctx, fleetnats.OwnOptions{Addr: "http://127.0.0.1:1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Own(ctx, fleetnats.OwnOptions{Addr: "http://127.0.0.1:2/mcp"})
	var owned *fleetstate.OwnedError
	if !errors.Is(err, fleetstate.ErrFleetOwned) || !errors.As(err, &owned) || owned.Owner.Addr != "http://127.0.0.1:1/mcp" {
		t.Fatalf("second Own: %v; want ErrFleetOwned naming the first", err)
	}
	if rec, ok, err := b.Owner(ctx); err != nil || !ok || rec.ID != oa.Record().ID {
		t.Fatalf("Owner() = %+v, %v, %v; want the first's record", rec, ok, err)
	}
	if err := oa.Close(); err != nil {
		t.Fatal(err)
	}
	ob, err := b.Own(ctx, fleetnats.OwnOptions{Addr: "http://127.0.0.1:2/mcp"})
	if err != nil {
		t.Fatalf("Own after Close: %v", err)
	}
	ob.Close()
}

// TestOwnFencesTheOldOwner: when the lease passes while the old owner still
// believes it holds it, the old owner's writes fail and never land.
func TestOwnFencesTheOldOwner(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := leaseConnect(t, url), leaseConnect(t, url)
	ctx := context.Background()
	oa, err := a.Own(ctx, fleetnats.OwnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer oa.Close()
	if err := oa.Save(ctx, "turn-1", []byte(`{"id":"turn-1"}`)); err != nil {
		t.Fatal(err)
	}
	ob := takeOver(t, b)
	err = oa.Save(ctx, "turn-1", []byte(`{"id":"turn-1","stale":true}`))
	if fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("old owner's Save: %v; want ERR_UNAVAILABLE", err)
	}
	recs, err := ob.Load(ctx)
	if err != nil || len(recs) != 1 || string(recs[0]) != `{"id":"turn-1"}` {
		t.Fatalf("new owner's Load = %q, %v; want the record before the takeover", recs, err)
	}
	if err := ob.Save(ctx, "turn-1", []byte(`{"id":"turn-1","new":true}`)); err != nil {
		t.Fatalf("new owner's Save: %v", err)
	}
}

// TestJournalSaveReleaseReset: the last record of each live turn loads.
func TestJournalSaveReleaseReset(t *testing.T) {
	url := natstest.Run(t).URL()
	a := leaseConnect(t, url)
	ctx := context.Background()
	o, err := a.Own(ctx, fleetnats.OwnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for _, step := range []struct{ id, rec string }{{"t1", "a"}, {"t2", "b"}, {"t1", "c"}} {
		if err := o.Save(ctx, step.id, []byte(step.rec)); err != nil {
			t.Fatal(err)
		}
	}
	if err := releaseNow(ctx, o, "t2"); err != nil {
		t.Fatal(err)
	}
	recs, err := o.Load(ctx)
	if err != nil || len(recs) != 1 || string(recs[0]) != "c" {
		t.Fatalf("Load = %q, %v; want [c]", recs, err)
	}
	if err := o.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, err := o.Load(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("Load after Reset = %q, %v; want none", recs, err)
	}
	if err := o.Save(ctx, "bad.id", nil); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
		t.Fatalf("Save of a dotted ID: %v; want ERR_INVALID_ARGUMENT", err)
	}
}

// TestOwnLeaseExpires: a crashed owner's lease (never renewed, never given
// up) passes to the next daemon once its TTL runs out, and the lost
// owner's Lost closes.
func TestOwnLeaseExpires(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := leaseConnect(t, url), leaseConnect(t, url)
	ctx := context.Background()
	ttl := 600 * time.Millisecond
	oa, err := a.Own(ctx, fleetnats.OwnOptions{LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer oa.Close()
	// a stops renewing as a stopped process would: its connection goes.
	a.Conn().Close()
	deadline := time.Now().Add(10 * ttl)
	var ob *fleetnats.Ownership
	for ob == nil {
		ob, err = b.Own(ctx, fleetnats.OwnOptions{LeaseTTL: ttl})
		if err != nil && !errors.Is(err, fleetstate.ErrFleetOwned) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never passed")
		}
		if ob == nil {
			time.Sleep(ttl / 10)
		}
	}
	defer ob.Close()
	select {
	case <-oa.Lost():
	case <-time.After(10 * ttl):
		t.Fatal("the old owner never learnt it lost the fleet")
	}
}

// TestJournalReleaseNotWaitedFor: a release is not waited for, yet the
// writes after it land in order, and a load sees it.
func TestJournalReleaseNotWaitedFor(t *testing.T) {
	url := natstest.Run(t).URL()
	a := leaseConnect(t, url)
	ctx := context.Background()
	o, err := a.Own(ctx, fleetnats.OwnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for i := range 50 {
		id := fmt.Sprintf("t%d", i)
		if err := o.Save(ctx, id, []byte(id)); err != nil {
			t.Fatalf("Save %s after a release: %v", id, err)
		}
		if i < 49 {
			if err := releaseNow(ctx, o, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	recs, err := o.Load(ctx)
	if err != nil || len(recs) != 1 || string(recs[0]) != "t49" {
		t.Fatalf("Load = %q, %v; want [t49]", recs, err)
	}
	if err := releaseNow(ctx, o, "t49"); err != nil {
		t.Fatal(err)
	}
	if recs, err := o.Load(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("Load after the last release = %q, %v; want none", recs, err)
	}
}

// TestOwnFencesTheOldOwnersRelease: a release of an owner that lost the
// fleet never lands, and its next write fails.
func TestOwnFencesTheOldOwnersRelease(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := leaseConnect(t, url), leaseConnect(t, url)
	ctx := context.Background()
	oa, err := a.Own(ctx, fleetnats.OwnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer oa.Close()
	if err := oa.Save(ctx, "turn-1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	ob := takeOver(t, b)
	if err := releaseNow(ctx, oa, "turn-1"); err != nil && fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("old owner's Release: %v; want nil or ERR_UNAVAILABLE", err)
	}
	if err := oa.Save(ctx, "turn-2", []byte("b")); fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("old owner's Save after its Release: %v; want ERR_UNAVAILABLE", err)
	}
	recs, err := ob.Load(ctx)
	if err != nil || len(recs) != 1 || string(recs[0]) != "a" {
		t.Fatalf("new owner's Load = %q, %v; want [a]: the old owner's release and save must not land", recs, err)
	}
}

// TestFencedOwnerLosesAtOnce: an owner whose write finds the fleet fenced
// by another daemon loses its ownership then, not at its lease's next
// renewal (a minute away here): its daemon stops serving a fleet it can
// no longer write.
func TestFencedOwnerLosesAtOnce(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := leaseConnect(t, url), leaseConnect(t, url)
	ctx := context.Background()
	oa, err := a.Own(ctx, fleetnats.OwnOptions{LeaseTTL: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer oa.Close()
	takeOver(t, b)
	if err := oa.Save(ctx, "turn-1", []byte("a")); fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("the fenced owner's Save: %v; want ERR_UNAVAILABLE", err)
	}
	select {
	case <-oa.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the fenced owner still holds its ownership 5s after its write was fenced")
	}
}

// TestOwnerLeadsTheTurns: on a 3-node cluster the owner's server leads the
// turns' stream once Own returns, as each of two daemons, connected to
// different servers, takes the fleet in turn; the owner's writes and reads
// go through after the move.
func TestOwnerLeadsTheTurns(t *testing.T) {
	servers := natstest.Cluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, srv := range servers[:2] {
		f := leaseConnect(t, srv.URL())
		o, err := f.Own(ctx, fleetnats.OwnOptions{})
		if err != nil {
			t.Fatalf("daemon %d: Own: %v", i, err)
		}
		st, err := f.JetStream().Stream(ctx, "KV_lease-turns")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		here := f.Conn().ConnectedServerName()
		t.Logf("daemon %d at %s (%s): leader %s", i, srv.URL(), here, info.Cluster.Leader)
		if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader != here {
			t.Fatalf("daemon %d: the turns' stream (replicas %d) is led by %+v; want %s, the owner's server", i, info.Config.Replicas, info.Cluster, here)
		}
		id := fmt.Sprintf("turn%d", i)
		if err := o.Save(ctx, id, []byte(`{"n":1}`)); err != nil {
			t.Fatalf("daemon %d: Save after the move: %v", i, err)
		}
		recs, err := o.Load(ctx)
		if err != nil || len(recs) != i+1 {
			t.Fatalf("daemon %d: Load = %d records, %v; want %d", i, len(recs), err, i+1)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// releaseNow releases turn id and flushes, so that the release has landed
// when it returns: Release alone is put off to the next Flush.
func releaseNow(ctx context.Context, o *fleetnats.Ownership, id string) error {
	if err := o.Release(ctx, id); err != nil {
		return err
	}
	return o.Flush(ctx)
}
