package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// Hostile input against the real binary's stdio server: every case gets a
// clear error, the server goes on serving, and nothing outside the state
// directory is touched. The same over HTTP is the daemon's, tested in
// process in package daemon (TestHostileHTTP); the input is the test kit's
// (fleettest.HostileStoreCalls, fleettest.MalformedMessages).

// hostileReply is r as the test kit's hostile runner reads it.
func (r rpcReply) hostileReply() fleettest.HostileReply {
	raw, _ := json.Marshal(r)
	h := fleettest.HostileReply{Raw: string(raw)}
	if r.Result != nil {
		h.Answered, h.IsError, h.Structured = true, r.Result.IsError, r.Result.StructuredContent
	}
	return h
}

// TestHostileStdio runs the hostile store calls and the malformed messages
// against a stdio server.
func TestHostileStdio(t *testing.T) {
	w := fleettest.NewHostileWorld(t)
	p := startRaw(t, nil, "mcp", "--dir", w.State)
	w.Session = p.ok(p.call("new_session", map[string]any{"name": "hostile"}))["id"].(string)
	p.ok(p.call("put", map[string]any{"agent_name": "scout", "file_name": "real.txt", "content": "real"}))
	w.Plant(t)
	fleettest.RunHostileStore(t, w, func(tool string, args any) fleettest.HostileReply {
		return p.wait(p.request("tools/call", map[string]any{"name": tool, "arguments": args}), 60*time.Second).hostileReply()
	})
	before := fleettest.TreeHash(t, w.Root, w.State)
	for _, m := range fleettest.MalformedMessages() {
		// The reply to an unusable message has a null id, or there is
		// none (a notification): what matters is that the server answers
		// what comes next.
		p.send(m.Line)
		if r := p.wait(p.call("get_session", nil), 60*time.Second); r.Result == nil || r.Result.IsError {
			t.Fatalf("after %s, get_session: %+v %+v; stderr: %s", m.Name, r.Result, r.Error, p.errText())
		}
	}
	if after := fleettest.TreeHash(t, w.Root, w.State); after != before {
		t.Fatal("a malformed message changed something outside the state directory")
	}
	// A million arguments: refused by name, promptly enough for the
	// client's patience; the server goes on.
	r := p.wait(p.request("tools/call", map[string]any{"name": "put", "arguments": fleettest.MillionArgs()}), 120*time.Second)
	if r.Result == nil || !r.Result.IsError || r.Result.StructuredContent["error"] != "ERR_INVALID_ARGUMENT" {
		t.Fatalf("a million arguments: %+v %+v", r.Result, r.Error)
	}
	p.ok(p.call("get", map[string]any{"id": "fsm::file::" + w.Session + "::scout::real.txt"}))
}
