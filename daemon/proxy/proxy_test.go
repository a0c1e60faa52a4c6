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
