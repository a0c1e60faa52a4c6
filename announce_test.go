package fleetstate_test

import (
	"testing"

	"github.com/fleetstate/fleetstate"
)

// TestAnnounceMerges: a merge's events reach the subscribers in the
// stream's order; the rendezvous's own kinds cannot be announced, nor
// anything once it is closed.
func TestAnnounceMerges(t *testing.T) {
	r, _ := permissionFleet(t)
	sub, snap := r.Subscribe(8)
	defer sub.Close()
	for _, kind := range []fleetstate.EventKind{fleetstate.EventOutcome, fleetstate.EventPermissionDecided, "made_up"} {
		if err := r.Announce(fleetstate.Event{Kind: kind}); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
			t.Errorf("Announce(%s): %v; want ERR_INVALID_ARGUMENT", kind, err)
		}
	}
	if err := r.Announce(fleetstate.Event{Kind: fleetstate.EventMerged, Member: "alice", By: "lead", Content: "alice into main", Seq: 99}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-sub.Events():
		if e.Kind != fleetstate.EventMerged || e.Member != "alice" || e.By != "lead" || e.Content != "alice into main" || e.Seq != snap.Seq+1 || e.Time.IsZero() {
			t.Errorf("event %+v; want alice's merge by lead, seq %d", e, snap.Seq+1)
		}
	default:
		t.Fatal("no event")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Announce(fleetstate.Event{Kind: fleetstate.EventMergeRefused}); fleetstate.CodeOf(err) != fleetstate.CodeClosed {
		t.Errorf("Announce after Close: %v; want ERR_CLOSED", err)
	}
}
