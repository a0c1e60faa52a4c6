package proxy_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/proxy"
)

// TestProxy: the stdio proxy mirrors the daemon's tools and forwards to
// it with its token's identity, whatever its own client is; a proxy with
// a wrong token does not start.
func TestProxy(t *testing.T) {
	ds, tok := startFleet(t, 1)
	_, c := proxyClient(t, []string{ds[0].url}, tok["m1"], fastProxy)
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	// The adapter's 15 tools and the two blocking tools of the test's daemon.
	for _, want := range []string{"put", "get", "list", "fleet_send", "fleet_next", "fleet_reply", "fleet_members", "slow_read", "slow_write"} {
		if !names[want] {
			t.Errorf("the proxy does not mirror %s", want)
		}
	}
	if len(tools.Tools) != 17 {
		t.Errorf("proxy mirrors %d tools; want 17", len(tools.Tools))
	}
	// The daemon sees m1, a member: a lead's tool is refused.
	if out, isErr := callTool(t, c, "fleet_members", nil); !isErr || out["error"] != string(fleetstate.CodeNotPermitted) {
		t.Errorf("fleet_members through a member's proxy = %v; want %s", out, fleetstate.CodeNotPermitted)
	}
	if out, isErr := callTool(t, c, "fleet_next", map[string]any{"wait_s": 0}); isErr || out["outcome"] != "none" {
		t.Errorf("fleet_next through the proxy = %v", out)
	}
	bad := map[string]any{"agent_name": "m1", "file_name": "f", "content": "x", "bogus": 1}
	if out, isErr := callTool(t, c, "put", bad); !isErr || out["error"] != string(fleetstate.CodeInvalidArgument) {
		t.Errorf("put with an unknown argument = %v; want %s", out, fleetstate.CodeInvalidArgument)
	}
	if p, err := proxy.New(context.Background(), ds[0].url, "fst_wrong", "test"); err == nil {
		p.Close()
		t.Errorf("New with a wrong token succeeded")
	}
}

// TestProxyNamesTheTurnTakenLast: once a fleet_next through the proxy took
// a turn, every later one names it (after_turn), so that a call of the
// member's that reaches the owner after a later call took work is refused
// rather than handed a message. Here the later call is the member's,
// made on the rendezvous directly.
func TestProxyNamesTheTurnTakenLast(t *testing.T) {
	ds, tok := startFleet(t, 1)
	rv := ds[0].rv
	_, c := proxyClient(t, []string{ds[0].url}, tok["m1"], fastProxy)
	ctx := context.Background()
	if _, err := rv.SendDetached("lead", "m1", "first"); err != nil {
		t.Fatal(err)
	}
	first, isErr := callTool(t, c, "fleet_next", map[string]any{"wait_s": 0})
	if isErr || first["content"] != "first" {
		t.Fatalf("fleet_next through the proxy = %v", first)
	}
	if err := rv.ReplyTurn("m1", first["turn_id"].(string), "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.SendDetached("lead", "m1", "second"); err != nil {
		t.Fatal(err)
	}
	second, ok, err := rv.Next(ctx, "m1", 0)
	if err != nil || !ok {
		t.Fatalf("Next on the rendezvous = %+v, %v, %v", second, ok, err)
	}
	if err := rv.ReplyTurn("m1", second.TurnID, "done"); err != nil {
		t.Fatal(err)
	}
	third, err := rv.SendDetached("lead", "m1", "third")
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := callTool(t, c, "fleet_next", map[string]any{"wait_s": 0}); !isErr || out["error"] != string(fleetstate.CodeSuperseded) {
		t.Fatalf("fleet_next through the proxy, which took only the first turn = %v; want %s", out, fleetstate.CodeSuperseded)
	}
	if p, _ := rv.Poll(ctx, "lead", third.Ticket, 0); p.State != fleetstate.TicketQueued {
		t.Fatalf("the third ticket = %+v; want still queued", p)
	}
	// A turn the agent names itself goes as it is.
	out, isErr := callTool(t, c, "fleet_next", map[string]any{"wait_s": 0, "after_turn": second.TurnID})
	if isErr || out["content"] != "third" {
		t.Fatalf("fleet_next naming the second turn = %v; want the third message", out)
	}
}
