package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// TestFleet runs every flow with real tmux panes, real fake-agent
// processes and the real daemon, one subtest a flow, in order (the flows
// share the fleet, as the example does).
func TestFleet(t *testing.T) {
	fleettest.NeedCommand(t, fleettest.RequireTmux, "tmux", "the fleet example needs real panes")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out strings.Builder
	f, err := start(ctx, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"delegation", f.delegation},
		{"clarification", f.clarification},
		{"detached_with_nudge", f.detached},
		{"turn_done_classes", f.turnDone},
		{"busy_member_queued", f.busyMember},
		{"never_mounted", f.neverMounted},
		{"unknown_status", f.unknownStatus},
		{"multiline_and_large", f.largeMessages},
		{"draft_cleared", f.draftCleared},
		{"pane_dies", f.paneDies},
	} {
		t.Run(s.name, func(t *testing.T) {
			if err := s.run(ctx); err != nil {
				t.Fatalf("%v\ntranscript:\n%s", err, out.String())
			}
		})
	}
	t.Log("\n" + out.String())
}
