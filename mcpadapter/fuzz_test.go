package mcpadapter_test

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// Fuzz targets for what a caller sends the adapter in process: raw
// JSON-RPC messages and the arguments of every tool (IDs, names, contents,
// turn IDs, tickets, waits). Bearer tokens, the token file, HTTP requests
// and hook status reports are fuzzed in daemon/mcphttp. The seed corpora
// are committed under testdata/fuzz.

// fuzzServer is the adapter's tools on an MCP server without panic
// recovery, so that a panic in a handler fails the fuzz target instead of
// becoming an error response.
type fuzzServer struct {
	*adaptertest.Fuzzed
	srv *server.MCPServer
	n   int // inputs so far
}

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	fz := adaptertest.NewFuzzed(tb)
	srv := server.NewMCPServer("fuzz", "0", server.WithToolCapabilities(false))
	srv.AddTools(fz.Adapter.Tools()...)
	return &fuzzServer{Fuzzed: fz, srv: srv}
}

var fuzzCallers = []mcpadapter.Identity{anon, lead, scout, miner, {Agent: "x", Role: "admin"}, {Role: mcpadapter.RoleLead}}

var fuzzTools = []string{"new_session", "get_session", "clean_sessions", "put", "get", "list",
	"fleet_send", "fleet_next", "fleet_ask", "fleet_reply", "fleet_poll", "fleet_ack", "fleet_members"}

// handle passes one raw message to the server as caller.
func (f *fuzzServer) handle(caller uint8, raw []byte) mcp.JSONRPCMessage {
	ctx := mcpadapter.ContextWithIdentity(context.Background(), fuzzCallers[int(caller)%len(fuzzCallers)])
	return f.srv.HandleMessage(ctx, raw)
}

var errCodeRE = regexp.MustCompile(`^ERR_[A-Z_]+$`)

// checkResult checks a tool call's answer: a result (never a JSON-RPC
// error for a well-formed call), structured content repeated as text, and
// for a failure {error: ERR_..., message} with a bounded message that
// names no host path.
func (f *fuzzServer) checkResult(t *testing.T, msg mcp.JSONRPCMessage) map[string]any {
	t.Helper()
	resp, ok := msg.(mcp.JSONRPCResponse)
	if !ok {
		t.Fatalf("tools/call answered %#v; want a result", msg)
	}
	res, ok := resp.Result.(*mcp.CallToolResult)
	if !ok {
		t.Fatalf("tools/call result %T; want *mcp.CallToolResult", resp.Result)
	}
	var sc map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatalf("structured content %s is not an object", raw)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%d contents; want the JSON text once", len(res.Content))
	}
	if res.IsError {
		code, _ := sc["error"].(string)
		message, _ := sc["message"].(string)
		if !errCodeRE.MatchString(code) || message == "" || len(message) > 2048 || !utf8.ValidString(message) {
			t.Fatalf("error result %v: want {error: ERR_..., message} with a short UTF-8 message", sc)
		}
		if strings.Contains(message, adaptertest.FuzzDir) {
			t.Fatalf("error message %q names the state directory", message)
		}
	}
	return sc
}

// tidy cleans the sessions and tickets every 256 inputs, so that what
// earlier inputs stored does not make every later one slower.
func (f *fuzzServer) tidy(t *testing.T) {
	t.Helper()
	if f.n++; f.n%256 != 0 {
		return
	}
	f.checkResult(t, f.handle(1, []byte(`{"jsonrpc":"2.0","id":"tidy","method":"tools/call","params":{"name":"clean_sessions","arguments":{}}}`)))
	f.checkResult(t, f.handle(1, []byte(`{"jsonrpc":"2.0","id":"tidy","method":"tools/call","params":{"name":"new_session","arguments":{"name":"fuzz"}}}`)))
}

// stillServes checks that the server answers a plain call after the input.
func (f *fuzzServer) stillServes(t *testing.T) {
	t.Helper()
	f.checkResult(t, f.handle(0, []byte(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"fleet_members","arguments":{}}}`)))
}

// FuzzJSONRPC feeds raw messages, well-formed or not, to the server.
func FuzzJSONRPC(f *testing.F) {
	fz := newFuzzServer(f)
	f.Add(uint8(1), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"a","file_name":"b","content":"c"}}}`))
	f.Add(uint8(2), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fleet_next","arguments":{"wait_s":1e308}}}`))
	f.Add(uint8(0), []byte(`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":[1,2]}`))
	f.Add(uint8(0), []byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`))
	f.Add(uint8(3), []byte(`{"jsonrpc":"1.0","method":7}`))
	f.Add(uint8(1), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get","arguments":{"id":"fsm::file::../../etc::passwd::x"}}}`))
	f.Add(uint8(1), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"a","file_name":"b","content":"\xff\xfe"}}}`))
	f.Fuzz(func(t *testing.T, caller uint8, raw []byte) {
		msg := fz.handle(caller, raw)
		var probe struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &probe) == nil && probe.Method == "tools/call" && len(probe.ID) > 0 && msg != nil {
			if _, isErr := msg.(mcp.JSONRPCError); !isErr {
				fz.checkResult(t, msg)
			}
		}
		fz.CheckConfined(t)
		fz.stillServes(t)
		fz.tidy(t)
	})
}

// FuzzToolArgs calls every tool with arguments built from fuzzed strings,
// flag and number, as every kind of caller.
func FuzzToolArgs(f *testing.F) {
	fz := newFuzzServer(f)
	f.Add(uint8(3), uint8(2), "scout", "notes/plan.md", "content", false, 1.0)
	f.Add(uint8(4), uint8(0), "fsm::file::550e8400-e29b-41d4-a716-446655440000::scout::notes.md", "", "", false, 0.0)
	f.Add(uint8(6), uint8(1), "scout", "turn-x", "job", true, 0.5)
	f.Add(uint8(6), uint8(1), "", "turn-00000000-0000-4000-8000-000000000000", "answer", false, 0.0)
	f.Add(uint8(10), uint8(1), "ticket-../../x", "", "", false, -1.0)
	f.Add(uint8(3), uint8(2), "scout", "../../../etc/passwd", "x", true, math.Inf(1))
	f.Add(uint8(3), uint8(0), "a\x00b", "a/./b", "\xff", false, math.NaN())
	f.Add(uint8(5), uint8(0), "../..", "..", "", false, 0.0)
	f.Add(uint8(0), uint8(1), strings.Repeat("n", 300), "", "", false, 0.0)
	f.Fuzz(func(t *testing.T, tool, caller uint8, s1, s2, s3 string, flag bool, n float64) {
		name := fuzzTools[int(tool)%len(fuzzTools)]
		var args map[string]any
		switch name {
		case "new_session":
			args = map[string]any{"name": s1}
		case "put":
			args = map[string]any{"agent_name": s1, "file_name": s2, "content": s3, "overwrite": flag}
		case "get":
			args = map[string]any{"id": s1}
		case "list":
			args = map[string]any{"session_id": s1, "agent_name": s2}
			if s1 == "" {
				delete(args, "session_id")
			}
		case "fleet_send":
			args = map[string]any{"content": s3}
			if flag {
				args["to"], args["wait"] = s1, n > 0
			} else {
				args["turn_id"] = s2
			}
		case "fleet_next":
			args = map[string]any{"wait_s": n}
		case "fleet_ask":
			args = map[string]any{"question": s1, "default": s2}
		case "fleet_reply":
			args = map[string]any{"content": s3}
		case "fleet_poll":
			args = map[string]any{"ticket": s1, "wait_s": n}
			if flag {
				delete(args, "ticket")
			}
		case "fleet_ack":
			args = map[string]any{"ticket": s1}
		}
		if math.IsNaN(n) || math.IsInf(n, 0) {
			delete(args, "wait_s") // not JSON
		}
		raw, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": args}})
		if err != nil {
			t.Fatalf("encoding the arguments: %v", err) // only NaN and ±Inf fail, and they are gone
		}
		sc := fz.checkResult(t, fz.handle(caller, raw))
		// What the server saw of the strings: JSON keeps valid UTF-8.
		var seen struct {
			Params struct {
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(raw, &seen)
		if name == "put" && sc["id"] != nil {
			back := fz.checkResult(t, fz.handle(0, mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
				"params": map[string]any{"name": "get", "arguments": map[string]any{"id": sc["id"]}}})))
			if back["content"] != seen.Params.Arguments["content"] {
				t.Fatalf("put then get of %v: content differs", sc["id"])
			}
			if id, err := fleetstate.ParseFileID(sc["id"].(string)); err != nil || !utf8.ValidString(id.Agent()+id.Name()) {
				t.Fatalf("put returned id %v: %v", sc["id"], err)
			}
		}
		fz.CheckConfined(t)
		fz.tidy(t)
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
