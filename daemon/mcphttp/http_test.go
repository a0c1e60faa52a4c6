package mcphttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// daemon is the adapter served over streamable HTTP on 127.0.0.1, as
// fleetstate serve runs it, with a lead token and member tokens.
type daemon struct {
	t        *testing.T
	url      string // of the MCP endpoint
	store    *fleetstate.Store
	rv       *fleetstate.Rendezvous
	tokens   *auth.Tokens
	leadTok  string
	scoutTok string
	minerTok string
	http     *http.Client
}

func newDaemon(t *testing.T, anonymous bool) *daemon {
	t.Helper()
	k := adaptertest.Start(t, adaptertest.Options{
		Agents: map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember, "miner": mcpadapter.RoleMember},
		HTTP:   mcphttp.Options{Anonymous: anonymous},
	})
	return &daemon{t: t, url: k.URL, store: k.Store, rv: k.Rendezvous, tokens: k.Tokens,
		leadTok: k.Token["lead"], scoutTok: k.Token["scout"], minerTok: k.Token["miner"], http: k.HTTP}
}

// connect returns an initialized MCP client that sends token (none if
// empty).
func (d *daemon) connect(token string, opts ...client.ClientOption) (*client.Client, error) {
	var hc *http.Client
	if token != "" {
		hc = fleettest.BearerClient(token)
	}
	c, _, err := adaptertest.Dial(context.Background(), d.url, hc, adaptertest.DialOptions{Name: "http-test", Client: opts})
	return c, err
}

func (d *daemon) mustConnect(token string, opts ...client.ClientOption) *client.Client {
	d.t.Helper()
	c, err := d.connect(token, opts...)
	if err != nil {
		d.t.Fatalf("connect: %v", err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// checker calls and checks tools over HTTP with the checks of the
// adapter's own tests: the shape checks and output schemas are the same.
// The identity the checker puts in the context does not cross the wire;
// the token does.
func (d *daemon) checker(c *client.Client) *adaptertest.Checker {
	return adaptertest.NewChecker(d.t, d.store.Dir(), c)
}

// anon is the identity the tests pass to the checker: over HTTP the
// caller is who its token says.
var anon = adaptertest.Anon

// raw sends a POST of body to the daemon with the headers given; host, if
// set, replaces the Host header.
func (d *daemon) raw(host string, headers map[string]string, body string) (*http.Response, []byte) {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.url, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_PROTOCOL_VERSION)
	req.Header.Set("Mcp-Method", "tools/list")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := d.http.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return resp, data
}

const listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}}}`

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// rpcResult extracts the JSON-RPC response from a body that is plain JSON
// or a stream of server-sent events.
func rpcResult(t *testing.T, resp *http.Response, data []byte) map[string]any {
	t.Helper()
	var msg map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(strings.TrimSpace(line)), &m) == nil && m["id"] != nil {
				msg = m
			}
		}
	} else if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatalf("response %q: %v", data, err)
	}
	if msg == nil {
		t.Fatalf("no JSON-RPC response in %q", data)
	}
	return msg
}

func TestHTTPRefusesWithoutValidToken(t *testing.T) {
	d := newDaemon(t, false)
	check := func(name string, headers map[string]string, wantErrorParam bool) {
		t.Helper()
		resp, body := d.raw("", headers, listBody)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d; want 401", name, resp.StatusCode)
		}
		wa := resp.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(wa, "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q; want a Bearer challenge", name, wa)
		}
		if wantErrorParam != strings.Contains(wa, `error="invalid_token"`) {
			t.Errorf("%s: WWW-Authenticate %q; invalid_token expected %v", name, wa, wantErrorParam)
		}
		if strings.Contains(string(body), "tools") {
			t.Errorf("%s: a refused request got %q", name, body)
		}
	}
	check("no token", nil, false)
	check("wrong token", bearer("fst_"+strings.Repeat("A", 43)), true)
	check("token of another prefix", bearer("abc_"+d.leadTok[4:]), true)
	check("truncated token", bearer(d.leadTok[:len(d.leadTok)-1]), true)
	check("empty bearer", map[string]string{"Authorization": "Bearer "}, true)
	check("basic scheme", map[string]string{"Authorization": "Basic " + d.leadTok}, true)
	check("token without scheme", map[string]string{"Authorization": d.leadTok}, true)

	// The MCP client gets nowhere either.
	if c, err := d.connect(""); err == nil {
		c.Close()
		t.Errorf("a client without a token connected")
	}
	if c, err := d.connect("fst_nope"); err == nil {
		c.Close()
		t.Errorf("a client with a wrong token connected")
	}

	check("scheme without token", map[string]string{"Authorization": "Bearer"}, true)
	check("scheme glued to token", map[string]string{"Authorization": "Bearer" + d.leadTok}, true)

	// The scheme is case-insensitive, and spaces around the token are
	// tolerated.
	for _, auth := range []string{"bearer " + d.leadTok, "BEARER " + d.leadTok, "Bearer   " + d.leadTok + "  ", "  bEaReR " + d.leadTok} {
		if resp, body := d.raw("", map[string]string{"Authorization": auth}, listBody); resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: status %d: %s; want 200", strings.Replace(auth, d.leadTok, "TOKEN", 1), resp.StatusCode, body)
		}
	}

	// A valid token works.
	resp, body := d.raw("", bearer(d.leadTok), listBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("valid token: status %d: %s", resp.StatusCode, body)
	}
	if msg := rpcResult(t, resp, body); msg["result"] == nil {
		t.Errorf("valid token: %v; want a tools/list result", msg)
	}
	c := d.mustConnect(d.leadTok)
	e := d.checker(c)
	e.Ok(anon, "new_session", map[string]any{"name": "over http"})
	if m := e.Ok(anon, "fleet_members", nil); len(m["members"].([]any)) != 2 {
		t.Errorf("fleet_members over HTTP: %v", m)
	}

	// A revoked token is refused from the next request on, also on a
	// connection it already opened.
	if n, err := d.tokens.Revoke("lead"); err != nil || n != 1 {
		t.Fatalf("Revoke: %d, %v; want 1, nil", n, err)
	}
	check("revoked token", bearer(d.leadTok), true)
	req := mcp.CallToolRequest{}
	req.Params.Name = "get_session"
	if res, err := c.CallTool(context.Background(), req); err == nil {
		t.Errorf("call on a revoked token's connection: %+v; want a transport error", res)
	}
	// Other tokens are untouched.
	if resp, _ := d.raw("", bearer(d.scoutTok), listBody); resp.StatusCode != http.StatusOK {
		t.Errorf("scout after lead's revocation: status %d", resp.StatusCode)
	}
}

func TestHTTPRebinding(t *testing.T) {
	d := newDaemon(t, false)
	tests := []struct {
		name    string
		host    string
		headers map[string]string
		want    int
	}{
		{"foreign host", "evil.example:80", bearer(d.leadTok), http.StatusForbidden},
		{"foreign host without token", "evil.example", nil, http.StatusForbidden},
		{"foreign host resolving to loopback", "127.0.0.1.nip.io:80", bearer(d.leadTok), http.StatusForbidden},
		{"foreign origin", "", map[string]string{"Authorization": "Bearer " + d.leadTok, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"foreign origin on the port", "", map[string]string{"Authorization": "Bearer " + d.leadTok, "Origin": "http://evil.example:7333"}, http.StatusForbidden},
		{"null origin", "", map[string]string{"Authorization": "Bearer " + d.leadTok, "Origin": "null"}, http.StatusForbidden},
		{"localhost host", "localhost:7333", bearer(d.leadTok), http.StatusOK},
		{"ipv6 loopback host", "[::1]:7333", bearer(d.leadTok), http.StatusOK},
		{"local origin", "", map[string]string{"Authorization": "Bearer " + d.leadTok, "Origin": "http://localhost:3000"}, http.StatusOK},
		{"loopback origin", "", map[string]string{"Authorization": "Bearer " + d.leadTok, "Origin": "http://127.0.0.1:3000"}, http.StatusOK},
		{"local origin, no token", "", map[string]string{"Origin": "http://localhost:3000"}, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := d.raw(tc.host, tc.headers, listBody)
			if resp.StatusCode != tc.want {
				t.Errorf("status %d (%s); want %d", resp.StatusCode, bytes.TrimSpace(body), tc.want)
			}
			if tc.want == http.StatusForbidden && strings.Contains(string(body), "inputSchema") {
				t.Errorf("a refused request got the tools: %s", body)
			}
		})
	}
}

// TestHTTPAnonymous: in anonymous mode a caller without a token uses the
// store tools, never the fleet tools; a wrong token is still refused.
func TestHTTPAnonymous(t *testing.T) {
	d := newDaemon(t, true)
	c := d.mustConnect("")
	e := d.checker(c)

	// Tokens exist, so an anonymous caller may not start or clean sessions.
	e.Fail(anon, "new_session", map[string]any{"name": "s"}, fleetstate.CodeNotPermitted)
	e.Fail(anon, "clean_sessions", nil, fleetstate.CodeNotPermitted)
	lc := d.checker(d.mustConnect(d.leadTok))
	sid := adaptertest.Str(lc.Ok(anon, "new_session", map[string]any{"name": "s"}), "id")

	if s := e.Ok(anon, "get_session", nil); s["id"] != sid {
		t.Errorf("get_session %v; want %s", s, sid)
	}
	id := adaptertest.Str(e.Ok(anon, "put", map[string]any{"agent_name": "visitor", "file_name": "f", "content": "c"}), "id")
	if g := e.Ok(anon, "get", map[string]any{"id": id}); g["content"] != "c" {
		t.Errorf("get %v; want c", g)
	}
	e.Ok(anon, "list", nil)
	for tool, args := range adaptertest.ValidArgs {
		e.Fail(anon, tool, args, fleetstate.CodeNotPermitted)
	}

	resp, _ := d.raw("", bearer("fst_wrong"), listBody)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token in anonymous mode: status %d; want 401", resp.StatusCode)
	}
	if resp, _ := d.raw("", nil, listBody); resp.StatusCode != http.StatusOK {
		t.Errorf("no token in anonymous mode: status %d; want 200", resp.StatusCode)
	}
	// Without any token anonymous callers start sessions, as with
	// fleet-state-mgr.
	if _, err := d.tokens.Revoke("lead"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.tokens.Revoke("scout"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.tokens.Revoke("miner"); err != nil {
		t.Fatal(err)
	}
	e.Ok(anon, "new_session", map[string]any{"name": "anon"})
	e.Ok(anon, "clean_sessions", nil)
}

// TestHTTPIdentityFromToken: identity comes from each request's token, not
// from the MCP session the request names.
func TestHTTPIdentityFromToken(t *testing.T) {
	d := newDaemon(t, false)
	ctx := context.Background()
	lc, tr, err := adaptertest.Dial(ctx, d.url, fleettest.BearerClient(d.leadTok), adaptertest.DialOptions{Name: "lead", Client: []client.ClientOption{client.WithLegacyProtocolOnly()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	sid := tr.GetSessionId()
	if sid == "" {
		t.Fatal("the legacy handshake gave no session ID")
	}
	le := d.checker(lc)
	le.Ok(anon, "fleet_members", nil)

	call := func(token, tool string, args any) map[string]any {
		t.Helper()
		params, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + string(params) + `}`
		resp, data := d.raw("", map[string]string{
			"Authorization":        "Bearer " + token,
			"Mcp-Session-Id":       sid,
			"Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION,
			"Mcp-Method":           "tools/call",
		}, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tool, resp.StatusCode, data)
		}
		msg := rpcResult(t, resp, data)
		res, _ := msg["result"].(map[string]any)
		if res == nil {
			t.Fatalf("%s: %v; want a result", tool, msg)
		}
		return res
	}
	// scout reuses the lead's session ID with its own token: still scout.
	res := call(d.scoutTok, "fleet_members", nil)
	if res["isError"] != true || res["structuredContent"].(map[string]any)["error"] != "ERR_NOT_PERMITTED" {
		t.Errorf("scout's fleet_members in the lead's session: %v; want ERR_NOT_PERMITTED", res)
	}
	res = call(d.scoutTok, "fleet_send", map[string]any{"to": "miner", "content": "x", "wait": false})
	if res["isError"] != true {
		t.Errorf("scout's fleet_send in the lead's session: %v; want ERR_NOT_PERMITTED", res)
	}
	res = call(d.scoutTok, "fleet_next", map[string]any{"wait_s": 0})
	if res["isError"] == true || res["structuredContent"].(map[string]any)["outcome"] != "none" {
		t.Errorf("scout's fleet_next in the lead's session: %v; want outcome none", res)
	}
	// Without a token the session ID is worth nothing.
	resp, _ := d.raw("", map[string]string{"Mcp-Session-Id": sid}, listBody)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("session ID without a token: status %d; want 401", resp.StatusCode)
	}
	// And the lead's own session is unaffected.
	if res := call(d.leadTok, "fleet_members", nil); res["isError"] == true {
		t.Errorf("lead's fleet_members: %v", res)
	}
}

// TestHTTPFlow: a lead and a member, each on its own connection, meet in
// one rendezvous; a member becomes ready with its first call.
func TestHTTPFlow(t *testing.T) {
	d := newDaemon(t, false)
	le := d.checker(d.mustConnect(d.leadTok))
	se := d.checker(d.mustConnect(d.scoutTok))
	ctx := context.Background()

	ready := func() map[string]bool {
		out := map[string]bool{}
		for _, m := range le.Ok(anon, "fleet_members", nil)["members"].([]any) {
			mm := m.(map[string]any)
			out[adaptertest.Str(mm, "name")] = mm["ready"] == true
		}
		return out
	}
	if r := ready(); r["scout"] || r["miner"] {
		t.Errorf("members ready before any call: %v", r)
	}
	se.Fail(anon, "get_session", nil, fleetstate.CodeNoActiveSession)
	if r := ready(); !r["scout"] || r["miner"] {
		t.Errorf("after scout's first call: %v; want scout ready only", r)
	}
	// A member's refused call does not mount it.
	me := d.checker(d.mustConnect(d.minerTok))
	me.Fail(anon, "fleet_members", nil, fleetstate.CodeNotPermitted)
	if r := ready(); r["miner"] {
		t.Errorf("miner ready after a refused call: %v", r)
	}

	send := le.Async(ctx, anon, "fleet_send", map[string]any{"to": "scout", "content": "over the wire"}, nil)
	msg := se.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))
	if msg["from"] != "lead" || msg["content"] != "over the wire" {
		t.Errorf("fleet_next %v", msg)
	}
	ask := se.Async(ctx, anon, "fleet_ask", map[string]any{"question": "sure?"}, nil)
	q := adaptertest.WantOutcome(t, le.OkOf(le.Recv(send)), "question", "turn_id", "ticket", "from", "content", "state")
	answer := le.Async(ctx, anon, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "yes"}, nil)
	if a := se.OkOf(se.Recv(ask)); a["answer"] != "yes" {
		t.Errorf("answer %v", a)
	}
	// miner cannot end scout's turn.
	me.Fail(anon, "fleet_reply", map[string]any{"content": "forged"}, fleetstate.CodeNoOpenTurn)
	se.Ok(anon, "fleet_reply", map[string]any{"content": "done"})
	out := adaptertest.WantOutcome(t, le.OkOf(le.Recv(answer)), "reply", "turn_id", "from", "content")
	if out["content"] != "done" {
		t.Errorf("outcome %v", out)
	}
	// A member puts under its own name only, over HTTP too.
	le.Ok(anon, "new_session", map[string]any{"name": "s"})
	se.Ok(anon, "put", map[string]any{"agent_name": "scout", "file_name": "f", "content": "x"})
	se.Fail(anon, "put", map[string]any{"agent_name": "lead", "file_name": "f", "content": "x"}, fleetstate.CodeNotPermitted)
}

// TestHTTPLateMember: a member whose token was added after the daemon
// started is known from its first call, ready, and can be sent to.
func TestHTTPLateMember(t *testing.T) {
	d := newDaemon(t, false)
	le := d.checker(d.mustConnect(d.leadTok))
	le.Fail(anon, "fleet_send", map[string]any{"to": "late", "content": "x", "wait": false}, fleetstate.CodeUnknownMember)

	tok, err := d.tokens.Add("late", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	late := d.checker(d.mustConnect(tok))
	if got := late.Ok(anon, "fleet_next", adaptertest.WaitArgs(0)); got["outcome"] != "none" {
		t.Errorf("late member's fleet_next %v; want none", got)
	}
	found := false
	for _, m := range le.Ok(anon, "fleet_members", nil)["members"].([]any) {
		if mm := m.(map[string]any); mm["name"] == "late" {
			found = mm["ready"] == true
		}
	}
	if !found {
		t.Errorf("the late member is not listed ready")
	}
	tk := adaptertest.Str(le.Ok(anon, "fleet_send", map[string]any{"to": "late", "content": "welcome", "wait": false}), "ticket")
	if got := late.Ok(anon, "fleet_next", adaptertest.WaitArgs(10)); got["content"] != "welcome" {
		t.Errorf("fleet_next %v; want welcome", got)
	}
	late.Ok(anon, "fleet_reply", map[string]any{"content": "thanks"})
	if p := le.Ok(anon, "fleet_poll", map[string]any{"ticket": tk, "wait_s": 10}); p["content"] != "thanks" {
		t.Errorf("poll %v; want the late member's reply", p)
	}
}

// modernMeta is the _meta of a 2026-07-28 request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// modernHeader is what a 2026-07-28 client sends with a call of tool.
func modernHeader(tool string) map[string]string {
	return map[string]string{"Content-Type": "application/json", "Mcp-Protocol-Version": "2026-07-28",
		"Mcp-Method": "tools/call", "Mcp-Name": tool}
}

// postRaw sends body to d with header (values "" are left out) and the
// agent's token, and returns the answer's status and body.
func postRaw(t *testing.T, d *adaptertest.Daemon, agent, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+d.Token[agent])
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := d.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// startRawHTTP starts a daemon with a lead and a member, scout, for tests
// that send raw requests.
func startRawHTTP(t *testing.T) *adaptertest.Daemon {
	t.Helper()
	return adaptertest.Start(t, adaptertest.Options{
		Agents: map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember},
		HTTP:   mcphttp.Options{MaxRequestBytes: 1 << 20},
	})
}

// TestHTTPCancel: a 2026-07-28 call ends with ERR_CANCELLED when its
// caller sends notifications/cancelled for it; a call whose client goes
// away ends too.
func TestHTTPCancel(t *testing.T) {
	d := startRawHTTP(t)
	next := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + modernMeta + `,"name":"fleet_next","arguments":{"wait_s":30}}}`
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + modernMeta + `,"requestId":7}}`
	type answer struct {
		status int
		body   string
	}
	done := make(chan answer, 1)
	go func() {
		status, body := postRaw(t, d, "scout", next, modernHeader("fleet_next"))
		done <- answer{status, body}
	}()
	deadline := time.Now().Add(adaptertest.WaitLimit)
	cancelHeader := map[string]string{"Content-Type": "application/json", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "notifications/cancelled"}
	// Until the call has started, its cancellation cancels nothing, and
	// is sent again.
	var a answer
wait:
	for {
		if status, body := postRaw(t, d, "scout", cancel, cancelHeader); status != http.StatusAccepted {
			t.Fatalf("cancel: %d %s", status, body)
		}
		select {
		case a = <-done:
			break wait
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the call did not end on its notifications/cancelled")
		}
	}
	var r struct {
		Result struct {
			IsError           bool              `json:"isError"`
			StructuredContent map[string]string `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(a.body), &r); err != nil || !r.Result.IsError || r.Result.StructuredContent["error"] != "ERR_CANCELLED" {
		t.Errorf("cancelled call answered %d %s (%v); want ERR_CANCELLED", a.status, a.body, err)
	}

	// A client that goes away ends its call.
	ctx, stop := context.WithCancel(context.Background())
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, strings.NewReader(next))
		req.Header.Set("Authorization", "Bearer "+d.Token["scout"])
		for k, v := range modernHeader("fleet_next") {
			req.Header.Set(k, v)
		}
		if resp, err := d.HTTP.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	stop()
	<-gone
}

// TestHTTPWithMCPGoClient: mcp-go's own client, which speaks 2026-07-28,
// has its calls served, and reads their results.
func TestHTTPWithMCPGoClient(t *testing.T) {
	d := startRawHTTP(t)
	c, _, err := adaptertest.Dial(context.Background(), d.URL, fleettest.BearerClient(d.Token["lead"]), adaptertest.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := benchCall(context.Background(), c, "new_session", map[string]any{"name": "s"}); err != nil {
		t.Fatal(err)
	}
	out, err := benchCall(context.Background(), c, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := benchCall(context.Background(), c, "get", map[string]any{"id": out["id"]})
	if err != nil || got["content"] != "hi" {
		t.Errorf("get: %v, %v; want content hi", got, err)
	}
}

// TestHTTPWithOfficialSDK: the official Go SDK, which speaks 2026-07-28
// with client capabilities that are not empty, has its calls served too.
func TestHTTPWithOfficialSDK(t *testing.T) {
	d := startRawHTTP(t)
	c := sdk.NewClient(&sdk.Implementation{Name: "sdk", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: d.URL, HTTPClient: fleettest.BearerClient(d.Token["lead"])}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "new_session", Arguments: map[string]any{"name": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("new_session: %v, %v", res, err)
	}
	if out, _ := res.StructuredContent.(map[string]any); out["id"] == nil {
		t.Errorf("new_session: %v; want an id", res.StructuredContent)
	}
}
