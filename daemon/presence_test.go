package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// Short bounds of the presence tests: a session idle this long is
// forgotten, a member gone this long loses its turn, and a message waits
// this long for a member that is not ready.
const (
	presenceTTL    = 300 * time.Millisecond
	presenceWindow = 200 * time.Millisecond
	presenceReady  = 400 * time.Millisecond
)

// rawMCP is one MCP client spoken to in raw HTTP: a session of protocol
// 2025-06-18 that never opens its GET stream, or a client of 2026-07-28,
// which has no session, that never listens.
type rawMCP struct {
	t       *testing.T
	url     string
	token   string
	version string
	sid     string // the session of a 2025-06-18 client
	id      int
}

const (
	legacyVersion = "2025-06-18"
	modernVersion = "2026-07-28"
)

// dialRaw returns a client of version; a 2025-06-18 client initializes
// its session first.
func dialRaw(t *testing.T, url, token, version string) *rawMCP {
	t.Helper()
	c := &rawMCP{t: t, url: url, token: token, version: version}
	if version == modernVersion {
		return c
	}
	resp, _ := c.post(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "0"}}})
	if c.sid = resp.Header.Get("Mcp-Session-Id"); c.sid == "" {
		t.Fatalf("initialize: status %d, no session", resp.StatusCode)
	}
	c.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return c
}

// post sends msg in c's session and returns the response and the
// JSON-RPC message of its body.
func (c *rawMCP) post(msg map[string]any) (*http.Response, []byte) {
	c.t.Helper()
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	if c.version == modernVersion {
		params, _ := msg["params"].(map[string]any)
		h, _ = modernRequest(0, msg["method"].(string), params)
		msg["params"] = params
	} else if c.sid != "" {
		h["Mcp-Session-Id"] = c.sid
		h["Mcp-Protocol-Version"] = c.version
	}
	body, _ := json.Marshal(msg)
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, rpcBody(resp, data)
}

// call calls tool and returns its structured content and whether it is
// an error result.
func (c *rawMCP) call(tool string, args map[string]any) (map[string]any, bool) {
	c.t.Helper()
	c.id++
	resp, data := c.post(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	var r rpcReply
	if json.Unmarshal(data, &r) != nil || r.Result == nil {
		c.t.Fatalf("%s: status %d, %.300s", tool, resp.StatusCode, data)
	}
	return r.Result.StructuredContent, r.Result.IsError
}

// ok calls tool and fails the test on an error result.
func (c *rawMCP) ok(tool string, args map[string]any) map[string]any {
	c.t.Helper()
	out, isErr := c.call(tool, args)
	if isErr {
		c.t.Fatalf("%s(%v) = %v; want success", tool, args, out)
	}
	return out
}

// end closes c's session with an HTTP DELETE, as a client that exits does.
func (c *rawMCP) end() {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, c.url, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("Mcp-Protocol-Version", c.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("DELETE of the session: status %d", resp.StatusCode)
	}
}

// presenceFleet is a daemon with the short presence bounds, a lead and a
// member scout, both spoken to in raw HTTP.
type presenceFleet struct {
	t      *testing.T
	url    string
	tokens map[string]string
	lead   *rawMCP
}

func newPresenceFleet(t *testing.T, window time.Duration) *presenceFleet {
	t.Helper()
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	cfg := serveConfig(dir)
	cfg.SessionTTL = presenceTTL
	cfg.Rendezvous.PresenceWindow = window
	cfg.Rendezvous.ReadyTimeout = presenceReady
	url := startDaemon(t, cfg)
	return &presenceFleet{t: t, url: url, tokens: tokens, lead: dialRaw(t, url, tokens["lead"], modernVersion)}
}

// member returns a new client of scout speaking version.
func (f *presenceFleet) member(version string) *rawMCP {
	return dialRaw(f.t, f.url, f.tokens["scout"], version)
}

// assign sends scout a message and has m take it: the turn is m's, and
// the lead's ticket of it is returned with the turn's ID and the moment
// before m's last call (the session's idle time counts from that call).
func (f *presenceFleet) assign(m *rawMCP) (ticket, turn string, lastCall time.Time) {
	f.t.Helper()
	m.ok("fleet_next", map[string]any{"wait_s": 0}) // scout is there
	o := f.lead.ok("fleet_send", map[string]any{"to": "scout", "content": "work", "wait": false})
	lastCall = time.Now()
	msg := m.ok("fleet_next", map[string]any{"wait_s": 5})
	if msg["content"] != "work" {
		f.t.Fatalf("scout's fleet_next = %v; want the message", msg)
	}
	return o["ticket"].(string), msg["turn_id"].(string), lastCall
}

// outcome waits, at most 5 s, for ticket to end, and returns it as
// "outcome/reason".
func (f *presenceFleet) outcome(ticket string) string {
	f.t.Helper()
	var p map[string]any
	if !fleettest.Until(5*time.Second, 10*time.Millisecond, func() bool {
		p = f.lead.ok("fleet_poll", map[string]any{"ticket": ticket})
		return p["state"] == "done"
	}) {
		f.t.Fatalf("ticket %s still %v after 5 s; want it ended", ticket, p)
	}
	return fmt.Sprintf("%v/%v", p["outcome"], p["reason"])
}

// ready reports whether fleet_members says scout is ready.
func (f *presenceFleet) ready() bool {
	f.t.Helper()
	for _, m := range f.lead.ok("fleet_members", nil)["members"].([]any) {
		if mm := m.(map[string]any); mm["name"] == "scout" {
			return mm["ready"] == true
		}
	}
	f.t.Fatal("fleet_members: no scout")
	return false
}

// TestMemberWithoutStreamGone: a member that never listens, of either
// protocol version, whose client ends its session or dies mid-turn is
// gone after the presence window, counted from the end of its session
// (its DELETE, or the idle session TTL after its last call): its turn
// ends failed member_gone, it no longer reads ready, and a new message to
// it fails member_not_ready after the readiness bound instead of queueing
// for ever.
func TestMemberWithoutStreamGone(t *testing.T) {
	for _, c := range []struct {
		name    string
		version string
		delete  bool // the client ends its session; otherwise it dies without a word
		least   time.Duration
	}{
		{"2025-06-18 session ended", legacyVersion, true, presenceWindow},
		{"2025-06-18 session expired", legacyVersion, false, presenceTTL + presenceWindow},
		{"2026-07-28 client died", modernVersion, false, presenceTTL + presenceWindow},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newPresenceFleet(t, presenceWindow)
			m := f.member(c.version)
			// The turn must not end before the member's last call plus
			// its idle TTL and the window, or before its DELETE plus the
			// window: left is taken before either, so a loaded machine's
			// delay between them and the test's clock does not count.
			ticket, _, left := f.assign(m)
			if c.delete {
				left = time.Now()
				m.end()
			}
			if got := f.outcome(ticket); got != "failed/member_gone" {
				t.Fatalf("the turn of a member that left = %s; want failed/member_gone", got)
			}
			if took := time.Since(left); took < c.least {
				t.Errorf("the turn ended %v after the member left; want at least %v", took, c.least)
			}
			if f.ready() {
				t.Error("scout reads ready after it left; want not ready")
			}
			o := f.lead.ok("fleet_send", map[string]any{"to": "scout", "content": "more", "wait": false})
			if got := f.outcome(o["ticket"].(string)); got != "failed/member_not_ready" {
				t.Errorf("a message to the member that left = %s; want failed/member_not_ready", got)
			}
		})
	}
}

// TestMemberWithoutStreamComesBack: a member that never listens keeps its
// turn while it is away within the presence window, and answers it from
// where it comes back: a new session of a 2025-06-18 client takes the
// turn over (the older session is superseded), and a 2026-07-28 client
// that was idle past the session TTL replies with the turn's ID.
func TestMemberWithoutStreamComesBack(t *testing.T) {
	for _, c := range []struct {
		name    string
		version string
	}{
		{"2025-06-18 new session", legacyVersion},
		{"2026-07-28 after an idle spell", modernVersion},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A window long enough to come back in, however busy the
			// machine.
			f := newPresenceFleet(t, 30*time.Second)
			m := f.member(c.version)
			ticket, turn, _ := f.assign(m)
			back := m
			if c.version == legacyVersion {
				back = f.member(c.version)
			} else if !fleettest.Until(5*time.Second, 10*time.Millisecond, func() bool { return !f.ready() }) {
				t.Fatal("scout still reads ready 5 s after its last call; want it gone once idle past the session TTL")
			}
			if out, isErr := back.call("fleet_reply", map[string]any{"turn_id": turn, "content": "done"}); isErr {
				t.Fatalf("fleet_reply of the member come back = %v; want it accepted", out)
			}
			if got := f.outcome(ticket); got != "reply/<nil>" {
				t.Errorf("the turn = %s; want the member's reply", got)
			}
			if back != m {
				if out, isErr := m.call("fleet_next", map[string]any{"wait_s": 0}); !isErr || out["error"] != "ERR_SUPERSEDED" {
					t.Errorf("the older session's fleet_next = %v; want ERR_SUPERSEDED", out)
				}
			}
		})
	}
}
