package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/events"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// logBuffer keeps what a logger writes, for the test to read while the
// daemon logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines written so far.
func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

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

// openEvents opens the event stream of the daemon at base with token.
func openEvents(t *testing.T, base, token string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+events.Path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// dial connects to the daemon at url as the holder of token; the test's
// cleanup closes the connection.
func dial(t *testing.T, ctx context.Context, url, token string) *mcpadapter.Client {
	t.Helper()
	c, err := mcpadapter.Dial(ctx, url, token, "daemon-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEventsStreamAndLog: the daemon streams its events to a lead and to
// the operator (the token in the state directory), never to a member or
// a stranger, and logs each event as one structured line.
func TestEventsStreamAndLog(t *testing.T) {
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	var logs logBuffer
	_, url := embed(t, daemon.Config{Dir: store.Dir(), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	base := strings.TrimSuffix(url, "/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitOwned(t, store)

	for who, tok := range map[string]string{"member": tokens["scout"], "stranger": "fst_nope", "nobody": ""} {
		if resp := openEvents(t, base, tok); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("events for a %s: status %d; want 401", who, resp.StatusCode)
		}
	}
	operator, err := auth.OperatorToken(store)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(store.Dir(), ".fleetstate", "operator.token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator token file: %v, %v; want owner-only", fi, err)
	}
	lead := dial(t, ctx, url, tokens["lead"])
	for who, tok := range map[string]string{"lead": tokens["lead"], "operator": operator} {
		resp := openEvents(t, base, tok)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("events for the %s: status %d, %s", who, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		r := &sseReader{bufio.NewScanner(resp.Body)}
		ev, data, got := r.next()
		var snap fleetstate.Snapshot
		if !got || ev != "snapshot" || json.Unmarshal([]byte(data), &snap) != nil || len(snap.Members) != 1 {
			t.Fatalf("first event for the %s: %q %s; want the snapshot with member scout", who, ev, data)
		}
		o, err := lead.SendDetached(ctx, "scout", "watch me "+who)
		if err != nil {
			t.Fatal(err)
		}
		ev, data, got = r.next()
		var e fleetstate.Event
		if !got || ev != "event" || json.Unmarshal([]byte(data), &e) != nil || e.Kind != fleetstate.EventQueued || e.Ticket != o.Ticket || e.Content != "watch me "+who {
			t.Fatalf("event for the %s after a send: %q %s", who, ev, data)
		}
		resp.Body.Close()
	}
	if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool {
		for _, line := range logs.lines() {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "fleetstate: event" && rec["kind"] == "queued" && rec["member"] == "scout" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no structured log line of the queued event in %v", logs.lines())
	}
}

// TestNotifyCommand: Config.Notify runs its command with the event as
// JSON when a member asks.
func TestNotifyCommand(t *testing.T) {
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	out := filepath.Join(t.TempDir(), "notified")
	var logs logBuffer
	_, url := embed(t, daemon.Config{Dir: store.Dir(), Notify: "cat >> " + out + "; echo >> " + out,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead, scout := dial(t, ctx, url, tokens["lead"]), dial(t, ctx, url, tokens["scout"])
	o, err := lead.SendDetached(ctx, "scout", "task")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := scout.Next(ctx, 5*time.Second); err != nil || !ok {
		t.Fatalf("fleet_next: %v, %v; want the task", ok, err)
	}
	asked := make(chan error, 1)
	go func() {
		answer, _, err := scout.Ask(ctx, "which way?", "left")
		if err == nil {
			err = scout.Reply(ctx, "went "+answer)
		}
		asked <- err
	}()
	if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool {
		data, _ := os.ReadFile(out)
		return strings.Contains(string(data), `"kind":"asked"`) && strings.Contains(string(data), "which way?")
	}) {
		data, _ := os.ReadFile(out)
		t.Fatalf("notification file %q; want the asked event as JSON (logs %v)", data, logs.lines())
	}
	q, err := lead.Poll(ctx, o.Ticket, 0)
	if err != nil || q.Kind != fleetstate.OutcomeQuestion {
		t.Fatalf("fleet_poll: %+v, %v; want the question", q, err)
	}
	r, err := lead.Answer(ctx, q.TurnID, "right")
	if err != nil || r.Content != "went right" {
		t.Fatalf("fleet_send of the answer: %+v, %v; want the reply %q", r, err, "went right")
	}
	if err := <-asked; err != nil {
		t.Fatalf("the member: %v", err)
	}
}

// TestEventsEndAtRevocation: a lead's open event stream, by its bearer
// token and by its dashboard login, ends soon after the lead's tokens are
// revoked through the token file, as `fleetstate token revoke` does,
// whether or not an event comes meanwhile, and carries no brief sent
// after the revocation.
func TestEventsEndAtRevocation(t *testing.T) {
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{
		"idle": mcpadapter.RoleLead, "busy": mcpadapter.RoleLead, "boss": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	_, url := embed(t, serveConfig(store.Dir()))
	eventsEndAtRevocation(t, url, tokens, func(agent string) { revokeToken(t, store.Dir(), agent) }, true)
}

// TestEventsEndAtRevocationNATS: the same on a fleet kept in NATS, whose
// tokens are in the fleet's configuration bucket: a revocation through it,
// as `fleetstate token revoke --nats` makes it, ends the open streams.
func TestEventsEndAtRevocationNATS(t *testing.T) {
	cfg := &daemon.NATSConfig{URL: natstest.Run(t).URL(), Fleet: "events"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	file, closeFile, err := cfg.OpenTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFile)
	tokens := map[string]string{}
	for agent, role := range map[string]mcpadapter.Role{"idle": mcpadapter.RoleLead, "boss": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember} {
		if tokens[agent], err = file.Add(agent, role); err != nil {
			t.Fatal(err)
		}
	}
	_, url := embed(t, daemon.Config{NATS: cfg})
	if !fleettest.Until(20*time.Second, 50*time.Millisecond, func() bool {
		c, err := mcpadapter.Dial(ctx, url, tokens["boss"], "probe")
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatal("the daemon did not join the fleet")
	}
	eventsEndAtRevocation(t, url, tokens, func(agent string) {
		if _, err := file.Revoke(agent); err != nil {
			t.Fatal(err)
		}
	}, false)
}

// eventsEndAtRevocation opens the event streams of the leads idle (and, if
// busy, busy) of the daemon at url, by bearer and by dashboard login, and
// checks that they end soon after revoke revokes their tokens; busy's
// carry no brief that the lead boss sends right after the revocation.
func eventsEndAtRevocation(t *testing.T, url string, tokens map[string]string, revoke func(agent string), busy bool) {
	t.Helper()
	base := strings.TrimSuffix(url, "/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	boss := dial(t, ctx, url, tokens["boss"])
	if _, err := boss.Members(ctx); err != nil {
		t.Fatalf("fleet_members: %v", err)
	}

	// The promise is a second; the bound here leaves room for a loaded
	// machine and is still far below the heartbeat (15 s) that ended the
	// streams before.
	const bound = 5 * time.Second
	type ended struct {
		events []string // the data of the events read after the snapshot
		err    error
	}
	// watch opens lead's streams, by bearer and by cookie, and returns a
	// channel per stream that gets what it read once it ends.
	watch := func(lead string) map[string]chan ended {
		bearer := openEvents(t, base, tokens[lead])
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+events.Path, nil)
		cookie, err := dashboardClient(t, base, tokens[lead]).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cookie.Body.Close() })
		streams := map[string]chan ended{}
		for how, resp := range map[string]*http.Response{"bearer": bearer, "cookie": cookie} {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("events of %s by %s: %s", lead, how, resp.Status)
			}
			r := &sseReader{bufio.NewScanner(resp.Body)}
			if ev, _, ok := r.next(); !ok || ev != "snapshot" {
				t.Fatalf("events of %s by %s: first %q; want the snapshot", lead, how, ev)
			}
			done := make(chan ended, 1)
			streams[how] = done
			go func() {
				var e ended
				for {
					ev, data, ok := r.next()
					if !ok {
						e.err = r.sc.Err()
						done <- e
						return
					}
					if ev == "event" {
						e.events = append(e.events, data)
					}
				}
			}()
		}
		return streams
	}
	// ends waits for every stream to end, and returns what they read.
	ends := func(lead string, streams map[string]chan ended, revoked time.Time) []string {
		var read []string
		for how, done := range streams {
			select {
			case e := <-done:
				t.Logf("events of %s by %s ended %v after the revocation (%v)", lead, how, time.Since(revoked).Round(time.Millisecond), e.err)
				read = append(read, e.events...)
			case <-time.After(bound - time.Since(revoked)):
				t.Fatalf("events of %s by %s: still open %v after the token was revoked", lead, how, bound)
			}
		}
		return read
	}

	// No event comes: the revocation alone ends the streams.
	idle := watch("idle")
	revoke("idle")
	ends("idle", idle, time.Now())
	if !busy {
		return
	}

	// A brief sent right after the revocation does not reach the revoked.
	streams := watch("busy")
	revoke("busy")
	revoked := time.Now()
	if _, err := boss.SendDetached(ctx, "scout", "after the revocation"); err != nil {
		t.Fatal(err)
	}
	for _, data := range ends("busy", streams, revoked) {
		if strings.Contains(data, "after the revocation") {
			t.Errorf("the revoked lead got %s", data)
		}
	}
}
