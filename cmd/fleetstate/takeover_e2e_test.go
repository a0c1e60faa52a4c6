package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// Faults of daemons that die or stall while agents are mid-call, with real
// processes: three `fleetstate nats` nodes, three `fleetstate serve --nats`
// daemons (A, the owner, then B and C), members behind `fleetstate mcp
// --connect` proxies.

// natsTrio is a fleet of three daemons on a three-node cluster; A owns it.
type natsTrio struct {
	urls    string
	f       *fleetnats.Fleet
	a, b, c *daemonProc
	tokens  map[string]string
}

func startNATSTrio(t *testing.T, agents map[string]string, args ...string) *natsTrio {
	t.Helper()
	nodes := startNATSCluster(t, 3)
	tr := &natsTrio{urls: natsURLs(nodes...)}
	tr.tokens = natsTokenSet(t, tr.urls, agents)
	tr.f = natsFleet(t, tr.urls)
	tr.a = startNATSDaemon(t, tr.urls, args...)
	waitOwner(t, tr.f, tr.a.url, 15*time.Second)
	tr.b = startNATSDaemon(t, tr.urls, args...)
	tr.c = startNATSDaemon(t, tr.urls, args...)
	// B and C serve once they have joined: a lead's call through each.
	for _, d := range []*daemonProc{tr.b, tr.c} {
		c := dialNATS(t, d.url, tr.tokens["lead"], "lead")
		if !fleettest.Until(15*time.Second, 100*time.Millisecond, func() bool {
			_, err := c.Members(context.Background())
			return err == nil
		}) {
			t.Fatalf("the daemon at %s does not serve the fleet", d.url)
		}
	}
	return tr
}

// proxyFor starts `fleetstate mcp --connect URLS` as agent.
func (tr *natsTrio) proxyFor(t *testing.T, agent string, urls ...string) *rawProc {
	t.Helper()
	return startRaw(t, []string{"FLEET_TOKEN=" + tr.tokens[agent], "FLEET_AGENT=", "FLEET_ROLE="},
		"mcp", "--connect", strings.Join(urls, ","))
}

// waitQuestion polls ticket until it holds a question.
func waitQuestion(ctx context.Context, t *testing.T, lead *mcpadapter.Client, ticket string) {
	t.Helper()
	if !fleettest.Until(15*time.Second, 20*time.Millisecond, func() bool {
		o, err := lead.Poll(ctx, ticket, 0)
		return err == nil && o.Kind == fleetstate.OutcomeQuestion
	}) {
		t.Fatalf("ticket %s never showed its question", ticket)
	}
}

// TestNATSMemberKeepsTurnWhenItsDaemonDies: a member whose daemon is
// killed mid-turn is on another daemon within its presence window and
// keeps the turn: its reply lands. A question pending when the next daemon
// under it dies is kept too: the lead answers it, and the member's
// fleet_ask, sent again by its proxy, returns that answer.
func TestNATSMemberKeepsTurnWhenItsDaemonDies(t *testing.T) {
	tr := startNATSTrio(t, map[string]string{"lead": "lead", "m1": "member"})
	ctx := context.Background()
	lead := dialNATS(t, tr.a.url, tr.tokens["lead"], "lead")
	m1 := tr.proxyFor(t, "m1", tr.b.url, tr.c.url, tr.a.url)

	// A turn across B's death.
	p1, err := lead.SendDetached(ctx, "m1", "first job")
	if err != nil {
		t.Fatal(err)
	}
	if msg := m1.ok(m1.call("fleet_next", map[string]any{"wait_s": 10})); msg["turn_id"] != p1.TurnID {
		t.Fatalf("m1's fleet_next = %v; want turn %s", msg, p1.TurnID)
	}
	tr.b.kill(syscall.SIGKILL)
	killed := time.Now()
	// The member replies once its proxy is on the next daemon (a reply
	// in flight at the kill may or may not have landed: that call
	// answers ERR_UNAVAILABLE).
	moved := func(n int) bool {
		return fleettest.Until(10*time.Second, 2*time.Millisecond, func() bool {
			return strings.Count(m1.errText(), "connected to a daemon") >= n
		})
	}
	if !moved(2) {
		t.Fatalf("m1's proxy did not move to the next daemon: %s", m1.errText())
	}
	t.Logf("m1's proxy was on the next daemon %v after its daemon was killed", time.Since(killed).Round(time.Millisecond))
	m1.ok(m1.call("fleet_reply", map[string]any{"turn_id": p1.TurnID, "content": "first done"}))
	if o := pollDone(ctx, t, lead, p1.Ticket, 15*time.Second); o.Kind != fleetstate.OutcomeReply || o.Content != "first done" {
		t.Fatalf("ticket after m1's daemon died = %+v; want m1's reply", o)
	}

	// A question across C's death.
	p2, err := lead.SendDetached(ctx, "m1", "second job")
	if err != nil {
		t.Fatal(err)
	}
	if msg := m1.ok(m1.call("fleet_next", map[string]any{"wait_s": 10})); msg["turn_id"] != p2.TurnID {
		t.Fatalf("m1's fleet_next = %v; want turn %s", msg, p2.TurnID)
	}
	asked := m1.call("fleet_ask", map[string]any{"turn_id": p2.TurnID, "question": "which branch?", "default": "main"})
	waitQuestion(ctx, t, lead, p2.Ticket)
	tr.c.kill(syscall.SIGKILL)
	if !moved(3) {
		t.Fatalf("m1's proxy did not move to the next daemon: %s", m1.errText())
	}
	answered := goCall(func() (fleetstate.Outcome, error) { return lead.Answer(ctx, p2.TurnID, "release") })
	if a := m1.ok(asked); a["answer"] != "release" {
		t.Fatalf("m1's fleet_ask across its daemon's death = %v; want the lead's answer", a)
	}
	m1.ok(m1.call("fleet_reply", map[string]any{"turn_id": p2.TurnID, "content": "second done"}))
	if o := recvOK(t, "the lead's answer", answered, 30*time.Second); o.Kind != fleetstate.OutcomeReply || o.Content != "second done" {
		t.Fatalf("the lead's answer returned %+v; want m1's reply", o)
	}
}

// TestNATSForwarderWhileOwnerDead: while the owner is dead and its lease
// not yet passed, a forwarder answers every request, bodiless ones too
// (a listening stream's GET, a session's DELETE), never an empty reply or
// a panic; and it refuses a request under a Host that is not local before
// forwarding it, as the owner would.
func TestNATSForwarderWhileOwnerDead(t *testing.T) {
	tr := startNATSTrio(t, map[string]string{"lead": "lead", "m1": "member"})

	// A rebound Host, on the forwarder: refused, not proxied.
	for _, c := range []struct {
		method, path, token, body string
	}{
		{http.MethodGet, "/events", tr.tokens["lead"], ""},
		{http.MethodPost, "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`},
	} {
		req, _ := http.NewRequest(c.method, strings.TrimSuffix(tr.b.url, "/mcp")+c.path, strings.NewReader(c.body))
		req.Host = "evil.example"
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s under Host evil.example through a forwarder: status %d; want 403", c.method, c.path, resp.StatusCode)
		}
	}

	tr.a.kill(syscall.SIGKILL)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 8 {
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodDelete
		}
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 200 * time.Millisecond)
			req, _ := http.NewRequest(method, tr.b.url, nil)
			req.Header.Set("Authorization", "Bearer "+tr.tokens["m1"])
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", "mcp-session-gone-with-the-owner")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			resp, err := client.Do(req)
			if err != nil {
				errs <- fmt.Sprintf("%s /mcp while the owner is dead: %v; want a status", method, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				errs <- fmt.Sprintf("%s /mcp: 503 without Retry-After", method)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, line := range tr.b.lines() {
		if strings.Contains(line, "panic") {
			t.Errorf("the forwarder panicked: %.200s", line)
		}
	}
}

// TestNATSTakeoverWaitsInsteadOfFailing: members waiting in fleet_next
// when the owner is killed, one through a proxy to the owner itself and
// one through a proxy to a forwarder, and a member whose call (naming its
// last turn) reaches a forwarder during the takeover, never see
// ERR_UNAVAILABLE: their calls wait for the new owner, and a message sent
// after the takeover reaches each of them.
func TestNATSTakeoverWaitsInsteadOfFailing(t *testing.T) {
	tr := startNATSTrio(t, map[string]string{"lead": "lead", "m1": "member", "m2": "member", "m3": "member"})
	ctx := context.Background()
	m1 := tr.proxyFor(t, "m1", tr.a.url, tr.b.url, tr.c.url)
	m2 := tr.proxyFor(t, "m2", tr.b.url, tr.c.url)
	m3 := dialNATS(t, tr.c.url, tr.tokens["m3"], "m3")
	lead := dialNATS(t, tr.c.url, tr.tokens["lead"], "lead")
	for _, m := range []string{"m1", "m2"} {
		if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool { return memberInfo(ctx, t, lead, m).Ready }) {
			t.Fatalf("%s never ready", m)
		}
	}
	next1 := m1.call("fleet_next", map[string]any{"wait_s": 40})
	next2 := m2.call("fleet_next", map[string]any{"wait_s": 40})
	time.Sleep(300 * time.Millisecond) // both calls are waiting on the owner

	tr.a.kill(syscall.SIGKILL)
	killed := time.Now()
	next3 := goCall(func() (fleetstate.Message, error) {
		// Named "" (no turn taken yet), as the proxy sends a call again:
		// a plain fleet_next can still reach the dying owner over a kept
		// connection, and may then have taken a message, so that it is
		// rightly answered ERR_UNAVAILABLE; this one is safe to send on.
		msg, ok, err := m3.NextAfter(ctx, "", 30*time.Second)
		if err == nil && !ok {
			err = fmt.Errorf("no message")
		}
		return msg, err
	})
	var sent map[string]string
	if !fleettest.Until(30*time.Second, 50*time.Millisecond, func() bool {
		for _, m := range []string{"m1", "m2", "m3"} {
			if sent[m] != "" {
				continue
			}
			o, err := lead.SendDetached(ctx, m, "after the takeover, "+m)
			if err != nil {
				return false
			}
			if sent == nil {
				sent = map[string]string{}
			}
			sent[m] = o.TurnID
		}
		return true
	}) {
		t.Fatalf("the lead could not send after the takeover: %v", sent)
	}
	t.Logf("the lead sent again %v after the owner was killed", time.Since(killed).Round(time.Millisecond))
	for m, ch := range map[string]<-chan rpcReply{"m1": next1, "m2": next2} {
		r := m1.wait(ch, 60*time.Second)
		if r.Result == nil || r.Result.IsError {
			t.Errorf("%s's fleet_next across the takeover: %+v %+v; want its message", m, r.Result, r.Error)
			continue
		}
		if got := r.Result.StructuredContent["turn_id"]; got != sent[m] {
			t.Errorf("%s's fleet_next across the takeover = %v; want turn %s", m, r.Result.StructuredContent, sent[m])
		}
	}
	if msg := recvOK(t, "m3's fleet_next during the takeover", next3, 60*time.Second); msg.TurnID != sent["m3"] {
		t.Errorf("m3's fleet_next during the takeover = %+v; want turn %s", msg, sent["m3"])
	}
}

// TestNATSPausedOwnerAnswersNothingStale: an owner paused (SIGSTOP) past
// its lease, while another daemon takes the fleet over and moves on, does
// not answer from what it kept once resumed: a lead's fleet_poll and
// fleet_members through it show the new owner's state.
func TestNATSPausedOwnerAnswersNothingStale(t *testing.T) {
	tr := startNATSTrio(t, map[string]string{"lead": "lead", "m1": "member"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	viaA := dialNATS(t, tr.a.url, tr.tokens["lead"], "lead")

	t1, err := viaA.SendDetached(ctx, "m1", "before the pause")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := viaA.Poll(ctx, t1.Ticket, 0); o.State != fleetstate.TicketQueued {
		t.Fatalf("t1 before the pause = %+v; want queued", o)
	}

	if err := tr.a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = tr.a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	// B or C takes over; the member takes t1 there and replies, the lead
	// acks it and queues t2, both on the new owner.
	var next string
	if !fleettest.Until(30*time.Second, 50*time.Millisecond, func() bool {
		next = owner(tr.f)
		return next != "" && next != tr.a.url
	}) {
		t.Fatalf("no daemon took the fleet over from the paused owner: %q", next)
	}
	viaB := dialNATS(t, next, tr.tokens["lead"], "lead")
	m1 := dialNATS(t, next, tr.tokens["m1"], "m1")
	msg, ok, err := m1.Next(ctx, 30*time.Second)
	if err != nil || !ok || msg.TurnID != t1.TurnID {
		t.Fatalf("m1's fleet_next after the takeover = %+v, %v, %v; want t1", msg, ok, err)
	}
	if err := m1.ReplyTurn(ctx, t1.TurnID, "done"); err != nil {
		t.Fatal(err)
	}
	if o := pollDone(ctx, t, viaB, t1.Ticket, 15*time.Second); o.Content != "done" {
		t.Fatalf("t1 = %+v; want the reply", o)
	}
	if err := viaB.Ack(ctx, t1.Ticket); err != nil {
		t.Fatal(err)
	}
	t2, err := viaB.SendDetached(ctx, "m1", "after the takeover")
	if err != nil {
		t.Fatal(err)
	}
	if got := owner(tr.f); got == tr.a.url || got == "" {
		t.Fatalf("the fleet's owner while A is paused: %q; want B or C", got)
	}

	// The calls through A are sent while it is still paused: they wait in
	// its socket, and it reads them the instant it resumes, before it
	// could have heard from NATS that its lease is gone.
	polled := goCall(func() ([]fleetstate.Outcome, error) { return viaA.PollAll(ctx, 0) })
	listed := goCall(func() ([]fleetstate.MemberInfo, error) { return viaA.Members(ctx) })
	time.Sleep(300 * time.Millisecond)
	if err := tr.a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	pr := <-polled
	all, err := pr.v, pr.err
	if err == nil {
		for _, o := range all {
			if o.Ticket == t1.Ticket {
				t.Errorf("fleet_poll through the resumed owner shows t1: %+v; it was acked", o)
			}
		}
		if !hasTicket(all, t2.Ticket) {
			t.Errorf("fleet_poll through the resumed owner = %+v; want t2", all)
		}
	} else if fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Errorf("fleet_poll through the resumed owner: %v; want the fleet's state or ERR_UNAVAILABLE", err)
	}
	if lr := <-listed; lr.err == nil {
		m := lr.v
		for _, mi := range m {
			if mi.Name == "m1" && mi.Queued != 1 {
				t.Errorf("fleet_members through the resumed owner: m1 = %+v; want t2 queued", mi)
			}
		}
	} else if fleetstate.CodeOf(lr.err) != fleetstate.CodeUnavailable {
		t.Errorf("fleet_members through the resumed owner: %v; want the fleet's state or ERR_UNAVAILABLE", lr.err)
	}
}

func hasTicket(all []fleetstate.Outcome, ticket string) bool {
	for _, o := range all {
		if o.Ticket == ticket {
			return true
		}
	}
	return false
}
