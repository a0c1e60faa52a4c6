package events

import (
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
)

// TestClipSnapshot: the event stream's snapshot cuts long briefs and
// contents at a character boundary and gives their full length, leaves
// short ones whole, and changes nothing of the snapshot it was given.
func TestClipSnapshot(t *testing.T) {
	long := strings.Repeat("é", 6) // 12 bytes
	snap := fleetstate.Snapshot{Seq: 7, Tickets: []fleetstate.TicketInfo{
		{Brief: long, Outcome: fleetstate.Outcome{Ticket: "t1", Content: "short"}},
		{Brief: "brief", Outcome: fleetstate.Outcome{Ticket: "t2", Content: long}},
	}}
	for _, c := range []struct {
		name                  string
		max                   int
		brief, content        string
		briefBytes, contBytes int
	}{
		{"odd cut backs off to a boundary", 5, "éé", "short", 12, 0},
		{"even cut", 4, "éé", "shor", 12, 5},
		{"room for all", 12, long, "short", 0, 0},
		{"nothing", 0, "", "", 12, 5},
		{"negative", -1, "", "", 12, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := clipSnapshot(snap, c.max)
			tk := got.Tickets[0]
			if tk.Brief != c.brief || tk.Content != c.content || tk.BriefBytes != c.briefBytes || tk.ContentBytes != c.contBytes {
				t.Errorf("clipSnapshot(%d) of the first ticket: brief %q (%d), content %q (%d); want %q (%d), %q (%d)",
					c.max, tk.Brief, tk.BriefBytes, tk.Content, tk.ContentBytes, c.brief, c.briefBytes, c.content, c.contBytes)
			}
			if got.Seq != snap.Seq || got.Tickets[1].Ticket != "t2" {
				t.Errorf("clipSnapshot(%d) lost the snapshot's other fields: %+v", c.max, got)
			}
		})
	}
	if snap.Tickets[0].Brief != long || snap.Tickets[1].Content != long || snap.Tickets[0].BriefBytes != 0 {
		t.Errorf("clipSnapshot changed the snapshot it was given: %+v", snap.Tickets)
	}
}

// TestClipSnapshotPermissions: a permission request's long input is cut
// as a ticket's content is, with its full length; the snapshot given is
// unchanged.
func TestClipSnapshotPermissions(t *testing.T) {
	long := `{"command":"` + strings.Repeat("x", 20) + `"}`
	snap := fleetstate.Snapshot{Permissions: []fleetstate.PermissionRequest{{ID: "p1", Tool: "Bash", Input: long}, {ID: "p2", Tool: "Read", Input: "{}"}}}
	got := clipSnapshot(snap, 8)
	if p := got.Permissions[0]; p.Input != long[:8] || p.InputBytes != len(long) || p.ID != "p1" {
		t.Errorf("clipped request %+v; want input %q of %d bytes", p, long[:8], len(long))
	}
	if p := got.Permissions[1]; p.Input != "{}" || p.InputBytes != 0 {
		t.Errorf("short request %+v; want it whole", p)
	}
	if snap.Permissions[0].Input != long || snap.Permissions[0].InputBytes != 0 {
		t.Errorf("clipSnapshot changed the snapshot it was given: %+v", snap.Permissions)
	}
}

// The recent events keep a permission request's input clipped, with its
// length, as the snapshot keeps it.
func TestClipEventPermission(t *testing.T) {
	long := `{"command":"` + strings.Repeat("x", 20) + `"}`
	e := fleetstate.Event{Kind: fleetstate.EventPermissionRequested, Permission: &fleetstate.PermissionRequest{ID: "p1", Tool: "Bash", Input: long}}
	got := clipEvent(e, 8)
	if p := got.Permission; p.Input != long[:8] || p.InputBytes != len(long) || p.Tool != "Bash" {
		t.Errorf("clipped request %+v; want input %q of %d bytes", p, long[:8], len(long))
	}
	if e.Permission.Input != long || e.Permission.InputBytes != 0 {
		t.Errorf("clipEvent changed the event it was given: %+v", e.Permission)
	}
}
