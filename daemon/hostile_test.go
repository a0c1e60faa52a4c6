package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hostile input against the daemon embedded in process as `fleetstate
// serve` runs it, over HTTP: every case gets a clear error, the server
// goes on serving, and nothing outside the state directory is touched.
// The same over the binary's stdio is TestHostileStdio in cmd/fleetstate.

// hostileReply is r as the test kit's hostile runner reads it.
func (r rpcReply) hostileReply() fleettest.HostileReply {
	raw, _ := json.Marshal(r)
	h := fleettest.HostileReply{Raw: string(raw)}
	if r.Result != nil {
		h.Answered, h.IsError, h.Structured = true, r.Result.IsError, r.Result.StructuredContent
	}
	return h
}

// TestHostileHTTP: the hostile input of the stdio test of the binary
// (cmd/fleetstate), against the daemon over HTTP, plus what only HTTP has:
// bodies over the limit, wrong content types, foreign hosts.
func TestHostileHTTP(t *testing.T) {
	start := time.Now()
	w := fleettest.NewHostileWorld(t)
	lead := addToken(t, w.State, "lead", "lead")
	url := startDaemon(t, serveConfig(w.State))
	id := 0
	post := func(headers map[string]string, body []byte) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+lead)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp, data
	}
	call := func(tool string, args any) rpcReply {
		t.Helper()
		id++
		h, body := modernRequest(id, "tools/call", map[string]any{"name": tool, "arguments": args})
		resp, data := post(h, body)
		var r rpcReply
		if msg := rpcBody(resp, data); json.Unmarshal(msg, &r) != nil {
			t.Fatalf("%s: status %d, %.200s", tool, resp.StatusCode, data)
		}
		return r
	}
	w.Session = call("new_session", map[string]any{"name": "hostile"}).Result.StructuredContent["id"].(string)
	call("put", map[string]any{"agent_name": "scout", "file_name": "real.txt", "content": "real"})
	w.Plant(t)
	fleettest.RunHostileStore(t, w, func(tool string, args any) fleettest.HostileReply { return call(tool, args).hostileReply() })

	before := fleettest.TreeHash(t, w.Root, w.State)
	h, _ := modernRequest(0, "tools/call", map[string]any{"name": "put"})
	for _, m := range fleettest.MalformedMessages() {
		resp, data := post(h, []byte(m.Line))
		if resp.StatusCode >= 500 {
			t.Errorf("%s: status %d: %.200s", m.Name, resp.StatusCode, data)
		}
		if r := call("get_session", nil); r.Result == nil || r.Result.IsError {
			t.Fatalf("after %s, get_session: %+v %+v", m.Name, r.Result, r.Error)
		}
	}
	t.Logf("malformed messages done at %v", time.Since(start).Round(time.Millisecond))
	// Over the body limit (17 MiB): refused, the server goes on.
	resp, data := post(h, append([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"content":"`), bytes.Repeat([]byte("z"), 65<<20)...))
	if resp.StatusCode == http.StatusOK && !bytes.Contains(data, []byte("error")) {
		t.Errorf("a body over the limit: status %d, %.200s", resp.StatusCode, data)
	}
	for name, hh := range map[string]map[string]string{
		"no content type":    {"Content-Type": ""},
		"text content type":  {"Content-Type": "text/plain"},
		"foreign host":       {"Host": "evil.example"},
		"foreign origin":     {"Origin": "http://evil.example"},
		"mismatched version": {"Mcp-Protocol-Version": "2025-06-18"},
	} {
		hdr := map[string]string{}
		for k, v := range h {
			hdr[k] = v
		}
		for k, v := range hh {
			hdr[k] = v
		}
		_, body := modernRequest(1, "tools/call", map[string]any{"name": "clean_sessions", "arguments": map[string]any{}})
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+lead)
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: status 200; want a refusal", name)
		}
	}
	if r := call("get_session", nil); r.Result == nil || r.Result.StructuredContent["id"] != w.Session {
		t.Fatalf("the session after the refused requests: %+v", r.Result)
	}
	t.Logf("limits done at %v", time.Since(start).Round(time.Millisecond))
	r := call("put", fleettest.MillionArgs())
	if r.Result == nil || !r.Result.IsError || r.Result.StructuredContent["error"] != "ERR_INVALID_ARGUMENT" {
		t.Fatalf("a million arguments: %+v %+v", r.Result, r.Error)
	}
	t.Logf("million arguments done at %v", time.Since(start).Round(time.Millisecond))
	if after := fleettest.TreeHash(t, w.Root, w.State); after != before {
		t.Fatal("a malformed request changed something outside the state directory")
	}
	if got := call("get", map[string]any{"id": "fsm::file::" + w.Session + "::scout::real.txt"}); got.Result == nil || got.Result.StructuredContent["content"] != "real" {
		t.Fatalf("get after the hostile requests: %+v", got)
	}
}

// rpcBody returns the JSON-RPC message of a response that is plain JSON or
// a stream of server-sent events.
func rpcBody(resp *http.Response, data []byte) []byte {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return data
	}
	var last []byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok && bytes.Contains(rest, []byte(`"id"`)) {
			last = bytes.TrimSpace(rest)
		}
	}
	return last
}

// ---- identity over the wire ------------------------------------------------

// TestIdentityOverTheWire: what the mcpadapter tests check in process,
// here against the daemon over HTTP: a token revoked in the token file (as
// the token command does) is refused at once; a member, with the lead's real ticket and turn, can use
// none of the lead's tools; another lead can use neither; a foreign Host is
// refused; the token file and the state directory are owner-only.
func TestIdentityOverTheWire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "lead2": "lead", "m1": "member", "m2": "member"})
	for _, c := range []struct {
		path string
		perm fs.FileMode
	}{{dir, 0o700}, {filepath.Join(dir, ".fleetstate"), 0o700}, {filepath.Join(dir, ".fleetstate", "tokens.json"), 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.perm {
			t.Errorf("%s: mode %v; want %v", c.path, fi.Mode().Perm(), c.perm)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, ".fleetstate", "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range tokens {
		if bytes.Contains(data, []byte(tok)) || bytes.Contains(data, []byte(strings.TrimPrefix(tok, "fst_"))) {
			t.Fatal("the token file holds a token in clear")
		}
	}
	url := startDaemon(t, serveConfig(dir))
	bg := context.Background()
	lead := mcptest.Connect(t, url, tokens["lead"])
	m1 := mcptest.Connect(t, url, tokens["m1"])
	mcptest.OK(bg, t, lead, "new_session", map[string]any{"name": "s"})
	// A turn with a question and a detached ticket, both the lead's.
	sent := mcptest.Async(bg, lead, "fleet_send", map[string]any{"to": "m1", "content": "work"})
	mcptest.OK(bg, t, m1, "fleet_next", map[string]any{"wait_s": 10})
	asked := mcptest.Async(bg, m1, "fleet_ask", map[string]any{"question": "which?", "default": "d"})
	q := mcptest.RecvWithin(t, sent, 10*time.Second)
	turn, ticket := q["turn_id"], q["ticket"]
	m2 := mcptest.Connect(t, url, tokens["m2"])
	lead2 := mcptest.Connect(t, url, tokens["lead2"])
	for _, c := range []struct {
		who  string
		tool string
		args map[string]any
		code string
	}{
		{"m2", "fleet_send", map[string]any{"turn_id": turn, "content": "forged answer"}, "ERR_NOT_PERMITTED"},
		{"m2", "fleet_send", map[string]any{"to": "m1", "content": "forged work"}, "ERR_NOT_PERMITTED"},
		{"m2", "fleet_poll", map[string]any{"ticket": ticket}, "ERR_NOT_PERMITTED"},
		{"m2", "fleet_poll", nil, "ERR_NOT_PERMITTED"},
		{"m2", "fleet_ack", map[string]any{"ticket": ticket}, "ERR_NOT_PERMITTED"},
		{"m2", "fleet_members", nil, "ERR_NOT_PERMITTED"},
		{"m2", "new_session", map[string]any{"name": "mine"}, "ERR_NOT_PERMITTED"},
		{"m2", "clean_sessions", nil, "ERR_NOT_PERMITTED"},
		{"m2", "fleet_reply", map[string]any{"content": "forged reply"}, "ERR_NO_OPEN_TURN"},
		{"m2", "put", map[string]any{"agent_name": "m1", "file_name": "f", "content": "forged"}, "ERR_NOT_PERMITTED"},
		{"m1", "fleet_send", map[string]any{"turn_id": turn, "content": "answering myself"}, "ERR_NOT_PERMITTED"},
		{"m1", "fleet_poll", map[string]any{"ticket": ticket}, "ERR_NOT_PERMITTED"},
		{"lead2", "fleet_send", map[string]any{"turn_id": turn, "content": "not my turn"}, "ERR_NOT_PERMITTED"},
		{"lead2", "fleet_poll", map[string]any{"ticket": ticket}, "ERR_UNKNOWN_TICKET"},
		{"lead2", "fleet_ack", map[string]any{"ticket": ticket}, "ERR_UNKNOWN_TICKET"},
		{"lead", "fleet_reply", map[string]any{"content": "lead as member"}, "ERR_NOT_PERMITTED"},
		{"lead", "fleet_next", map[string]any{"wait_s": 0}, "ERR_NOT_PERMITTED"},
	} {
		cs := map[string]*mcp.ClientSession{"m1": m1, "m2": m2, "lead": lead, "lead2": lead2}[c.who]
		mcptest.Fails(bg, t, cs, c.tool, c.args, c.code)
	}
	// The turn is untouched: the lead's answer goes through.
	answered := mcptest.Async(bg, lead, "fleet_send", map[string]any{"turn_id": turn, "content": "this"})
	if a := mcptest.RecvWithin(t, asked, 10*time.Second); a["answer"] != "this" {
		t.Fatalf("answer %v; want the lead's", a)
	}
	mcptest.OK(bg, t, m1, "fleet_reply", map[string]any{"content": "done"})
	if o := mcptest.RecvWithin(t, answered, 10*time.Second); o["content"] != "done" {
		t.Fatalf("outcome %v", o)
	}

	// Revoked as the command does, while the daemon runs: refused from the
	// next request on, on the connection the token opened too.
	revokeToken(t, dir, "lead2")
	if _, _, err := tryCall(bg, lead2, "fleet_members", nil); err == nil {
		t.Fatal("a revoked token's connection still works")
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+tokens["lead2"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked token: status %d; want 401", resp.StatusCode)
	}
	// A Host that is not local is refused before the token is looked at.
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Host = "fleet.example.com"
	req.Header.Set("Authorization", "Bearer "+tokens["lead"])
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: status %d; want 403", resp.StatusCode)
	}
}
