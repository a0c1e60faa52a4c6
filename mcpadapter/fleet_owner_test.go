package mcpadapter_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// fleet_cancel ends a queued turn, which is then never delivered, and an
// open one, which the member learns of on its next call for it.
func TestFleetCancel(t *testing.T) {
	e := newEnv(t, envOpts{})
	queued := e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "first", "wait": false})
	second := e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "second", "wait": false})
	o := adaptertest.WantOutcome(t, e.Ok(lead, "fleet_cancel", map[string]any{"ticket": queued["ticket"]}), "failed", "turn_id", "from", "content", "reason", "state")
	if o["reason"] != "cancelled" || o["state"] != "done" {
		t.Fatalf("fleet_cancel = %v; want failed, cancelled, done", o)
	}
	msg := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(1))
	if msg["content"] != "second" {
		t.Fatalf("fleet_next after the cancel = %v; want the second message", msg)
	}
	e.Ok(lead, "fleet_cancel", map[string]any{"turn_id": msg["turn_id"]})
	e.Fail(scout, "fleet_reply", map[string]any{"content": "too late"}, fleetstate.CodeTurnCancelled)
	p := e.Ok(lead, "fleet_poll", map[string]any{"ticket": second["ticket"]})
	if p["reason"] != "cancelled" {
		t.Fatalf("cancelled ticket = %v", p)
	}
	e.Fail(lead, "fleet_cancel", map[string]any{"ticket": "ticket-x", "turn_id": "turn-x"}, fleetstate.CodeInvalidArgument)
	e.Fail(lead, "fleet_cancel", map[string]any{}, fleetstate.CodeInvalidArgument)
	e.Fail(lead2, "fleet_cancel", map[string]any{"ticket": second["ticket"]}, fleetstate.CodeUnknownTicket)
	e.Fail(scout, "fleet_cancel", map[string]any{"ticket": second["ticket"]}, fleetstate.CodeNotPermitted)
}

// fleet_poll without a ticket pages: at most limit tickets, oldest first,
// with next_cursor while more remain.
func TestFleetPollPages(t *testing.T) {
	e := newEnv(t, envOpts{})
	var want []any
	for i := range 7 {
		o := e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": fmt.Sprint("job ", i), "wait": false})
		want = append(want, o["ticket"])
	}
	var got []any
	args := map[string]any{"limit": 3}
	for pages := 1; ; pages++ {
		p := e.Ok(lead, "fleet_poll", args)
		ts, _ := p["tickets"].([]any)
		if len(ts) > 3 {
			t.Fatalf("page of %d tickets; want at most 3", len(ts))
		}
		for _, tk := range ts {
			got = append(got, tk.(map[string]any)["ticket"])
		}
		next, more := p["next_cursor"].(string)
		if !more {
			if pages != 3 {
				t.Fatalf("%d pages; want 3", pages)
			}
			break
		}
		args = map[string]any{"limit": 3, "cursor": next}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tickets over the pages %v; want %v", got, want)
	}
	if p := e.Ok(lead, "fleet_poll", nil); len(p["tickets"].([]any)) != 7 || p["next_cursor"] != nil {
		t.Fatalf("default page = %v; want all 7 and no cursor", p)
	}
	e.Fail(lead, "fleet_poll", map[string]any{"cursor": "garbage"}, fleetstate.CodeInvalidArgument)
	e.Fail(lead, "fleet_poll", map[string]any{"ticket": want[0], "limit": 2}, fleetstate.CodeInvalidArgument)
}

// Beside a fleet owned elsewhere, the fleet tools are listed and answer the
// error that says where the fleet is; the role is still checked first, and
// the store tools work.
func TestFleetElsewhere(t *testing.T) {
	elsewhere := &fleetstate.Error{Code: fleetstate.CodeFleetOwned, Op: "fleet", Err: errors.New("the fleet is served by pid 1, http://127.0.0.1:7333/mcp")}
	e := newEnv(t, envOpts{noFleet: true, adapter: &mcpadapter.Options{FleetElsewhere: elsewhere}})
	if _, ok := e.Tools["fleet_next"]; !ok {
		t.Fatal("fleet tools not listed")
	}
	msg := e.Fail(scout, "fleet_next", adaptertest.WaitArgs(0), fleetstate.CodeFleetOwned)
	if msg != elsewhere.Error() {
		t.Fatalf("message %q; want %q", msg, elsewhere.Error())
	}
	e.Fail(lead, "fleet_send", map[string]any{"to": "scout", "content": "x"}, fleetstate.CodeFleetOwned)
	e.Fail(anon, "fleet_send", map[string]any{"to": "scout", "content": "x"}, fleetstate.CodeNotPermitted)
	e.Ok(lead, "new_session", map[string]any{"name": "s"})
	e.Ok(scout, "put", map[string]any{"agent_name": "scout", "file_name": "a.md", "content": "x"})
}
