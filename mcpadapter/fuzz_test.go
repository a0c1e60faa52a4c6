package mcpadapter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	agentkit "github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// Fuzz targets for everything a caller sends: raw JSON-RPC messages, the
// arguments of every tool (IDs, names, contents, turn IDs, tickets, waits),
// bearer tokens, the token file, HTTP requests and hook status reports.
// Their seed corpora are committed under testdata/fuzz.

const fuzzDir = "/fuzz-state"

// fuzzBounds keep every blocking tool short, so that an input can wait
// only milliseconds.
var fuzzBounds = fleetstate.RendezvousOptions{
	SendTimeout:  2 * time.Millisecond,
	AskTimeout:   2 * time.Millisecond,
	ReadyTimeout: 2 * time.Millisecond,
	MaxWait:      2 * time.Millisecond,
	PollInterval: time.Millisecond,
}

// fuzzServer is the adapter's tools on an MCP server without panic
// recovery, so that a panic in a handler fails the fuzz target instead of
// becoming an error response.
type fuzzServer struct {
	fs    *confinedFS
	store *fleetstate.Store
	rv    *fleetstate.Rendezvous
	srv   *server.MCPServer
	a     *mcpadapter.Adapter
	n     int // inputs so far
}

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	fsys := &confinedFS{Fs: afero.NewMemMapFs(), root: fuzzDir}
	st, err := fleetstate.Open(fsys, fuzzDir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.NewSession("fuzz"); err != nil {
		tb.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, &fuzzBounds)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rv.Close() })
	for _, m := range []string{"scout", "miner"} {
		if err := rv.AddMember(m, nil); err != nil {
			tb.Fatal(err)
		}
		if err := rv.SetReady(m, true); err != nil {
			tb.Fatal(err)
		}
	}
	a := mcpadapter.New(st, rv, &mcpadapter.Options{RolesConfigured: func() bool { return true }})
	srv := server.NewMCPServer("fuzz", "0", server.WithToolCapabilities(false))
	srv.AddTools(a.Tools()...)
	return &fuzzServer{fs: fsys, store: st, rv: rv, srv: srv, a: a}
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
		if strings.Contains(message, fuzzDir) {
			t.Fatalf("error message %q names the state directory", message)
		}
	}
	return sc
}

// checkConfined fails t if anything was written outside the state
// directory.
func (f *fuzzServer) checkConfined(t *testing.T) {
	t.Helper()
	if p := f.fs.escaped.Load(); p != nil {
		t.Fatalf("%s was written outside the state directory", *p)
	}
}

// confinedFS records any call that would change the file system outside
// root.
type confinedFS struct {
	afero.Fs
	root    string
	escaped atomic.Pointer[string]
}

func (c *confinedFS) check(paths ...string) {
	for _, p := range paths {
		p = filepath.Clean(p)
		if p != c.root && !strings.HasPrefix(p, c.root+"/") {
			c.escaped.CompareAndSwap(nil, &p)
		}
	}
}

func (c *confinedFS) Create(name string) (afero.File, error) { c.check(name); return c.Fs.Create(name) }
func (c *confinedFS) Mkdir(name string, perm fs.FileMode) error {
	c.check(name)
	return c.Fs.Mkdir(name, perm)
}
func (c *confinedFS) MkdirAll(name string, perm fs.FileMode) error {
	c.check(name)
	return c.Fs.MkdirAll(name, perm)
}
func (c *confinedFS) OpenFile(name string, flag int, perm fs.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		c.check(name)
	}
	return c.Fs.OpenFile(name, flag, perm)
}
func (c *confinedFS) Remove(name string) error    { c.check(name); return c.Fs.Remove(name) }
func (c *confinedFS) RemoveAll(name string) error { c.check(name); return c.Fs.RemoveAll(name) }
func (c *confinedFS) Rename(o, n string) error    { c.check(o, n); return c.Fs.Rename(o, n) }
func (c *confinedFS) Chmod(name string, m fs.FileMode) error {
	c.check(name)
	return c.Fs.Chmod(name, m)
}
func (c *confinedFS) Chtimes(name string, a, m time.Time) error {
	c.check(name)
	return c.Fs.Chtimes(name, a, m)
}
func (c *confinedFS) LstatIfPossible(name string) (fs.FileInfo, bool, error) {
	return c.Fs.(afero.Lstater).LstatIfPossible(name)
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
		fz.checkConfined(t)
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
		fz.checkConfined(t)
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

// FuzzTokenLookup: only the tokens handed out are accepted, each as its
// agent.
func FuzzTokenLookup(f *testing.F) {
	st, err := fleetstate.Open(afero.NewMemMapFs(), fuzzDir, nil)
	if err != nil {
		f.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		f.Fatal(err)
	}
	issued := map[string]mcpadapter.Identity{}
	for _, id := range []mcpadapter.Identity{lead, scout} {
		tok, err := tokens.Add(id.Agent, id.Role)
		if err != nil {
			f.Fatal(err)
		}
		issued[tok] = id
		f.Add(tok)
		f.Add(tok[:len(tok)-1])
		f.Add(strings.ToUpper(tok))
	}
	f.Add("fst_")
	f.Add("")
	f.Add("fst_" + strings.Repeat("A", 43))
	f.Add("Bearer fst_x")
	f.Fuzz(func(t *testing.T, token string) {
		id, ok := tokens.Lookup(token)
		want, issuedTok := issued[token]
		if ok != issuedTok || id != want {
			t.Fatalf("Lookup(%q) = %v, %v; want %v, %v", token, id, ok, want, issuedTok)
		}
	})
}

// FuzzTokenFile: whatever the token file holds, the token store fails
// closed: a caller with no agent name is never let in, and nothing
// panics.
func FuzzTokenFile(f *testing.F) {
	f.Add([]byte(`[{"agent":"lead","role":"lead","sha256":"00","created":"2026-01-01T00:00:00Z"}]`))
	f.Add([]byte(`[{"agent":"","role":"lead","sha256":"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}]`))
	f.Add([]byte(`{"agent":"lead"}`))
	f.Add([]byte(`[null, 1, "x", {"role":"admin"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := afero.NewMemMapFs()
		st, err := fleetstate.Open(fsys, fuzzDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(fsys, auth.TokenPath(st), data, 0o600); err != nil {
			t.Fatal(err)
		}
		tokens, err := auth.OpenTokens(st)
		if err != nil {
			if strings.Contains(err.Error(), fuzzDir) {
				t.Fatalf("error %q names the state directory", err)
			}
			return
		}
		// "x" hashes to the hash in the second seed: a token whose entry
		// has no agent is refused.
		for _, tok := range []string{"fst_x", "x", "fst_" + strings.Repeat("A", 43)} {
			if id, ok := tokens.Lookup(tok); ok && id.Agent == "" {
				t.Fatalf("Lookup(%q) let in a caller with no agent: %v", tok, id)
			}
		}
		_ = tokens.Len()
		_ = tokens.Agents(mcpadapter.RoleLead)
	})
}

// FuzzHTTPRequest sends arbitrary requests to the HTTP handler: whatever
// comes in, the answer is an HTTP response, never a crash, and a refused
// caller learns nothing.
func FuzzHTTPRequest(f *testing.F) {
	fz := newFuzzServer(f)
	st := fz.store
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		f.Fatal(err)
	}
	leadTok, err := tokens.Add("lead", mcpadapter.RoleLead)
	if err != nil {
		f.Fatal(err)
	}
	h := mcphttp.New(fz.a, fz.a.NewServer("fuzz", "0"), mcphttp.Options{Tokens: tokens, MaxRequestBytes: 1 << 20})
	f.Cleanup(func() { h.Close() })
	f.Add(uint8(0), true, "/mcp", "application/json", "tools/list", []byte(listBody))
	f.Add(uint8(0), false, "/mcp", "application/json", "tools/list", []byte(listBody))
	f.Add(uint8(0), true, "/status", "application/json", "", []byte(`{"status":"idle"}`))
	f.Add(uint8(1), true, "/mcp", "text/plain", "", []byte(`not json`))
	f.Add(uint8(0), true, "/mcp", "application/json", "notifications/cancelled", []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`))
	f.Add(uint8(2), true, "/mcp", "", "", []byte{})
	f.Fuzz(func(t *testing.T, method uint8, auth bool, path, ctype, mcpMethod string, body []byte) {
		m := []string{http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodHead, http.MethodOptions}[int(method)%5]
		if _, err := url.ParseRequestURI(path); err != nil || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#%") {
			path = "/mcp"
		}
		req := httptest.NewRequest(m, "http://127.0.0.1"+path, bytes.NewReader(body))
		if ctype != "" && !strings.ContainsAny(ctype, "\r\n") {
			req.Header.Set("Content-Type", ctype)
		}
		if mcpMethod != "" && !strings.ContainsAny(mcpMethod, "\r\n") {
			req.Header.Set("Mcp-Method", mcpMethod)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth {
			req.Header.Set("Authorization", "Bearer "+leadTok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !auth && rec.Code != http.StatusUnauthorized {
			t.Fatalf("%s %s without a token: status %d; want 401", m, path, rec.Code)
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %s: status %d: %s", m, path, rec.Code, rec.Body.Bytes())
		}
		fz.checkConfined(t)
	})
}

// FuzzStatusReport posts arbitrary bodies to the hook status endpoint.
func FuzzStatusReport(f *testing.F) {
	st, err := fleetstate.Open(afero.NewMemMapFs(), fuzzDir, nil)
	if err != nil {
		f.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		f.Fatal(err)
	}
	tok, err := tokens.Add("scout", mcpadapter.RoleMember)
	if err != nil {
		f.Fatal(err)
	}
	var got []fleetstate.Status
	a := mcpadapter.New(st, nil, nil)
	h := mcphttp.New(a, a.NewServer("fuzz", "0"), mcphttp.Options{Tokens: tokens,
		OnStatus: func(id mcpadapter.Identity, s fleetstate.Status) error {
			if id != scout {
				return errorf("status of %v", id)
			}
			got = append(got, s)
			return nil
		}})
	f.Cleanup(func() { h.Close() })
	f.Add([]byte(`{"status":"working"}`))
	f.Add([]byte(`{"agent":"lead","status":"idle"}`))
	f.Add([]byte(`{"status":"UNKNOWN"}`))
	f.Add([]byte(`{"status":1}`))
	f.Add([]byte(`{"hook_event_name":"Stop"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got = got[:0]
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+mcphttp.StatusPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusNoContent:
			if len(got) != 1 {
				t.Fatalf("204 but %d reports", len(got))
			}
		case http.StatusBadRequest, http.StatusForbidden:
			if len(got) != 0 {
				t.Fatalf("status %d but the report went through", rec.Code)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		var ev agentkit.HookEvent
		if json.Unmarshal(body, &ev) == nil {
			agentkit.StatusOfHook(ev)
		}
	})
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// FuzzHTTPFastPath sends the same request to a handler with the fast path
// and to one without, each on a store of its own that has seen the same
// requests, and requires the same answer: status, content type and body
// (session IDs and times aside). Whatever the fast path takes, it must
// answer as mcp-go does; whatever it does not, mcp-go must get unchanged.
func FuzzHTTPFastPath(f *testing.F) {
	var h [2]*mcphttp.Handler
	var a *mcpadapter.Adapter
	for i := range h {
		fz := newFuzzServer(f)
		h[i] = mcphttp.New(fz.a, fz.a.NewServer("fuzz", "0"), mcphttp.Options{Anonymous: true, MaxRequestBytes: 1 << 20, NoFastPath: i == 0})
		f.Cleanup(func() { h[i].Close() })
		a = fz.a
	}
	call := func(id, name, args string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + modernMeta + `,"name":"` + name + `","arguments":` + args + `}}`)
	}
	for _, s := range []struct {
		name string
		body []byte
	}{
		{"put", call("1", "put", `{"agent_name":"a","file_name":"f","content":"x\n\"\u00e9\ud83d\ude00<&>"}`)},
		{"get", call(`"x"`, "get", `{"id":"fsm::file::s::a::f"}`)},
		{"list", call("2", "list", `{}`)},
		{"get_session", []byte(`{"params":{"name":"get_session",` + modernMeta + `},"id":3,"method":"tools/call","jsonrpc":"2.0"}`)},
		{"new_session", call("4", "new_session", `{"name":"n"}`)},
		{"fleet_send", call("5", "fleet_send", `{"to":"scout","content":"x"}`)},
		{"get", []byte(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}},"arguments":{"id":1},"name":"get"}}`)},
	} {
		f.Add(s.body, "2026-07-28", "tools/call", s.name, "application/json")
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`), "2026-07-28", "notifications/cancelled", "", "application/json")
	f.Fuzz(func(t *testing.T, body []byte, version, method, name, ctype string) {
		var got [2]string
		before := a.DirectCalls()
		for i := range h {
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
			for k, v := range map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name, "Content-Type": ctype} {
				if v != "" && !strings.ContainsAny(v, "\r\n") {
					req.Header.Set(k, v)
				}
			}
			rec := httptest.NewRecorder()
			h[i].ServeHTTP(rec, req)
			got[i] = fmt.Sprintf("%d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes())
			got[i] = rfc3339.ReplaceAllString(sessionUUID.ReplaceAllString(got[i], "SID"), "TIME")
		}
		if got[0] != got[1] {
			t.Errorf("fast path taken: %v\nmcp-go:    %s\nfast path: %s", a.DirectCalls() > before, got[0], got[1])
		}
	})
}
