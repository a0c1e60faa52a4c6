package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// Hostile input against the real binary's stdio server: every case gets a
// clear error, the server goes on serving, and nothing outside the state
// directory is touched. The same over HTTP is the daemon's, tested in
// process in package daemon (TestHostileHTTP); the input is the test kit's
// (fleettest.HostileStoreCalls, fleettest.MalformedMessages).

// caller is what the hostile tests need of a connection, over stdio or
// HTTP: a raw tool call.
type caller func(tool string, args any) rpcReply

func runHostileStore(t *testing.T, w *fleettest.HostileWorld, call caller) {
	t.Helper()
	before := fleettest.TreeHash(t, w.Root, w.State)
	for _, c := range fleettest.HostileStoreCalls(w.Session) {
		start := time.Now()
		r := call(c.Tool, c.Args)
		if d := time.Since(start); d > time.Second {
			t.Logf("%s took %v", c.Tool, d.Round(time.Millisecond))
		}
		if r.Result == nil || !r.Result.IsError || r.Result.StructuredContent["error"] != c.Code {
			t.Errorf("%s(%.80v): %+v %+v; want %s", c.Tool, c.Args, r.Result, r.Error, c.Code)
			continue
		}
		msg, _ := r.Result.StructuredContent["message"].(string)
		if len(msg) > 1024 || strings.Contains(msg, w.Root) {
			t.Errorf("%s: message of %d bytes %.100q: long, or names a host path", c.Tool, len(msg), msg)
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
	if after := fleettest.TreeHash(t, w.Root, w.State); after != before {
		t.Fatal("something outside the state directory changed")
	}
}

// TestHostileStdio runs the hostile store calls and the malformed messages
// against a stdio server.
func TestHostileStdio(t *testing.T) {
	w := fleettest.NewHostileWorld(t)
	p := startRaw(t, nil, "mcp", "--dir", w.State)
	w.Session = p.ok(p.call("new_session", map[string]any{"name": "hostile"}))["id"].(string)
	p.ok(p.call("put", map[string]any{"agent_name": "scout", "file_name": "real.txt", "content": "real"}))
	w.Plant(t)
	runHostileStore(t, w, func(tool string, args any) rpcReply {
		return p.wait(p.request("tools/call", map[string]any{"name": tool, "arguments": args}), 60*time.Second)
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
