package fleetnats_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/natstest"
)

// TestOwnershipOutlivesARefusedLeaderMove: where the owner's NATS user may
// not ask for a leader stepdown (least privilege), the leader move at a
// takeover waits for an answer that never comes; the lease is renewed
// meanwhile, and the move gives up after half of it, so the ownership is
// not lost after Own returned it (it was, when the move came before the
// renewals and waited 3 s). The lease is 2 s: shorter than that old wait,
// and long enough that a renewal slowed by a loaded machine (a 1 s lease
// gives each one 333 ms) does not end the ownership for another reason.
func TestOwnershipOutlivesARefusedLeaderMove(t *testing.T) {
	servers := natstest.ClusterDenying(t, 3, "$JS.API.STREAM.LEADER.STEPDOWN.>")
	ctx := context.Background()
	// Each daemon takes the fleet over in turn, each on its own server:
	// at least one of them is on a server that does not lead the turns.
	for i, srv := range servers {
		f, err := fleetnats.Connect(ctx, fleetnats.Options{URL: srv.UserURL(), Fleet: "rv", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		start := time.Now()
		o, err := f.Own(ctx, fleetnats.OwnOptions{LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatalf("daemon %d: Own: %v", i, err)
		}
		took := time.Since(start)
		t.Logf("daemon %d (%s): Own took %v", i, f.Conn().ConnectedServerName(), took)
		select {
		case <-o.Lost():
			t.Fatalf("daemon %d: ownership lost %v after Own returned (Own took %v): %v", i, time.Since(start)-took, took, o.Err())
		case <-time.After(2 * time.Second):
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
