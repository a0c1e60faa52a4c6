package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hostile input against the real binary: every case gets a clear error,
// the server goes on serving, and nothing outside the state directory is
// touched.

// treeHash hashes every name, mode, link target and content below root,
// the state directory excepted.
func treeHash(t *testing.T, root, except string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == except {
			return filepath.SkipDir
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", p, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(h, "-> %s\n", target)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hostileWorld is a state directory with, beside it, files that must never
// change, and symbolic links planted inside it that point at them.
type hostileWorld struct {
	root, state, outside, session string
}

func newHostileWorld(t *testing.T) *hostileWorld {
	t.Helper()
	w := &hostileWorld{root: t.TempDir()}
	w.state = filepath.Join(w.root, "state")
	w.outside = filepath.Join(w.root, "outside")
	for _, f := range []string{"secret.txt", "dir/inner.txt"} {
		p := filepath.Join(w.outside, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("do not touch "+f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// plant makes the links an attacker with a shell beside the agents could
// plant in the state directory: a session, an agent, a folder and a file
// that lead outside, and the rendezvous's own folder.
func (w *hostileWorld) plant(t *testing.T) {
	t.Helper()
	for link, target := range map[string]string{
		filepath.Join(w.state, "00000000-0000-4000-8000-000000000000"): w.outside, // a whole session
		filepath.Join(w.state, w.session, "linked-agent"):              w.outside, // an agent
		filepath.Join(w.state, w.session, "scout", "linked-dir"):       filepath.Join(w.outside, "dir"),
		filepath.Join(w.state, w.session, "scout", "linked-file"):      filepath.Join(w.outside, "secret.txt"),
	} {
		if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
}

// hostileStoreCalls are store calls built to escape the state directory or
// to break its rules; each must fail with the code given.
func hostileStoreCalls(session string) []struct {
	tool string
	args map[string]any
	code string
} {
	long := strings.Repeat("a", 1<<20) // eight thousand times the longest name
	return []struct {
		tool string
		args map[string]any
		code string
	}{
		{"put", map[string]any{"agent_name": "scout", "file_name": "../../outside/secret.txt", "content": "x", "overwrite": true}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "/etc/passwd", "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": `..\..\x`, "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "a/../../../x", "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "x\x00y", "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "..", "file_name": "x", "content": "x"}, "ERR_INVALID_AGENT_NAME"},
		{"put", map[string]any{"agent_name": "../outside", "file_name": "x", "content": "x"}, "ERR_INVALID_AGENT_NAME"},
		{"put", map[string]any{"agent_name": long, "file_name": "x", "content": "x"}, "ERR_INVALID_AGENT_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": long, "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "big", "content": strings.Repeat("b", 16<<20+1)}, "ERR_CONTENT_TOO_LARGE"},
		{"put", map[string]any{"agent_name": "linked-agent", "file_name": "secret.txt", "content": "x", "overwrite": true}, "ERR_PATH_ESCAPE"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "linked-dir/inner.txt", "content": "x", "overwrite": true}, "ERR_PATH_ESCAPE"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "linked-dir/new.txt", "content": "x"}, "ERR_PATH_ESCAPE"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "linked-file", "content": "x", "overwrite": true}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::linked-agent::secret.txt"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::scout::linked-dir/inner.txt"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::scout::linked-file"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::00000000-0000-4000-8000-000000000000::dir::inner.txt"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::scout::../../../outside/secret.txt"}, "ERR_CAN_ONLY_RETRIEVE_FILES"},
		{"get", map[string]any{"id": "fsm::file::../outside::dir::inner.txt"}, "ERR_CAN_ONLY_RETRIEVE_FILES"},
		{"list", map[string]any{"session_id": "../outside"}, "ERR_SESSION_NOT_VALID"},
		{"list", map[string]any{"session_id": "00000000-0000-4000-8000-000000000000"}, "ERR_PATH_ESCAPE"},
		{"list", map[string]any{"agent_name": "linked-agent"}, "ERR_PATH_ESCAPE"},
		{"list", map[string]any{"agent_name": "../.."}, "ERR_INVALID_AGENT_NAME"},
		{"new_session", map[string]any{"name": "a\nb"}, "ERR_INVALID_SESSION_NAME"},
		{"new_session", map[string]any{"name": long}, "ERR_INVALID_SESSION_NAME"},
	}
}

// caller is what the hostile tests need of a connection, over stdio or
// HTTP: a raw tool call.
type caller func(tool string, args any) rpcReply

func runHostileStore(t *testing.T, w *hostileWorld, call caller) {
	t.Helper()
	before := treeHash(t, w.root, w.state)
	for _, c := range hostileStoreCalls(w.session) {
		start := time.Now()
		r := call(c.tool, c.args)
		if d := time.Since(start); d > time.Second {
			t.Logf("%s took %v", c.tool, d.Round(time.Millisecond))
		}
		if r.Result == nil || !r.Result.IsError || r.Result.StructuredContent["error"] != c.code {
			t.Errorf("%s(%.80v): %+v %+v; want %s", c.tool, c.args, r.Result, r.Error, c.code)
			continue
		}
		msg, _ := r.Result.StructuredContent["message"].(string)
		if len(msg) > 1024 || strings.Contains(msg, w.root) {
			t.Errorf("%s: message of %d bytes %.100q: long, or names a host path", c.tool, len(msg), msg)
		}
	}
	// A listing skips the links; the files the links reach stay as they were.
	if r := call("list", map[string]any{"agent_name": "scout"}); r.Result == nil || r.Result.IsError {
		t.Errorf("list: %+v", r)
	} else {
		for _, f := range r.Result.StructuredContent["files"].([]any) {
			if name := f.(map[string]any)["file_name"].(string); strings.HasPrefix(name, "linked") {
				t.Errorf("list shows %s, reached through a link", name)
			}
		}
	}
	if after := treeHash(t, w.root, w.state); after != before {
		t.Fatal("something outside the state directory changed")
	}
}

// TestHostileStdio runs the hostile store calls and the malformed messages
// against a stdio server.
func TestHostileStdio(t *testing.T) {
	w := newHostileWorld(t)
	p := startRaw(t, nil, "mcp", "--dir", w.state)
	w.session = p.ok(p.call("new_session", map[string]any{"name": "hostile"}))["id"].(string)
	p.ok(p.call("put", map[string]any{"agent_name": "scout", "file_name": "real.txt", "content": "real"}))
	w.plant(t)
	runHostileStore(t, w, func(tool string, args any) rpcReply {
		return p.wait(p.request("tools/call", map[string]any{"name": tool, "arguments": args}), 60*time.Second)
	})
	before := treeHash(t, w.root, w.state)
	for _, m := range malformedMessages() {
		// The reply to an unusable message has a null id, or there is
		// none (a notification): what matters is that the server answers
		// what comes next.
		p.send(m.line)
		if r := p.wait(p.call("get_session", nil), 60*time.Second); r.Result == nil || r.Result.IsError {
			t.Fatalf("after %s, get_session: %+v %+v; stderr: %s", m.name, r.Result, r.Error, p.errText())
		}
	}
	if after := treeHash(t, w.root, w.state); after != before {
		t.Fatal("a malformed message changed something outside the state directory")
	}
	// A million arguments: refused by name, promptly enough for the
	// client's patience; the server goes on.
	r := p.wait(p.request("tools/call", map[string]any{"name": "put", "arguments": millionArgs()}), 120*time.Second)
	if r.Result == nil || !r.Result.IsError || r.Result.StructuredContent["error"] != "ERR_INVALID_ARGUMENT" {
		t.Fatalf("a million arguments: %+v %+v", r.Result, r.Error)
	}
	p.ok(p.call("get", map[string]any{"id": "fsm::file::" + w.session + "::scout::real.txt"}))
}

type malformed struct {
	name string
	line string
}

// malformedMessages are JSON-RPC messages a broken or hostile client may
// send, one line each.
func malformedMessages() []malformed {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	deepArgs := `{"jsonrpc":"2.0","id":9001,"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"a","file_name":"b","content":` + deep + `}}}`
	return []malformed{
		{"not JSON", `this is not json`},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put"`},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"ping"}`},
		{"no method", `{"jsonrpc":"2.0","id":4}`},
		{"method a number", `{"jsonrpc":"2.0","id":5,"method":7}`},
		{"id an object", `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`},
		{"unknown method", `{"jsonrpc":"2.0","id":6,"method":"fleet/steal"}`},
		{"params an array", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2,3]}`},
		{"no tool name", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}`},
		{"unknown tool", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"rm -rf /","arguments":{}}}`},
		{"arguments a string", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"put","arguments":"x"}}`},
		{"a huge number", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"fleet_next","arguments":{"wait_s":1e999}}}`},
		{"nested array", `{"jsonrpc":"2.0","id":12,"method":"ping","params":` + deep + `}`},
		{"nested arguments", deepArgs},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\",\"params\":{\"name\":\"put\",\"arguments\":{\"agent_name\":\"\xff\xfe\",\"file_name\":\"\xc0\xaf\",\"content\":\"\xed\xa0\x80\"}}}"},
		{"a stray response", `{"jsonrpc":"2.0","id":77,"result":{}}`},
		{"a notification tools/call", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"clean_sessions","arguments":{}}}`},
		{"control characters", "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":{\"name\":\"put\",\"arguments\":{\"agent_name\":\"a\\u001b[2J\",\"file_name\":\"b\",\"content\":\"c\"}}}"},
		// The last of duplicate keys wins (encoding/json); over HTTP the
		// Mcp-Name header must agree with it, so the two cannot disagree.
		{"duplicate keys", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"clean_sessions","name":"get_session","arguments":{}}}`},
	}
}

// millionArgs is the JSON of a put's arguments with a million arguments
// besides its own (12 MB), built directly: encoding a map that size would
// sort a million keys.
func millionArgs() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"agent_name":"scout","file_name":"m","content":"x"`)
	for i := range 1_000_000 {
		fmt.Fprintf(&b, `,"k%d":0`, i)
	}
	b.WriteString("}")
	return b.Bytes()
}

// TestHostileHTTP: the same against the daemon, plus what only HTTP has:
// bodies over the limit, wrong content types, foreign hosts.
func TestHostileHTTP(t *testing.T) {
	start := time.Now()
	w := newHostileWorld(t)
	lead := addToken(t, w.state, "lead", "lead")
	d := startDaemon(t, w.state)
	id := 0
	post := func(headers map[string]string, body []byte) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, d.url, bytes.NewReader(body))
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
	w.session = call("new_session", map[string]any{"name": "hostile"}).Result.StructuredContent["id"].(string)
	call("put", map[string]any{"agent_name": "scout", "file_name": "real.txt", "content": "real"})
	w.plant(t)
	runHostileStore(t, w, call)

	before := treeHash(t, w.root, w.state)
	h, _ := modernRequest(0, "tools/call", map[string]any{"name": "put"})
	for _, m := range malformedMessages() {
		resp, data := post(h, []byte(m.line))
		if resp.StatusCode >= 500 {
			t.Errorf("%s: status %d: %.200s", m.name, resp.StatusCode, data)
		}
		if r := call("get_session", nil); r.Result == nil || r.Result.IsError {
			t.Fatalf("after %s, get_session: %+v %+v", m.name, r.Result, r.Error)
		}
	}
	t.Logf("malformed messages done at %v", time.Since(start).Round(time.Millisecond))
	// Over the body limit (64 MiB): refused, the server goes on.
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
		req, _ := http.NewRequest(http.MethodPost, d.url, bytes.NewReader(body))
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
	if r := call("get_session", nil); r.Result == nil || r.Result.StructuredContent["id"] != w.session {
		t.Fatalf("the session after the refused requests: %+v", r.Result)
	}
	t.Logf("limits done at %v", time.Since(start).Round(time.Millisecond))
	r := call("put", millionArgs())
	if r.Result == nil || !r.Result.IsError || r.Result.StructuredContent["error"] != "ERR_INVALID_ARGUMENT" {
		t.Fatalf("a million arguments: %+v %+v", r.Result, r.Error)
	}
	t.Logf("million arguments done at %v", time.Since(start).Round(time.Millisecond))
	if after := treeHash(t, w.root, w.state); after != before {
		t.Fatal("a malformed request changed something outside the state directory")
	}
	if got := call("get", map[string]any{"id": "fsm::file::" + w.session + "::scout::real.txt"}); got.Result == nil || got.Result.StructuredContent["content"] != "real" {
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

// ---- identity over the real daemon -----------------------------------------

// TestIdentityOverTheWire: what the mcpadapter tests check in process,
// here against the binary: a token revoked with the token command is
// refused at once; a member, with the lead's real ticket and turn, can use
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
	d := startDaemon(t, dir)
	bg := context.Background()
	lead := connectHTTP(t, d.url, tokens["lead"])
	m1 := connectHTTP(t, d.url, tokens["m1"])
	ok(bg, t, lead, "new_session", map[string]any{"name": "s"})
	// A turn with a question and a detached ticket, both the lead's.
	sent := async(bg, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "work"})
	ok(bg, t, m1, "fleet_next", map[string]any{"wait_s": 10})
	asked := async(bg, t, m1, "fleet_ask", map[string]any{"question": "which?", "default": "d"})
	q := recvWithin(t, sent, 10*time.Second)
	turn, ticket := q["turn_id"], q["ticket"]
	m2 := connectHTTP(t, d.url, tokens["m2"])
	lead2 := connectHTTP(t, d.url, tokens["lead2"])
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
		fails(bg, t, cs, c.tool, c.args, c.code)
	}
	// The turn is untouched: the lead's answer goes through.
	answered := async(bg, t, lead, "fleet_send", map[string]any{"turn_id": turn, "content": "this"})
	if a := recvWithin(t, asked, 10*time.Second); a["answer"] != "this" {
		t.Fatalf("answer %v; want the lead's", a)
	}
	ok(bg, t, m1, "fleet_reply", map[string]any{"content": "done"})
	if o := recvWithin(t, answered, 10*time.Second); o["content"] != "done" {
		t.Fatalf("outcome %v", o)
	}

	// Revoked with the command, while the daemon runs: refused from the
	// next request on, on the connection the token opened too.
	out, err := exec.Command(binary, "token", "revoke", "--dir", dir, "--agent", "lead2").CombinedOutput()
	if err != nil {
		t.Fatalf("token revoke: %v: %s", err, out)
	}
	if _, _, err := tryCall(bg, lead2, "fleet_members", nil); err == nil {
		t.Fatal("a revoked token's connection still works")
	}
	req, _ := http.NewRequest(http.MethodPost, d.url, strings.NewReader(`{}`))
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
	req, _ = http.NewRequest(http.MethodPost, d.url, strings.NewReader(`{}`))
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
