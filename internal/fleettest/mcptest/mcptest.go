// Package mcptest is the part of the test kit that speaks MCP with the
// official MCP Go SDK, an independent client of the daemon: connecting
// over streamable HTTP with a bearer token, and calling tools with their
// structured results checked against their text.
//
// It is internal: only this module's tests import it.
package mcptest

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect connects to the MCP endpoint url with token, as an independent
// client; the test's cleanup closes the session.
func Connect(t testing.TB, url, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: fleettest.BearerClient(token), MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Call calls a tool and returns its structured content and whether it is
// an error result. The result must hold its structured content once more
// as its only text.
func Call(ctx context.Context, t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, data, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks; want the JSON text once", name, len(res.Content))
	}
	if text, ok := res.Content[0].(*mcp.TextContent); !ok || !jsonEqual(text.Text, data) {
		t.Fatalf("%s: text content %v differs from the structured content %s", name, res.Content[0], data)
	}
	return out, res.IsError
}

func jsonEqual(a string, b []byte) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// OK calls a tool that must succeed and returns its structured content.
func OK(ctx context.Context, t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	out, isErr := Call(ctx, t, cs, name, args)
	if isErr {
		t.Fatalf("%s(%v) failed: %v", name, args, out)
	}
	return out
}

// Fails calls a tool that must fail with code and a message.
func Fails(ctx context.Context, t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, code string) {
	t.Helper()
	out, isErr := Call(ctx, t, cs, name, args)
	if !isErr || out["error"] != code || out["message"] == "" {
		t.Fatalf("%s(%v) = %v (isError %v); want error %s with a message", name, args, out, isErr, code)
	}
}

// Async runs a tool call in a goroutine; its structured content (or
// {"call_error": ...}) comes on the channel.
func Async(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) <-chan map[string]any {
	ch := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			ch <- map[string]any{"call_error": err.Error()}
			return
		}
		data, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		_ = json.Unmarshal(data, &out)
		ch <- out
	}()
	return ch
}

// RecvWithin returns what ch brings within d, and fails the test
// otherwise.
func RecvWithin(t testing.TB, ch <-chan map[string]any, d time.Duration) map[string]any {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no result within %v", d)
		return nil
	}
}
