package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// sseReader reads server-sent events: (event, data) pairs.
type sseReader struct{ sc *bufio.Scanner }

func (s *sseReader) next() (string, string, bool) {
	event, data := "", ""
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "" && event != "":
			return event, data, true
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return "", "", false
}

func openEvents(t *testing.T, base, token string) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+mcpadapter.EventsPath, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return http.DefaultClient.Do(req)
}

// The daemon streams its events to a lead and to the operator (the token
// in the state directory), never to a member or a stranger, and logs each
// event as one structured line.
func TestDaemonEventsStreamAndLog(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	d := startDaemon(t, dir, "--log-format", "json")
	bg := context.Background()

	for who, tok := range map[string]string{"member": tokens["scout"], "stranger": "fst_nope", "nobody": ""} {
		resp, err := openEvents(t, strings.TrimSuffix(d.url, "/mcp"), tok)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("events for a %s: status %d; want 401", who, resp.StatusCode)
		}
	}
	st, err := fleetstate.Open(nil, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := mcpadapter.OperatorToken(st)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, ".fleetstate", "operator.token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator token file: %v, %v; want owner-only", fi, err)
	}
	for who, tok := range map[string]string{"lead": tokens["lead"], "operator": operator} {
		resp, err := openEvents(t, strings.TrimSuffix(d.url, "/mcp"), tok)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("events for the %s: status %d, %s", who, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		r := &sseReader{bufio.NewScanner(resp.Body)}
		ev, data, got := r.next()
		var snap fleetstate.Snapshot
		if !got || ev != "snapshot" || json.Unmarshal([]byte(data), &snap) != nil || len(snap.Members) != 1 {
			t.Fatalf("first event for the %s: %q %s; want the snapshot with member scout", who, ev, data)
		}
		lead := connectHTTP(t, d.url, tokens["lead"])
		o := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "watch me " + who, "wait": false})
		ev, data, got = r.next()
		var e fleetstate.Event
		if !got || ev != "event" || json.Unmarshal([]byte(data), &e) != nil || e.Kind != fleetstate.EventQueued || e.Ticket != o["ticket"] || e.Content != "watch me "+who {
			t.Fatalf("event for the %s after a send: %q %s", who, ev, data)
		}
		resp.Body.Close()
	}
	if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool {
		for _, line := range d.lines() {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "fleetstate: event" && rec["kind"] == "queued" && rec["member"] == "scout" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no structured log line of the queued event in %v", d.lines())
	}
}

// --notify runs its command with the event as JSON when a member asks.
func TestDaemonNotifyCommand(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	out := filepath.Join(t.TempDir(), "notified")
	d := startDaemon(t, dir, "--log-format", "json", "--notify", "cat >> "+out+"; echo >> "+out)
	bg := context.Background()
	lead := connectHTTP(t, d.url, tokens["lead"])
	scout := connectHTTP(t, d.url, tokens["scout"])
	ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "task", "wait": false})
	ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 5})
	asked := async(bg, t, scout, "fleet_ask", map[string]any{"question": "which way?", "default": "left"})
	if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool {
		data, _ := os.ReadFile(out)
		return strings.Contains(string(data), `"kind":"asked"`) && strings.Contains(string(data), "which way?")
	}) {
		data, _ := os.ReadFile(out)
		t.Fatalf("notification file %q; want the asked event as JSON (logs %v)", data, d.lines())
	}
	p := ok(bg, t, lead, "fleet_poll", nil)
	tk := p["tickets"].([]any)[0].(map[string]any)
	ok(bg, t, lead, "fleet_send", map[string]any{"turn_id": tk["turn_id"], "content": "right"})
	<-asked
}
