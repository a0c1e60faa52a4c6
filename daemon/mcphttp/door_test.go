package mcphttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/fleetmem"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// door is the HTTP handler with the given caps and a Membership, served on
// 127.0.0.1, with a lead token and two member tokens.
type door struct {
	url     string
	h       *mcphttp.Handler
	tokens  *auth.Tokens
	rv      *fleetstate.Rendezvous
	members *auth.Membership
	tok     map[string]string
	client  *http.Client
}

func newDoor(tb testing.TB, opts mcphttp.Options) *door {
	tb.Helper()
	k := adaptertest.Start(tb, adaptertest.Options{
		Agents: map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "m1": mcpadapter.RoleMember, "m2": mcpadapter.RoleMember},
		// Polled by hand (Sync), so the tests wait for nothing.
		Membership: &auth.MembershipOptions{Poll: time.Hour},
		HTTP:       opts,
	})
	return &door{url: k.URL, h: k.Handler, tokens: k.Tokens, rv: k.Rendezvous, members: k.Membership, tok: k.Token, client: k.HTTP}
}

const legacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"door","version":"0"}}}`

// initialize opens a legacy MCP session for token and returns the status,
// the session ID and the body.
func (d *door) initialize(tb testing.TB, token string, headers ...string) (int, string, string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.url, strings.NewReader(legacyInit))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := d.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(body)
}

func (d *door) end(tb testing.TB, token, sid string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodDelete, d.url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := d.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("DELETE session: status %d", resp.StatusCode)
	}
}

// refusedFor checks a refusal: its status, and a JSON-RPC error whose
// message names the flag.
func refusedFor(t *testing.T, status int, sid, body string, wantStatus int, flag string) {
	t.Helper()
	if status != wantStatus || sid != "" {
		t.Fatalf("initialize past the cap: status %d, session %q; want %d and no session", status, sid, wantStatus)
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.JSONRPC != "2.0" || msg.ID != nil || msg.Error.Code != -32000 ||
		!strings.Contains(msg.Error.Message, "session limit") || !strings.Contains(msg.Error.Message, flag) {
		t.Fatalf("refusal body %s; want a JSON-RPC error naming the session limit and %s", body, flag)
	}
}

func TestHTTPSessionCaps(t *testing.T) {
	d := newDoor(t, mcphttp.Options{MaxSessionsPerToken: 2, MaxSessions: 3})
	var m1 []string
	for range 2 {
		status, sid, body := d.initialize(t, d.tok["m1"])
		if status != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d %q %s", status, sid, body)
		}
		m1 = append(m1, sid)
	}
	// A session ID in the header does not make an initialize a call.
	status, sid, body := d.initialize(t, d.tok["m1"], "Mcp-Session-Id", m1[0])
	refusedFor(t, status, sid, body, http.StatusTooManyRequests, "--max-sessions-per-token")
	// The refused session is not counted: m2 gets the last slot in all.
	if status, sid, body := d.initialize(t, d.tok["m2"]); status != http.StatusOK || sid == "" {
		t.Fatalf("m2's initialize: %d %q %s", status, sid, body)
	}
	status, sid, body = d.initialize(t, d.tok["lead"])
	refusedFor(t, status, sid, body, http.StatusServiceUnavailable, "--max-sessions")
	// A session that ends frees its slot.
	d.end(t, d.tok["m1"], m1[0])
	if status, sid, body := d.initialize(t, d.tok["lead"]); status != http.StatusOK || sid == "" {
		t.Fatalf("lead's initialize after a DELETE: %d %q %s", status, sid, body)
	}
	// Ending a session twice, or one never counted, frees nothing more.
	d.end(t, d.tok["m1"], m1[0])
	status, sid, body = d.initialize(t, d.tok["m1"])
	refusedFor(t, status, sid, body, http.StatusServiceUnavailable, "--max-sessions")
}

func TestHTTPSessionCapsAnonymousShareOne(t *testing.T) {
	d := newDoor(t, mcphttp.Options{Anonymous: true, MaxSessionsPerToken: 2})
	for range 2 {
		if status, sid, body := d.initialize(t, ""); status != http.StatusOK || sid == "" {
			t.Fatalf("anonymous initialize: %d %q %s", status, sid, body)
		}
	}
	status, sid, body := d.initialize(t, "")
	refusedFor(t, status, sid, body, http.StatusTooManyRequests, "--max-sessions-per-token")
	if status, _, body := d.initialize(t, d.tok["m1"]); status != http.StatusOK {
		t.Fatalf("a token holder after the anonymous bucket filled: %d %s", status, body)
	}
}

// TestHTTPSessionIdleTTLFreesSlot: a session the idle sweeper forgets no
// longer counts.
func TestHTTPSessionIdleTTLFreesSlot(t *testing.T) {
	d := newDoor(t, mcphttp.Options{MaxSessionsPerToken: 1, SessionIdleTTL: 50 * time.Millisecond})
	if status, _, body := d.initialize(t, d.tok["m1"]); status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	// The sweeper looks once a second at the soonest.
	if !fleettest.Until(5*time.Second, 50*time.Millisecond, func() bool {
		status, sid, _ := d.initialize(t, d.tok["m1"])
		if status == http.StatusOK && sid != "" {
			return true
		}
		if status != http.StatusTooManyRequests {
			t.Fatalf("initialize: status %d; want 429 until the sweep, then 200", status)
		}
		return false
	}) {
		t.Fatal("the idle session still counts 5 s after its TTL of 50 ms")
	}
}

// TestHTTPRevocationEndsStreamsAndSessions: revoking a member's token ends
// its listening stream and its sessions, frees its slots, and removes it
// from the rendezvous; another member is untouched.
func TestHTTPRevocationEndsStreamsAndSessions(t *testing.T) {
	d := newDoor(t, mcphttp.Options{MaxSessionsPerToken: 2, MaxSessions: 3})
	_, sid, _ := d.initialize(t, d.tok["m1"])
	d.initialize(t, d.tok["m1"])
	d.initialize(t, d.tok["m2"])
	if status, _, _ := d.initialize(t, d.tok["m2"]); status != http.StatusServiceUnavailable {
		t.Fatalf("initialize past the total: %d; want 503", status)
	}
	stream := func(token, sid string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, d.url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := d.client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: %v %v", resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	s1 := stream(d.tok["m1"], sid)
	s2 := stream(d.tok["m2"], "")

	if _, err := d.tokens.Revoke("m1"); err != nil {
		t.Fatal(err)
	}
	if err := d.members.Sync(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, s1.Body); ended <- err }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked member's stream is still open")
	}
	for _, mi := range d.rv.Members() {
		if mi.Name == "m1" {
			t.Fatalf("members %v still list m1", d.rv.Members())
		}
	}
	// Its two slots are free: m2 takes one more (its own cap is 2), the
	// lead the last.
	if status, _, body := d.initialize(t, d.tok["m2"]); status != http.StatusOK {
		t.Fatalf("m2 after m1's revocation: %d %s", status, body)
	}
	if status, _, body := d.initialize(t, d.tok["lead"]); status != http.StatusOK {
		t.Fatalf("lead after m1's revocation: %d %s", status, body)
	}
	// m2's stream is still open: a line arrives or the read blocks.
	got := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(s2.Body).ReadByte()
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("m2's stream ended with m1's revocation")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestMembershipFollowsTokenFile: a member token added makes a member at
// once; a member registered with a port is kept as it is; a revoked
// member is removed, its queued turns failed member_removed; re-adding
// its token gives it its port back.
func TestMembershipFollowsTokenFile(t *testing.T) {
	st, tokens := adaptertest.OpenStore(t)
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	pane := fleetmem.NewMember()
	if err := rv.AddMember("paned", pane); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Add("paned", mcpadapter.RoleMember); err != nil {
		t.Fatal(err)
	}
	var revoked []mcpadapter.Identity
	m, err := auth.WatchMembership(tokens, rv, &auth.MembershipOptions{
		Poll: time.Hour,
		Port: func(agent string) fleetstate.Member {
			if agent == "paned" {
				return pane
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.OnRevoke(func(id mcpadapter.Identity) { revoked = append(revoked, id) })
	status := func(name string) string {
		for _, mi := range rv.Members() {
			if mi.Name == name {
				return mi.Status
			}
		}
		return ""
	}
	if s := status("paned"); s == "PULL" || s == "" {
		t.Fatalf("the paned member's status %q; want its port's", s)
	}

	if _, err := tokens.Add("late", mcpadapter.RoleMember); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Add("boss", mcpadapter.RoleLead); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if s := status("late"); s != "PULL" {
		t.Fatalf("late member: status %q; want a known member that pulls", s)
	}
	if status("boss") != "" {
		t.Fatal("a lead token made a member")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sent, err := rv.SendDetached("boss", "late", "queued until ready")
	if err != nil || sent.Ticket == "" {
		t.Fatalf("send to a member added from the token file: %+v, %v; want a ticket", sent, err)
	}

	for _, a := range []string{"late", "paned", "boss"} {
		if _, err := tokens.Revoke(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if ms := rv.Members(); len(ms) != 0 {
		t.Fatalf("members %v after every revocation; want none", ms)
	}
	if len(revoked) != 3 {
		t.Fatalf("revoked %v; want late, paned and boss", revoked)
	}
	o, err := rv.Poll(ctx, "boss", sent.Ticket, 0)
	if err != nil || o.Reason != fleetstate.ReasonMemberRemoved {
		t.Fatalf("the queued turn: %+v, %v; want failed member_removed", o, err)
	}

	if _, err := tokens.Add("paned", mcpadapter.RoleMember); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if s := status("paned"); s == "PULL" || s == "" {
		t.Fatalf("the paned member re-added: status %q; want its port's", s)
	}
	m.Close()
	m.Close() // idempotent
}

// BenchmarkIdleSession measures the memory an idle MCP session holds in the
// daemon: b.N sessions are opened with initialize (as `fleetstate serve`
// runs the handler: idle TTL set, caps lifted for the count) and the live
// heap grows by bytes/session.
func BenchmarkIdleSession(b *testing.B) {
	d := newDoor(b, mcphttp.Options{MaxSessionsPerToken: -1, MaxSessions: -1, SessionIdleTTL: 30 * time.Minute})
	body := legacyInit
	serve := func() {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+d.tok["m1"])
		w := httptest.NewRecorder()
		d.h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || w.Header().Get("Mcp-Session-Id") == "" {
			b.Fatalf("initialize: %d %s", w.Code, w.Body)
		}
	}
	serve() // warm up what is made once
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		serve()
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(b.N), "bytes/session")
}
