package mcpadapter_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/afero"
)

func TestProbe(t *testing.T) {
	st, _ := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	rv, _ := fleetstate.NewRendezvous(st, nil)
	defer rv.Close()
	a := mcpadapter.New(st, rv, nil)
	srv := a.NewServer("t", "0")
	c, _ := client.NewInProcessClient(srv)
	ctx := context.Background()
	c.Start(ctx)
	defer c.Close()
	init := mcp.InitializeRequest{}
	c.Initialize(ctx, init)
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1)), Method: "tools/list"})
	b, _ := json.Marshal(resp)
	t.Logf("%.3000s %v", b, err)
	m := srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	b, _ = json.Marshal(m)
	t.Logf("%.300s", b)
}
