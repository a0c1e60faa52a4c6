package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shareTokens copies the token file of dir to each of others, so that a
// token works on the daemons of every directory, as on daemons of one
// fleet.
func shareTokens(t *testing.T, dir string, others ...string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".fleetstate", "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range others {
		if err := os.MkdirAll(filepath.Join(o, ".fleetstate"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(o, ".fleetstate", "tokens.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// sessionMemberInfo returns what fleet_members says of member through cs.
func sessionMemberInfo(ctx context.Context, t *testing.T, cs *mcp.ClientSession, member string) map[string]any {
	t.Helper()
	for _, m := range ok(ctx, t, cs, "fleet_members", nil)["members"].([]any) {
		if mm := m.(map[string]any); mm["name"] == member {
			return mm
		}
	}
	return nil
}

// TestStdioConnectFailsOver: `fleetstate mcp --connect` with several URLs
// passes over a URL where nothing listens, and when its daemon is killed
// goes on, over the same stdio session, on the next one: a blocking send
// in flight answers ERR_UNAVAILABLE, the next calls succeed, and the
// member's proxy listens on the new daemon by itself.
func TestStdioConnectFailsOver(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	tokens := addTokens(t, dirA, map[string]string{"lead": "lead", "m1": "member"})
	shareTokens(t, dirA, dirB)
	a, b := startDaemon(t, dirA), startDaemon(t, dirB)
	ctx := context.Background()
	nobody := "http://127.0.0.1:1/mcp" // refused: nothing listens on port 1
	env := func(agent string) []string {
		return []string{"FLEET_TOKEN=" + tokens[agent], "FLEET_AGENT=", "FLEET_ROLE="}
	}
	lead := connectStdio(t, env("lead"), "mcp", "--connect", nobody+","+a.url+","+b.url)
	m1 := connectStdio(t, env("m1"), "mcp", "--connect", a.url+", "+b.url)
	leadA, leadB := connectHTTP(t, a.url, tokens["lead"]), connectHTTP(t, b.url, tokens["lead"])
	if !fleettest.Until(time.Minute, 10*time.Millisecond, func() bool { return sessionMemberInfo(ctx, t, leadA, "m1")["ready"] == true }) {
		t.Fatal("m1 is not ready on A through its proxy")
	}
	ok(ctx, t, lead, "new_session", map[string]any{"name": "one"})

	// A blocking send in flight on A when A is killed.
	sent := async(ctx, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "lost with A"})
	if !fleettest.Until(time.Minute, 10*time.Millisecond, func() bool { return sessionMemberInfo(ctx, t, leadA, "m1")["queued"] == 1.0 }) {
		t.Fatal("the send never reached A")
	}
	a.kill(syscall.SIGKILL)
	if o := recvWithin(t, sent, time.Minute); o["error"] != "ERR_UNAVAILABLE" || !strings.Contains(o["message"].(string), "fleet_poll") {
		t.Fatalf("fleet_send in flight when its daemon died = %v; want ERR_UNAVAILABLE telling to poll", o)
	}

	// The same stdio sessions go on, on B.
	ok(ctx, t, lead, "new_session", map[string]any{"name": "two"})
	if s := ok(ctx, t, leadB, "get_session", nil); s["name"] != "two" {
		t.Errorf("B's current session = %v; want the one made through the proxy after the failover", s)
	}
	if !fleettest.Until(time.Minute, 10*time.Millisecond, func() bool { return sessionMemberInfo(ctx, t, leadB, "m1")["ready"] == true }) {
		t.Fatal("m1 is not ready on B: its proxy did not listen there")
	}
	sent = async(ctx, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "on B"})
	if msg := ok(ctx, t, m1, "fleet_next", map[string]any{"wait_s": 30}); msg["content"] != "on B" {
		t.Fatalf("fleet_next on B = %v", msg)
	}
	ok(ctx, t, m1, "fleet_reply", map[string]any{"content": "done"})
	if o := recvWithin(t, sent, time.Minute); o["content"] != "done" {
		t.Fatalf("fleet_send on B = %v", o)
	}
}

// TestStdioConnectAllDown: a proxy whose every daemon is gone answers
// ERR_UNAVAILABLE instead of hanging.
func TestStdioConnectAllDown(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead"})
	d := startDaemon(t, dir)
	ctx := context.Background()
	lead := connectStdio(t, []string{"FLEET_TOKEN=" + tokens["lead"], "FLEET_AGENT=", "FLEET_ROLE="}, "mcp", "--connect", d.url)
	ok(ctx, t, lead, "fleet_members", nil)
	d.kill(syscall.SIGKILL)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	fails(cctx, t, lead, "fleet_members", nil, "ERR_UNAVAILABLE")
}
