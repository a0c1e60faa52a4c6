package daemon

import (
	"testing"

	"github.com/fleetstate/fleetstate"
)

// The notification command runs for a question, a member turning BLOCKED,
// a detached ticket finishing and a failure, and for nothing else.
func TestNotifies(t *testing.T) {
	reply := &fleetstate.Outcome{Kind: fleetstate.OutcomeReply}
	failed := &fleetstate.Outcome{Kind: fleetstate.OutcomeFailed, Reason: fleetstate.ReasonMemberGone}
	for _, tc := range []struct {
		name string
		e    fleetstate.Event
		want bool
	}{
		{"question", fleetstate.Event{Kind: fleetstate.EventAsked}, true},
		{"permission request", fleetstate.Event{Kind: fleetstate.EventPermissionRequested}, true},
		{"permission decided", fleetstate.Event{Kind: fleetstate.EventPermissionDecided}, false},
		{"blocked", fleetstate.Event{Kind: fleetstate.EventStatus, Status: "BLOCKED"}, true},
		{"working", fleetstate.Event{Kind: fleetstate.EventStatus, Status: "WORKING"}, false},
		{"detached ticket done", fleetstate.Event{Kind: fleetstate.EventOutcome, Outcome: reply, Held: true}, true},
		{"reply to a waiting call", fleetstate.Event{Kind: fleetstate.EventOutcome, Outcome: reply}, false},
		{"failure to a waiting call", fleetstate.Event{Kind: fleetstate.EventOutcome, Outcome: failed}, true},
		{"queued", fleetstate.Event{Kind: fleetstate.EventQueued}, false},
		{"acked", fleetstate.Event{Kind: fleetstate.EventAcked}, false},
	} {
		if got := notifies(tc.e); got != tc.want {
			t.Errorf("%s: notifies = %v; want %v", tc.name, got, tc.want)
		}
	}
}
