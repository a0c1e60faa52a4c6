package fleetnats

import (
	"context"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/natstest"
)

// TestReleaseThatDidNotLand: when a release the owner did not wait for
// did not land, the stream's last sequence is one short of what the owner
// expects; its next write finds its own message last and lands.
func TestReleaseThatDidNotLand(t *testing.T) {
	ctx := context.Background()
	f, err := Connect(ctx, Options{URL: natstest.Run(t).URL(), Fleet: "lost", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, err := f.Own(ctx, OwnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := o.Save(ctx, "t1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	o.turns.mu.Lock()
	// As a release sent but refused leaves it.
	o.turns.last++
	o.turns.lastID = "refused"
	o.turns.mu.Unlock()
	if err := o.Save(ctx, "t2", []byte("b")); err != nil {
		t.Fatalf("Save after a release that did not land: %v", err)
	}
	recs, err := o.Load(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("Load = %q, %v; want both records", recs, err)
	}
}
