package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/mcptest"
)

// The daemon's door, embedded in process as `fleetstate serve` runs it and
// reached over loopback: idle and silent connections are closed, MCP
// sessions are capped, the token file is the live roster and revocation
// ends what the revoked holder has open. Every bound is set to
// milliseconds here, as the flag of serve that sets it would.

// hostOf returns the host:port of a daemon URL.
func hostOf(url string) string {
	return strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "http://")
}

// closedWithin reports whether the server closes conn within d: a read
// ends with EOF (or a reset), not with the deadline.
func closedWithin(conn net.Conn, r io.Reader, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// rawRequest writes one HTTP/1.1 request on conn and reads its response.
func rawRequest(t *testing.T, conn net.Conn, br *bufio.Reader, host, auth string, headers map[string]string, body []byte) *http.Response {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", host, len(body))
	if auth != "" {
		fmt.Fprintf(&b, "Authorization: %s\r\n", auth)
	}
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.Write(body)
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_ = conn.SetDeadline(time.Time{})
	return resp
}

func TestDoorIdleConnections(t *testing.T) {
	dir := t.TempDir()
	lead := addToken(t, dir, "lead", "lead")
	const maxConns = 8
	cfg := serveConfig(dir) // serve --idle-timeout 300ms --header-timeout 300ms --max-conns 8
	cfg.IdleTimeout, cfg.HeaderTimeout, cfg.MaxConns = 300*time.Millisecond, 300*time.Millisecond, maxConns
	url := startDaemon(t, cfg)
	host := hostOf(url)
	h, body := modernRequest(1, "tools/list", nil)

	t.Run("RefusedConnectionsAreClosed", func(t *testing.T) {
		// More refused callers than the daemon serves at once: each is
		// answered 401 and its connection closed, so all get through.
		for i := range 3 * maxConns {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			auth := map[bool]string{true: "", false: "Bearer fst_wrong"}[i%2 == 0]
			if resp := rawRequest(t, conn, br, host, auth, h, body); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d; want 401", resp.StatusCode)
			}
			if !closedWithin(conn, br, 5*time.Second) {
				t.Fatalf("connection %d still open 5 s after its 401", i)
			}
		}
	})

	t.Run("IdleKeepAliveIsClosed", func(t *testing.T) {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		if resp := rawRequest(t, conn, br, host, "Bearer "+lead, h, body); resp.StatusCode != http.StatusOK {
			t.Fatalf("lead's ping: status %d", resp.StatusCode)
		}
		if !closedWithin(conn, br, 5*time.Second) {
			t.Fatal("an idle keep-alive connection is still open 5 s into an idle timeout of 300 ms")
		}
	})

	t.Run("LeadServedWhileAttackerHoldsConnections", func(t *testing.T) {
		// The attacker takes every slot with connections that send
		// nothing; the header timeout frees them, and the lead's call,
		// waiting in the backlog meanwhile, is served.
		var silent []net.Conn
		for range maxConns + 4 {
			c, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			silent = append(silent, c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cs := mcptest.Connect(t, url, lead)
		mcptest.OK(ctx, t, cs, "new_session", map[string]any{"name": "door"})
		for i, c := range silent {
			if !closedWithin(c, c, 5*time.Second) {
				t.Fatalf("silent connection %d still open 5 s into a header timeout of 300 ms", i)
			}
		}
	})
}

// legacyInitialize opens an MCP session of protocol 2025-06-18 and returns
// the status, the session ID and the body.
func legacyInitialize(t *testing.T, url, token string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"door","version":"0"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
}

func endLegacySession(t *testing.T, url, token, sid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: status %d", resp.StatusCode)
	}
}

// wantLimit checks a refused initialize: the status and a JSON-RPC error
// naming the flag of the limit.
func wantLimit(t *testing.T, status int, sid, body string, wantStatus int, flag string) {
	t.Helper()
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != wantStatus || sid != "" || json.Unmarshal([]byte(body), &msg) != nil ||
		msg.Error.Code != -32000 || !strings.Contains(msg.Error.Message, flag+")") {
		t.Fatalf("initialize past the cap: %d %q %s; want %d and a JSON-RPC error naming %s", status, sid, body, wantStatus, flag)
	}
}

func TestDoorSessionCaps(t *testing.T) {
	dir := t.TempDir()
	tok := map[string]string{}
	for _, a := range []string{"m1", "m2"} {
		tok[a] = addToken(t, dir, a, "member")
	}
	tok["lead"] = addToken(t, dir, "lead", "lead")

	t.Run("PerTokenAndTotal", func(t *testing.T) {
		cfg := serveConfig(dir) // serve --max-sessions-per-token 3 --max-sessions 5
		cfg.MaxSessionsPerToken, cfg.MaxSessions = 3, 5
		url := startDaemon(t, cfg)
		var sids []string
		for range 3 {
			status, sid, body := legacyInitialize(t, url, tok["m1"])
			if status != http.StatusOK || sid == "" {
				t.Fatalf("initialize: %d %s", status, body)
			}
			sids = append(sids, sid)
		}
		// A flood from one token stops at its cap, and costs the others
		// nothing.
		for range 20 {
			status, sid, body := legacyInitialize(t, url, tok["m1"])
			wantLimit(t, status, sid, body, http.StatusTooManyRequests, "--max-sessions-per-token")
		}
		for range 2 {
			if status, _, body := legacyInitialize(t, url, tok["m2"]); status != http.StatusOK {
				t.Fatalf("m2's initialize: %d %s", status, body)
			}
		}
		status, sid, body := legacyInitialize(t, url, tok["lead"])
		wantLimit(t, status, sid, body, http.StatusServiceUnavailable, "--max-sessions")
		// The lead's calls do not need a session (protocol 2026-07-28).
		cs := mcptest.Connect(t, url, tok["lead"])
		mcptest.OK(context.Background(), t, cs, "new_session", map[string]any{"name": "caps"})
		// A session that ends frees its slot.
		endLegacySession(t, url, tok["m1"], sids[0])
		if status, _, body := legacyInitialize(t, url, tok["lead"]); status != http.StatusOK {
			t.Fatalf("lead's initialize after a DELETE: %d %s", status, body)
		}
	})

	t.Run("IdleSessionsAreForgotten", func(t *testing.T) {
		cfg := serveConfig(dir) // serve --max-sessions-per-token 1 --session-ttl 100ms
		cfg.MaxSessionsPerToken, cfg.SessionTTL = 1, 100*time.Millisecond
		url := startDaemon(t, cfg)
		if status, _, body := legacyInitialize(t, url, tok["m1"]); status != http.StatusOK {
			t.Fatalf("initialize: %d %s", status, body)
		}
		// mcp-go sweeps once a second at the soonest.
		var status int
		var body string
		if !fleettest.Until(5*time.Second, 50*time.Millisecond, func() bool {
			status, _, body = legacyInitialize(t, url, tok["m1"])
			if status != http.StatusOK && status != http.StatusTooManyRequests {
				t.Fatalf("initialize: %d %s; want 429 until the idle session is forgotten, then 200", status, body)
			}
			return status == http.StatusOK
		}) {
			t.Fatalf("initialize: %d %s; want 200 within 5 s, once the idle session is forgotten", status, body)
		}
	})
}

// TestDoorRevocation: another writer of the token file (as the token
// command) revokes a member's token while the member holds a listening
// stream and an MCP session, has a turn open and another queued. Within a second the stream ends, both turns end failed
// member_removed, the member is no longer listed nor sent to, its calls
// are refused and its session no longer counts.
func TestDoorRevocation(t *testing.T) {
	dir := t.TempDir()
	tok := map[string]string{"lead": addToken(t, dir, "lead", "lead")}
	for _, a := range []string{"m1", "m2"} {
		tok[a] = addToken(t, dir, a, "member")
	}
	cfg := serveConfig(dir) // serve --max-sessions 2
	cfg.MaxSessions = 2
	url := startDaemon(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead := mcptest.Connect(t, url, tok["lead"])
	m1 := mcptest.Connect(t, url, tok["m1"])
	mcptest.OK(ctx, t, lead, "new_session", map[string]any{"name": "revoke"})

	// m1's legacy session and its listening stream.
	status, sid, body := legacyInitialize(t, url, tok["m1"])
	if status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if status, _, body := legacyInitialize(t, url, tok["m2"]); status != http.StatusOK {
		t.Fatalf("m2's initialize: %d %s", status, body)
	}
	if status, _, _ := legacyInitialize(t, url, tok["m2"]); status != http.StatusServiceUnavailable {
		t.Fatalf("initialize past --max-sessions 2: %d; want 503", status)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok["m1"])
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("listening stream: %v, %v", stream, err)
	}
	defer stream.Body.Close()

	first := mcptest.OK(ctx, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "first", "wait": false})
	if msg := mcptest.OK(ctx, t, m1, "fleet_next", map[string]any{"wait_s": 10}); msg["content"] != "first" {
		t.Fatalf("fleet_next = %v", msg)
	}
	second := mcptest.OK(ctx, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "second", "wait": false})

	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stream.Body)
		close(ended)
	}()
	revokeToken(t, dir, "m1")
	revoked := time.Now()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked member's listening stream is still open after 5 s")
	}
	t.Logf("the stream ended %v after the revocation", time.Since(revoked).Round(time.Millisecond))

	for _, tk := range []map[string]any{first, second} {
		p := mcptest.OK(ctx, t, lead, "fleet_poll", map[string]any{"ticket": tk["ticket"], "wait_s": 5})
		if p["outcome"] != "failed" || p["reason"] != "member_removed" {
			t.Fatalf("fleet_poll %v = %v; want failed, member_removed", tk["ticket"], p)
		}
	}
	members := mcptest.OK(ctx, t, lead, "fleet_members", nil)
	for _, m := range members["members"].([]any) {
		if m.(map[string]any)["name"] == "m1" {
			t.Fatalf("fleet_members = %v; m1 is listed after its revocation", members)
		}
	}
	mcptest.Fails(ctx, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "third", "wait": false}, "ERR_UNKNOWN_MEMBER")
	if _, _, err := tryCall(ctx, m1, "fleet_next", map[string]any{"wait_s": 1}); err == nil {
		t.Fatal("the revoked member's call went through")
	}
	// Its session no longer counts.
	if status, _, body := legacyInitialize(t, url, tok["m2"]); status != http.StatusOK {
		t.Fatalf("m2's initialize after m1's revocation: %d %s", status, body)
	}
}

// TestDoorLiveRoster: a member token added while the daemon runs makes a
// known member at once: a message to it queues, as for a member known at
// start, and it takes the message when it comes.
func TestDoorLiveRoster(t *testing.T) {
	dir := t.TempDir()
	lead := addToken(t, dir, "lead", "lead")
	url := startDaemon(t, serveConfig(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := mcptest.Connect(t, url, lead)
	mcptest.OK(ctx, t, cs, "new_session", map[string]any{"name": "roster"})
	mcptest.Fails(ctx, t, cs, "fleet_send", map[string]any{"to": "late", "content": "x", "wait": false}, "ERR_UNKNOWN_MEMBER")

	late := addToken(t, dir, "late", "member")
	added := time.Now()
	if !fleettest.Until(5*time.Second, 20*time.Millisecond, func() bool {
		out, isErr := mcptest.Call(ctx, t, cs, "fleet_send", map[string]any{"to": "late", "content": "welcome", "wait": false})
		if !isErr {
			if out["outcome"] != "pending" || out["ticket"] == nil {
				t.Fatalf("fleet_send to the new member = %v; want a pending ticket", out)
			}
			return true
		}
		if out["error"] != "ERR_UNKNOWN_MEMBER" {
			t.Fatalf("fleet_send to the new member = %v", out)
		}
		return false
	}) {
		t.Fatal("a member token added 5 s ago makes no member yet")
	}
	t.Logf("the member was known %v after its token was added", time.Since(added).Round(time.Millisecond))
	m := mcptest.Connect(t, url, late)
	if msg := mcptest.OK(ctx, t, m, "fleet_next", map[string]any{"wait_s": 10}); msg["content"] != "welcome" {
		t.Fatalf("fleet_next = %v", msg)
	}
}

// TestDoorBearerScheme: the scheme of the Authorization header is matched
// without regard to case, spaces around the token tolerated.
func TestDoorBearerScheme(t *testing.T) {
	dir := t.TempDir()
	lead := addToken(t, dir, "lead", "lead")
	url := startDaemon(t, serveConfig(dir))
	h, body := modernRequest(1, "tools/list", nil)
	for _, auth := range []string{"bearer " + lead, "BEARER  " + lead + " ", "Bearer " + lead} {
		conn, err := net.Dial("tcp", hostOf(url))
		if err != nil {
			t.Fatal(err)
		}
		resp := rawRequest(t, conn, bufio.NewReader(conn), hostOf(url), auth, h, body)
		conn.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: status %d; want 200", strings.Replace(auth, lead, "TOKEN", 1), resp.StatusCode)
		}
	}
}
