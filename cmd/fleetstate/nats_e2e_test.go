package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// End-to-end tests of issue 13, "Scale-out", with real processes on
// loopback: a 3-node cluster of `fleetstate nats` servers, daemons
// `fleetstate serve --nats` on it, tokens from `fleetstate token add
// --nats`, and agents that are mcpadapter clients (or `fleetstate mcp
// --connect` proxies). Across daemons: every flow with the lead on one
// daemon and its members on others. Faults: the owner daemon killed under
// load, a NATS server killed, a daemon cut off from NATS.

// natsLease is the daemons' --lease in these tests: short, so a takeover
// takes about two seconds rather than five, yet long enough that a
// renewal stalled a few hundred milliseconds by a loaded test machine
// does not give the fleet up in a test that is not about a takeover.
const natsLease = "2s"

// natsNode is a running `fleetstate nats`, one server of a cluster.
type natsNode struct {
	name string // its --name, as JetStream names a stream's leader
	url  string // its client URL
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer // guarded by mu
}

// kill ends the server with SIGKILL and waits for it to exit.
func (n *natsNode) kill() {
	if n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
}

func (n *natsNode) log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.logs.String()
}

// startNATSCluster starts a cluster of n `fleetstate nats` servers on
// loopback, each routed to the others, and waits until JetStream answers.
// The test's cleanup kills them before their directories are removed.
func startNATSCluster(t *testing.T, n int) []*natsNode {
	t.Helper()
	clients, routes := clusterAddrs(t, n)
	nodes := make([]*natsNode, n)
	for i := range n {
		nodes[i] = startNATSNode(t, fmt.Sprintf("n%d", i+1), "--addr", clients[i],
			"--cluster", routes[i], "--routes", otherRoutes(routes, i), "--cluster-name", "e2e")
	}
	nc := natsConn(t, natsURLs(nodes...))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if !fleettest.Until(30*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err == nil
	}) {
		for _, n := range nodes {
			t.Logf("%s:\n%s", n.name, n.log())
		}
		t.Fatalf("JetStream of the cluster did not answer within 30s: %v", err)
	}
	return nodes
}

// clusterAddrs returns, for a cluster of n servers on loopback, free
// client and cluster (route) addresses.
func clusterAddrs(t *testing.T, n int) (clients, routes []string) {
	t.Helper()
	clients, routes = make([]string, n), make([]string, n)
	for i := range n {
		clients[i], routes[i] = freeAddr(t), freeAddr(t)
	}
	return clients, routes
}

// otherRoutes returns the routes of every server but the i-th, as --routes
// takes them.
func otherRoutes(routes []string, i int) string {
	var others []string
	for j, r := range routes {
		if j != i {
			others = append(others, "nats-route://"+r)
		}
	}
	return strings.Join(others, ",")
}

// startNATSNode starts `fleetstate nats` with args, which must name its
// --addr: the default port, 4222, may be another test's.
func startNATSNode(t *testing.T, name string, args ...string) *natsNode {
	t.Helper()
	if !slices.Contains(args, "--addr") {
		t.Fatal("startNATSNode: no --addr in args")
	}
	dir := t.TempDir()
	cmd := exec.Command(binary, append([]string{"nats", "--name", name, "--store-dir", dir,
		"--max-store", "268435456", "--max-mem", "67108864", "--log-level", "warn"}, args...)...)
	n := &natsNode{name: name, cmd: cmd}
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.logs.Len() < 1<<16 {
			n.logs.Write(b)
		}
		return len(b), nil
	})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.kill)
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			url <- strings.TrimSpace(sc.Text())
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case n.url = <-url:
	case <-time.After(30 * time.Second):
		t.Fatalf("NATS server %s did not report its URL within 30s:\n%s", name, n.log())
	}
	return n
}

// natsURLs joins the nodes' client URLs as --nats takes them.
func natsURLs(nodes ...*natsNode) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.url
	}
	return strings.Join(urls, ",")
}

// natsConn is the test's own connection to the cluster, to look at
// JetStream as the daemons left it; closed at cleanup.
func natsConn(t *testing.T, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// natsFleet is the test's handle on the fleet's state in NATS, to read the
// lease; closed at cleanup.
func natsFleet(t *testing.T, urls string) *fleetnats.Fleet {
	t.Helper()
	f, err := fleetnats.Connect(context.Background(), fleetnats.Options{URL: urls, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// natsToken issues a token with `fleetstate token add --nats`, trying
// again while the cluster's JetStream is still electing its leaders.
func natsToken(t *testing.T, urls, agent, role string) string {
	t.Helper()
	var out []byte
	var err error
	if !fleettest.Until(30*time.Second, 200*time.Millisecond, func() bool {
		var stderr bytes.Buffer
		cmd := exec.Command(binary, "token", "add", "--nats", urls, "--agent", agent, "--role", role)
		cmd.Stderr = &stderr
		if out, err = cmd.Output(); err != nil {
			out = stderr.Bytes()
		}
		return err == nil
	}) {
		t.Fatalf("token add --nats %s: %v: %s", agent, err, out)
	}
	return strings.TrimSpace(string(out))
}

// natsTokenSet issues tokens to agents (agent to role).
func natsTokenSet(t *testing.T, urls string, agents map[string]string) map[string]string {
	t.Helper()
	tokens := make(map[string]string, len(agents))
	for agent, role := range agents {
		tokens[agent] = natsToken(t, urls, agent, role)
	}
	return tokens
}

// startNATSDaemon runs `fleetstate serve --nats urls --lease 1s` and args.
func startNATSDaemon(t *testing.T, urls string, args ...string) *daemonProc {
	t.Helper()
	return startServe(t, append([]string{"--nats", urls, "--lease", natsLease}, args...)...)
}

// owner returns the address the fleet's lease names, "" if none.
func owner(f *fleetnats.Fleet) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rec, ok, err := f.Owner(ctx)
	if err != nil || !ok {
		return ""
	}
	return rec.Addr
}

// waitOwner waits until the fleet's lease names the daemon at url.
func waitOwner(t *testing.T, f *fleetnats.Fleet, url string, within time.Duration) {
	t.Helper()
	var got string
	if !fleettest.Until(within, 50*time.Millisecond, func() bool {
		got = owner(f)
		return got == url
	}) {
		t.Fatalf("the fleet's owner after %v: %q; want %s", within, got, url)
	}
}

// dialNATS dials a daemon as an agent, trying again while the daemon has
// not joined the fleet yet; the test's cleanup closes the client.
func dialNATS(t *testing.T, url, token, name string) *mcpadapter.Client {
	t.Helper()
	var c *mcpadapter.Client
	var err error
	if !fleettest.Until(15*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err = mcpadapter.Dial(ctx, url, token, name)
		return err == nil
	}) {
		t.Fatalf("dial %s as %s: %v", url, name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// isToolError reports whether err is a tool's error result (the daemon
// answered), not a broken call.
func isToolError(err error) bool {
	var te *mcpadapter.ToolError
	return errors.As(err, &te)
}

// errKind names an error for the tallies: its code for a tool error,
// ERR_UNAVAILABLE where a daemon answered it to the HTTP request or to the
// connection's initialize, "broken" for a call that got no answer.
func errKind(err error) string {
	switch {
	case isToolError(err):
		return string(fleetstate.CodeOf(err))
	case strings.Contains(err.Error(), "status 503: "+string(fleetstate.CodeUnavailable)):
		return "HTTP 503 " + string(fleetstate.CodeUnavailable)
	case strings.Contains(err.Error(), "initialize with") && strings.Contains(err.Error(), string(fleetstate.CodeUnavailable)):
		return "dial " + string(fleetstate.CodeUnavailable)
	}
	return "broken"
}

// fleetAgent is an agent reaching a fleet through several daemons: it
// dials the first that answers and, when a call breaks or its daemon
// answers ERR_UNAVAILABLE, drops the connection so that its next call
// dials the next daemon, as `fleetstate mcp --connect URL1,URL2` does. It
// never repeats a call itself: a send that broke may have been accepted.
type fleetAgent struct {
	name, token string
	urls        []string
	moves       atomic.Int32

	mu sync.Mutex
	c  *mcpadapter.Client // guarded by mu; nil: dial at the next call
	at int                // guarded by mu; the index in urls of c's daemon
	// retired are the connections dropped, guarded by mu.
	retired []*mcpadapter.Client
}

func newFleetAgent(t *testing.T, name, token string, urls ...string) *fleetAgent {
	a := &fleetAgent{name: name, token: token, urls: urls}
	t.Cleanup(a.close)
	return a
}

func (a *fleetAgent) client(ctx context.Context) (*mcpadapter.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c != nil {
		return a.c, nil
	}
	var err error
	for range a.urls {
		// Longer than a daemon holds a request while the fleet changes
		// owner (three leases): it answers, rather than the dial giving up.
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		a.c, err = mcpadapter.Dial(dctx, a.urls[a.at], a.token, a.name)
		cancel()
		if err == nil {
			return a.c, nil
		}
		a.at = (a.at + 1) % len(a.urls)
	}
	return nil, err
}

// home puts a back on its first daemon: the next call dials it.
func (a *fleetAgent) home() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at != 0 && a.c != nil {
		a.retired = append(a.retired, a.c)
		a.c = nil
	}
	a.at = 0
}

// do runs fn on the agent's connection and returns its error.
func (a *fleetAgent) do(ctx context.Context, fn func(*mcpadapter.Client) error) error {
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	err = fn(c)
	if err != nil && (!isToolError(err) || fleetstate.CodeOf(err) == fleetstate.CodeUnavailable) {
		a.mu.Lock()
		if a.c == c {
			// Closed at the end, not now: closing cancels the calls
			// other goroutines have in flight on it.
			a.retired = append(a.retired, c)
			a.c = nil
			a.at = (a.at + 1) % len(a.urls)
			a.moves.Add(1)
		}
		a.mu.Unlock()
	}
	return err
}

func (a *fleetAgent) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c != nil {
		a.c.Close()
		a.c = nil
	}
	for _, c := range a.retired {
		c.Close()
	}
	a.retired = nil
}

// goCall runs fn on its own goroutine; its result arrives on the channel.
func goCall[T any](fn func() (T, error)) <-chan callResult[T] {
	ch := make(chan callResult[T], 1)
	go func() {
		v, err := fn()
		ch <- callResult[T]{v, err}
	}()
	return ch
}

type callResult[T any] struct {
	v   T
	err error
}

// recvOK receives a call's result within d and fails the test on an error.
func recvOK[T any](t *testing.T, what string, ch <-chan callResult[T], d time.Duration) T {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.v
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
	}
	panic("unreachable")
}

// nextMsg takes a member's next message, failing the test if none comes.
func nextMsg(ctx context.Context, t *testing.T, m *mcpadapter.Client, wait time.Duration) fleetstate.Message {
	t.Helper()
	msg, ok, err := m.Next(ctx, wait)
	if err != nil || !ok {
		t.Fatalf("fleet_next: %+v, %v, %v; want a message", msg, ok, err)
	}
	return msg
}

// memberInfo returns the lead's view of one member.
func memberInfo(ctx context.Context, t *testing.T, lead *mcpadapter.Client, name string) fleetstate.MemberInfo {
	t.Helper()
	ms, err := lead.Members(ctx)
	if err != nil {
		t.Fatalf("fleet_members: %v", err)
	}
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("fleet_members = %+v; no %s", ms, name)
	return fleetstate.MemberInfo{}
}

// pollDone polls a ticket until its turn ended, for at most within.
func pollDone(ctx context.Context, t *testing.T, lead *mcpadapter.Client, ticket string, within time.Duration) fleetstate.Outcome {
	t.Helper()
	var o fleetstate.Outcome
	var err error
	if !fleettest.Until(within, 0, func() bool {
		o, err = lead.Poll(ctx, ticket, time.Second)
		if err != nil {
			t.Fatalf("fleet_poll %s: %v", ticket, err)
		}
		return o.State == fleetstate.TicketDone
	}) {
		t.Fatalf("ticket %s did not end within %v: %+v", ticket, within, o)
	}
	return o
}

// ---- 1. across daemons --------------------------------------------------------

// TestNATSAcrossDaemons: three daemons on a 3-node cluster, the lead on
// A (the owner), members m1 on B and m2 on C, each forwarded to A: a
// blocking send returns when the reply lands; a clarification is answered
// by turn ID; a detached ticket is polled and acked; a queued and a
// working turn are cancelled; fleet_members shows who is ready; and a
// member behind `fleetstate mcp --connect` to B whose process dies
// mid-turn ends it member_gone.
func TestNATSAcrossDaemons(t *testing.T) {
	nodes := startNATSCluster(t, 3)
	urls := natsURLs(nodes...)
	tokens := natsTokenSet(t, urls, map[string]string{"lead": "lead", "m1": "member", "m2": "member", "m3": "member"})
	f := natsFleet(t, urls)
	args := []string{"--send-timeout", "20s", "--ask-timeout", "20s", "--rejoin-timeout", "2s"}
	a := startNATSDaemon(t, urls, args...)
	waitOwner(t, f, a.url, 15*time.Second)
	b := startNATSDaemon(t, urls, args...)
	c := startNATSDaemon(t, urls, args...)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lead := dialNATS(t, a.url, tokens["lead"], "lead")
	m1 := dialNATS(t, b.url, tokens["m1"], "m1")
	m2 := dialNATS(t, c.url, tokens["m2"], "m2")

	// Readiness: a member is ready once it called, through any daemon.
	for _, m := range []*mcpadapter.Client{m1, m2} {
		if _, ok, err := m.Next(ctx, 0); err != nil || ok {
			t.Fatalf("a first fleet_next: %v, %v; want none", ok, err)
		}
	}
	for name, want := range map[string]bool{"m1": true, "m2": true, "m3": false} {
		if got := memberInfo(ctx, t, lead, name); got.Ready != want {
			t.Errorf("fleet_members: %s = %+v; want ready %v", name, got, want)
		}
	}

	t.Run("blocking send", func(t *testing.T) {
		sent := goCall(func() (fleetstate.Outcome, error) { return lead.Send(ctx, "m1", "what is X?") })
		msg := nextMsg(ctx, t, m1, 10*time.Second)
		if msg.Content != "what is X?" || msg.From != "lead" || msg.TurnID == "" {
			t.Fatalf("m1 on B got %+v", msg)
		}
		start := time.Now()
		if err := m1.ReplyTurn(ctx, msg.TurnID, "X = 42"); err != nil {
			t.Fatal(err)
		}
		o := recvOK(t, "the blocking send", sent, 10*time.Second)
		if o.Kind != fleetstate.OutcomeReply || o.Content != "X = 42" || o.From != "m1" || o.TurnID != msg.TurnID {
			t.Fatalf("the blocking send returned %+v; want m1's reply", o)
		}
		t.Logf("the reply, sent on B, reached the lead's blocked call on A %v after fleet_reply was called", time.Since(start).Round(time.Microsecond))
	})

	t.Run("clarification", func(t *testing.T) {
		sent := goCall(func() (fleetstate.Outcome, error) { return lead.Send(ctx, "m2", "build the release") })
		msg := nextMsg(ctx, t, m2, 10*time.Second)
		type answer struct {
			text     string
			timedOut bool
		}
		asked := goCall(func() (answer, error) {
			text, timedOut, err := m2.AskTurn(ctx, msg.TurnID, "which branch?", "main")
			return answer{text, timedOut}, err
		})
		q := recvOK(t, "the blocking send", sent, 10*time.Second)
		if q.Kind != fleetstate.OutcomeQuestion || q.TurnID != msg.TurnID || q.Content != "which branch?" {
			t.Fatalf("the send returned %+v; want m2's question", q)
		}
		answered := goCall(func() (fleetstate.Outcome, error) { return lead.Answer(ctx, q.TurnID, "release-1") })
		if got := recvOK(t, "m2's fleet_ask", asked, 10*time.Second); got.text != "release-1" || got.timedOut {
			t.Fatalf("m2's fleet_ask = %+v; want the lead's answer", got)
		}
		if err := m2.ReplyTurn(ctx, msg.TurnID, "built release-1"); err != nil {
			t.Fatal(err)
		}
		if o := recvOK(t, "the answer", answered, 10*time.Second); o.Kind != fleetstate.OutcomeReply || o.Content != "built release-1" {
			t.Fatalf("the answer returned %+v; want m2's reply", o)
		}
	})

	t.Run("detached ticket", func(t *testing.T) {
		p, err := lead.SendDetached(ctx, "m1", "detached job")
		if err != nil || p.Kind != fleetstate.OutcomePending || p.Ticket == "" {
			t.Fatalf("detached send = %+v, %v; want pending with a ticket", p, err)
		}
		if o, err := lead.Poll(ctx, p.Ticket, 0); err != nil || o.State != fleetstate.TicketQueued {
			t.Fatalf("poll before delivery = %+v, %v; want queued", o, err)
		}
		msg := nextMsg(ctx, t, m1, 10*time.Second)
		if msg.TurnID != p.TurnID {
			t.Fatalf("m1 got %+v; want turn %s", msg, p.TurnID)
		}
		if o, err := lead.Poll(ctx, p.Ticket, 0); err != nil || o.State != fleetstate.TicketWorking {
			t.Fatalf("poll after delivery = %+v, %v; want working", o, err)
		}
		if err := m1.ReplyTurn(ctx, msg.TurnID, "detached done"); err != nil {
			t.Fatal(err)
		}
		if o := pollDone(ctx, t, lead, p.Ticket, 10*time.Second); o.Kind != fleetstate.OutcomeReply || o.Content != "detached done" {
			t.Fatalf("the ticket ended %+v; want m1's reply", o)
		}
		if err := lead.Ack(ctx, p.Ticket); err != nil {
			t.Fatal(err)
		}
		if _, err := lead.Poll(ctx, p.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("poll after ack: %v; want ERR_UNKNOWN_TICKET", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		queued, err := lead.SendDetached(ctx, "m2", "never mind this")
		if err != nil {
			t.Fatal(err)
		}
		working, err := lead.SendDetached(ctx, "m2", "stop this later")
		if err != nil {
			t.Fatal(err)
		}
		if o, err := lead.Cancel(ctx, queued.Ticket); err != nil || o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("cancel of a queued ticket = %+v, %v; want failed, cancelled", o, err)
		}
		// Acked by the lead's next call: on a connection with a session
		// (a client that fell back to the handshake of older protocols),
		// any later call would have let the returned outcome go.
		if err := lead.Ack(ctx, queued.Ticket); err != nil {
			t.Fatal(err)
		}
		msg := nextMsg(ctx, t, m2, 10*time.Second)
		if msg.TurnID != working.TurnID {
			t.Fatalf("m2 got %+v; want the second message (the first was cancelled)", msg)
		}
		if o, err := lead.Cancel(ctx, working.Ticket); err != nil || o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("cancel of a working ticket = %+v, %v; want failed, cancelled", o, err)
		}
		if err := m2.ReplyTurn(ctx, msg.TurnID, "too late"); !isToolError(err) {
			t.Fatalf("a reply to a cancelled turn: %v; want it refused", err)
		}
		if err := lead.Ack(ctx, working.Ticket); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("member gone", func(t *testing.T) {
		proxy := startRaw(t, []string{"FLEET_TOKEN=" + tokens["m3"], "FLEET_AGENT=", "FLEET_ROLE="}, "mcp", "--connect", b.url)
		p, err := lead.SendDetached(ctx, "m3", "long job")
		if err != nil {
			t.Fatal(err)
		}
		if msg := proxy.ok(proxy.call("fleet_next", map[string]any{"wait_s": 10})); msg["turn_id"] != p.TurnID {
			t.Fatalf("m3's fleet_next through the proxy = %v; want turn %s", msg, p.TurnID)
		}
		if m := memberInfo(ctx, t, lead, "m3"); !m.Ready || m.OpenTurn != p.TurnID {
			t.Fatalf("m3 mid-turn = %+v; want ready with turn %s open", m, p.TurnID)
		}
		proxy.kill(syscall.SIGKILL)
		start := time.Now()
		o := pollDone(ctx, t, lead, p.Ticket, 15*time.Second)
		if o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonMemberGone {
			t.Fatalf("the ticket after m3's process died = %+v; want failed, member_gone", o)
		}
		t.Logf("member_gone %v after the member's process was killed", time.Since(start).Round(time.Millisecond))
		if m := memberInfo(ctx, t, lead, "m3"); m.Ready {
			t.Errorf("m3 after its process died = %+v; want not ready", m)
		}
	})
}

// ---- 2. faults ------------------------------------------------------------------

// natsLedger is what every party of the load was told.
type natsLedger struct {
	mu       sync.Mutex
	accepted map[string]fleetstate.Outcome // guarded by mu; a message's content → what its send returned
	tickets  map[string]string             // guarded by mu; content → ticket, for sends that returned pending
	received map[string][]string           // guarded by mu; content → the members that took it
	// brokenNext counts fleet_next calls that got no answer from the
	// owner: a message marked delivered may have been lost with them.
	brokenNext int              // guarded by mu
	sendErrs   map[string]int   // guarded by mu; the failed sends by errKind
	sendErr    map[string]error // guarded by mu; the first failed send of each errKind
	memberErrs map[string]int   // guarded by mu; the members' failed calls by errKind
	slowest    time.Duration    // guarded by mu; the longest send call
	sent       atomic.Int64     // sends started
}

func newNATSLedger() *natsLedger {
	return &natsLedger{accepted: map[string]fleetstate.Outcome{}, tickets: map[string]string{},
		received: map[string][]string{}, sendErrs: map[string]int{}, sendErr: map[string]error{}, memberErrs: map[string]int{}}
}

func (l *natsLedger) acceptedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// sendBound is how long a send call may take: the daemons' --send-timeout
// and slack for a takeover (a call waits up to three leases for the next
// owner) or a raft election (a store write waits up to 5 s).
const (
	natsSendTimeout = 3 * time.Second
	sendBound       = natsSendTimeout + 12*time.Second
)

// leadLoad sends from worker w until stop is closed: mostly blocking
// sends, every fourth detached, round-robin over members. It never repeats
// a send that failed.
func leadLoad(t *testing.T, l *natsLedger, lead *fleetAgent, w int, members []string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		content := fmt.Sprintf("job %d.%d", w, i)
		to := members[(w+i)%len(members)]
		detached := i%4 == 3
		ctx, cancel := context.WithTimeout(context.Background(), sendBound)
		start := time.Now()
		var o fleetstate.Outcome
		l.sent.Add(1)
		err := lead.do(ctx, func(c *mcpadapter.Client) (err error) {
			if detached {
				o, err = c.SendDetached(ctx, to, content)
			} else {
				o, err = c.Send(ctx, to, content)
			}
			return err
		})
		took := time.Since(start)
		hung := ctx.Err() != nil
		cancel()
		l.mu.Lock()
		l.slowest = max(l.slowest, took)
		if err != nil {
			l.sendErrs[errKind(err)]++
			if l.sendErr[errKind(err)] == nil {
				l.sendErr[errKind(err)] = err
			}
			if hung {
				t.Errorf("send %q hung: no answer within %v (%v)", content, sendBound, err)
			}
		} else {
			l.accepted[content] = o
			if o.Kind == fleetstate.OutcomePending {
				l.tickets[content] = o.Ticket
			}
		}
		l.mu.Unlock()
		switch {
		case err != nil:
			time.Sleep(50 * time.Millisecond)
		case o.Kind == fleetstate.OutcomePending && o.Ticket == "":
			t.Errorf("send %q returned pending without a ticket: %+v", content, o)
		case detached && o.Kind != fleetstate.OutcomePending:
			t.Errorf("detached send %q returned %+v; want pending", content, o)
		case o.Kind == fleetstate.OutcomeReply && o.Content != "re: "+content:
			t.Errorf("send %q returned the reply %q", content, o.Content)
		}
	}
}

// memberLoad takes messages and replies to each, bound by turn ID, until
// stop is closed. A fleet_next that broke is sent again naming the turn
// the member took last, as `fleetstate mcp --connect` does, so that a
// message handed to the broken call is handed again.
func memberLoad(l *natsLedger, m *fleetAgent, stop <-chan struct{}) {
	took, again := "", false
	for {
		select {
		case <-stop:
			return
		default:
		}
		var msg fleetstate.Message
		var got bool
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := m.do(ctx, func(c *mcpadapter.Client) (err error) {
			// The turn taken last is named on every call, as the proxy
			// names it: a call held up in a paused daemon that reaches
			// the owner late is refused, not handed a message.
			if again || took != "" {
				msg, got, err = c.NextAfter(ctx, took, time.Second)
			} else {
				msg, got, err = c.Next(ctx, time.Second)
			}
			return err
		})
		cancel()
		if err != nil {
			l.mu.Lock()
			l.brokenNext++
			l.memberErrs["next "+errKind(err)]++
			l.mu.Unlock()
			again = true
			time.Sleep(50 * time.Millisecond)
			continue
		}
		again = false
		if !got {
			continue
		}
		took = msg.TurnID
		l.mu.Lock()
		l.received[msg.Content] = append(l.received[msg.Content], m.name)
		l.mu.Unlock()
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		err = m.do(ctx, func(c *mcpadapter.Client) error { return c.ReplyTurn(ctx, msg.TurnID, "re: "+msg.Content) })
		cancel()
		if err != nil {
			l.mu.Lock()
			l.memberErrs["reply "+errKind(err)]++
			l.mu.Unlock()
		}
	}
}

// TestNATSOwnerKilledUnderLoad: three daemons, A the owner; a lead on B
// sends from three workers to four members spread over A, B and C, who
// reply to everything. A is killed with SIGKILL mid-load: the members on
// A move to another daemon, another daemon takes the fleet over, and the
// load goes on. Then: no message was delivered twice; every accepted
// message was delivered, or its ticket ended with a named failure before
// it left its queue (none lost in transit: a member sends a broken
// fleet_next again with the turn it took last); every ticket the lead was handed stays pollable and ends; every
// send returned within its bound, with an outcome, pending with a ticket,
// or a named error.
func TestNATSOwnerKilledUnderLoad(t *testing.T) {
	faultUnderLoad(t, loadFault{name: "owner SIGKILL", takeover: true,
		hit: func(a, _, _ *daemonProc, _ []*natsNode) { a.kill(syscall.SIGKILL) }})
}

// TestNATSOwnerPausedUnderLoad is TestNATSOwnerKilledUnderLoad with the
// owner paused (SIGSTOP) for three leases and then resumed: another
// daemon takes the fleet over, and the old owner, back, serves nothing
// it kept.
func TestNATSOwnerPausedUnderLoad(t *testing.T) {
	faultUnderLoad(t, loadFault{name: "owner SIGSTOP", takeover: true,
		hit: func(a, _, _ *daemonProc, _ []*natsNode) { pauseFor(t, a.cmd.Process, 3) }})
}

// TestNATSForwarderFaultUnderLoad is the same load with a forwarding
// daemon killed (the lead's and a member's first) or paused for three
// leases (a member's first): they move on, and the fleet loses nothing.
func TestNATSForwarderFaultUnderLoad(t *testing.T) {
	t.Run("SIGKILL", func(t *testing.T) {
		faultUnderLoad(t, loadFault{name: "forwarder SIGKILL", leadHit: true,
			hit: func(_, b, _ *daemonProc, _ []*natsNode) { b.kill(syscall.SIGKILL) }})
	})
	t.Run("SIGSTOP", func(t *testing.T) {
		faultUnderLoad(t, loadFault{name: "forwarder SIGSTOP",
			hit: func(_, _, c *daemonProc, _ []*natsNode) { pauseFor(t, c.cmd.Process, 3) }})
	})
}

// TestNATSNodeFaultUnderLoad is the same load with the NATS server every
// daemon tries first killed, or paused for three leases.
func TestNATSNodeFaultUnderLoad(t *testing.T) {
	t.Run("SIGKILL", func(t *testing.T) {
		faultUnderLoad(t, loadFault{name: "NATS server SIGKILL",
			hit: func(_, _, _ *daemonProc, nodes []*natsNode) { nodes[0].kill() }})
	})
	t.Run("SIGSTOP", func(t *testing.T) {
		faultUnderLoad(t, loadFault{name: "NATS server SIGSTOP",
			hit: func(_, _, _ *daemonProc, nodes []*natsNode) { pauseFor(t, nodes[0].cmd.Process, 3) }})
	})
}

// pauseFor stops p (SIGSTOP) and resumes it leases leases later.
func pauseFor(t *testing.T, p *os.Process, leases int) {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lease, _ := time.ParseDuration(natsLease)
	resume := time.AfterFunc(time.Duration(leases)*lease, func() { _ = p.Signal(syscall.SIGCONT) })
	t.Cleanup(func() {
		if resume.Stop() {
			_ = p.Signal(syscall.SIGCONT)
		}
	})
}

// loadFault is what faultUnderLoad does to the fleet mid-load.
type loadFault struct {
	name string
	// hit strikes: a is the owner, b the lead's first daemon, c the
	// probe's; nodes[0] is every daemon's first NATS server.
	hit func(a, b, c *daemonProc, nodes []*natsNode)
	// takeover: the owner is hit, and the lease must pass.
	takeover bool
	// leadHit: the lead's daemon is hit, so a send may break without an
	// answer (and is then not counted as accepted).
	leadHit bool
}

// faultUnderLoad runs the load of TestNATSOwnerKilledUnderLoad and
// strikes the fleet with fault mid-load.
func faultUnderLoad(t *testing.T, fault loadFault) {
	nodes := startNATSCluster(t, 3)
	urls := natsURLs(nodes...)
	members := []string{"m1", "m2", "m3", "m4"}
	agents := map[string]string{"lead": "lead"}
	for _, m := range members {
		agents[m] = "member"
	}
	tokens := natsTokenSet(t, urls, agents)
	f := natsFleet(t, urls)
	args := []string{"--send-timeout", natsSendTimeout.String(), "--rejoin-timeout", "10s", "--ready-timeout", "20s"}
	a := startNATSDaemon(t, urls, args...)
	waitOwner(t, f, a.url, 15*time.Second)
	b := startNATSDaemon(t, urls, args...)
	c := startNATSDaemon(t, urls, args...)

	// Each agent's first daemon, then the others; the lead's are only
	// those that live through the kill, as the last check below assumes.
	lead := newFleetAgent(t, "lead", tokens["lead"], b.url, c.url)
	probe := newFleetAgent(t, "lead", tokens["lead"], c.url, b.url)
	ms := []*fleetAgent{
		newFleetAgent(t, "m1", tokens["m1"], a.url, b.url, c.url),
		newFleetAgent(t, "m2", tokens["m2"], b.url, c.url, a.url),
		newFleetAgent(t, "m3", tokens["m3"], c.url, a.url, b.url),
		newFleetAgent(t, "m4", tokens["m4"], a.url, c.url, b.url),
	}
	// Every daemon has joined: a call of each agent through its first
	// daemon works. A call refused while a daemon is joining moves the
	// agent on; it is put back, so that the lead starts on a daemon that
	// lives through the kill, as the last check below assumes.
	for _, ag := range append([]*fleetAgent{lead, probe}, ms...) {
		if !fleettest.Until(15*time.Second, 100*time.Millisecond, func() bool {
			ag.home()
			return ag.do(context.Background(), func(c *mcpadapter.Client) error {
				_, err := c.CurrentSession(context.Background())
				if fleetstate.CodeOf(err) == fleetstate.CodeNoActiveSession {
					err = nil
				}
				return err
			}) == nil
		}) {
			t.Fatalf("%s cannot reach the fleet", ag.name)
		}
	}

	l := newNATSLedger()
	stopLead, stopMembers := make(chan struct{}), make(chan struct{})
	var leadWG, memberWG sync.WaitGroup
	for _, m := range ms {
		memberWG.Go(func() { memberLoad(l, m, stopMembers) })
	}
	for w := range 3 {
		leadWG.Go(func() { leadLoad(t, l, lead, w, members, stopLead) })
	}
	stopLeadLoad := sync.OnceFunc(func() { close(stopLead); leadWG.Wait() })
	stopAll := sync.OnceFunc(func() { stopLeadLoad(); close(stopMembers); memberWG.Wait() })
	defer stopAll()

	if !fleettest.Until(20*time.Second, 20*time.Millisecond, func() bool { return l.acceptedCount() >= 30 }) {
		t.Fatalf("the load did not get going: %d sends accepted in 20s", l.acceptedCount())
	}
	before := l.acceptedCount()
	fault.hit(a, b, c, nodes)
	killed := time.Now()

	// The takeover: the lease names another daemon, and a lead call
	// through C (which forwarded to A) is answered again.
	var leaseMoved, served time.Duration
	if !fleettest.Until(30*time.Second, 20*time.Millisecond, func() bool {
		if leaseMoved == 0 {
			if o := owner(f); !fault.takeover || o != "" && o != a.url {
				leaseMoved = time.Since(killed)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := probe.do(ctx, func(c *mcpadapter.Client) error { _, err := c.Members(ctx); return err })
		if err == nil && leaseMoved != 0 {
			served = time.Since(killed)
			return true
		}
		return false
	}) {
		t.Fatalf("no daemon served the fleet within 30s of the %s; owner %q", fault.name, owner(f))
	}
	newOwner := owner(f)
	t.Logf("%s: the lease names %s after %v; fleet calls answered again after %v (--lease %s)",
		fault.name, newOwner, leaseMoved.Round(time.Millisecond), served.Round(time.Millisecond), natsLease)

	if !fleettest.Until(20*time.Second, 20*time.Millisecond, func() bool { return l.acceptedCount() >= before+30 }) {
		t.Errorf("the load did not go on after the takeover: %d sends accepted since the kill", l.acceptedCount()-before)
	}
	stopLeadLoad()

	// Drain: every ticket the lead was handed is still there and ends,
	// the members still working.
	l.mu.Lock()
	tickets := make(map[string]string, len(l.tickets))
	for content, tk := range l.tickets {
		tickets[content] = tk
	}
	l.mu.Unlock()
	final := map[string]fleetstate.Outcome{}
	deadline := time.Now().Add(30 * time.Second)
	for content, tk := range tickets {
		var o fleetstate.Outcome
		var err error
		fleettest.Until(time.Until(deadline), 0, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = lead.do(ctx, func(c *mcpadapter.Client) (err error) {
				o, err = c.Poll(ctx, tk, time.Second)
				return err
			})
			if err != nil && isToolError(err) && fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
				return true
			}
			return err == nil && o.State == fleetstate.TicketDone
		})
		switch {
		case err != nil:
			t.Errorf("the ticket of %q (%s): %v; want it pollable", content, tk, err)
		case o.State != fleetstate.TicketDone:
			t.Errorf("the ticket of %q did not end within the drain: %+v", content, o)
		default:
			final[content] = o
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := lead.do(ctx, func(c *mcpadapter.Client) error { return c.Ack(ctx, tk) }); err != nil {
				t.Errorf("ack %s: %v", tk, err)
			}
			cancel()
		}
	}
	stopAll()

	l.mu.Lock()
	defer l.mu.Unlock()
	for content, who := range l.received {
		if len(who) > 1 {
			t.Errorf("%q was delivered %d times (to %v)", content, len(who), who)
		}
	}
	var delivered, notDelivered, inTransit int
	reasons := map[string]int{}
	for content, o := range l.accepted {
		if fo, ok := final[content]; ok {
			o = fo
		}
		n := len(l.received[content])
		reasons[string(o.Kind)+"/"+string(o.Reason)]++
		switch {
		case n == 1:
			delivered++
			if o.Kind == fleetstate.OutcomeReply && o.Content != "re: "+content {
				t.Errorf("%q ended with the reply %q", content, o.Content)
			}
		case o.Kind == fleetstate.OutcomeFailed && o.Reason == fleetstate.ReasonMemberNotReady:
			notDelivered++ // never left its queue, and the lead was told
		case o.Kind == fleetstate.OutcomeTurnDone || o.Kind == fleetstate.OutcomeFailed && o.Reason == fleetstate.ReasonMemberGone:
			inTransit++ // marked delivered, and no member saw it
		case o.Kind == fleetstate.OutcomePending:
			t.Errorf("%q: accepted, never delivered, and no ticket that ended (%+v)", content, o)
		default:
			t.Errorf("%q: accepted, never delivered, ended %+v", content, o)
		}
	}
	if inTransit > 0 {
		t.Errorf("%d accepted messages were marked delivered but no member saw them (%d fleet_next calls broke, each sent again)", inTransit, l.brokenNext)
	}
	moves := 0
	for _, m := range ms {
		moves += int(m.moves.Load())
	}
	t.Logf("%d sends, %d accepted (%d tickets); delivered once %d, never left the queue %d, lost in transit %d; delivered twice: none reported above",
		l.sent.Load(), len(l.accepted), len(tickets), delivered, notDelivered, inTransit)
	t.Logf("final outcomes %v; failed sends %v; member errors %v; member reconnections %d; slowest send %v",
		sortedCounts(reasons), sortedCounts(l.sendErrs), sortedCounts(l.memberErrs), moves, l.slowest.Round(time.Millisecond))
	// Unless the lead's daemon was hit, every failed send was answered,
	// and named.
	for kind, n := range l.sendErrs {
		if !strings.Contains(kind, string(fleetstate.CodeUnavailable)) && !(fault.leadHit && kind == "broken") {
			t.Errorf("sends failed with %s (%d times, first: %v); want only ERR_UNAVAILABLE", kind, n, l.sendErr[kind])
		}
	}
}

// sortedCounts formats counts by key, in key order.
func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return "[" + b.String() + "]"
}

// streamLeader returns the name of the server that leads the stream.
func streamLeader(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	var leader string
	var err error
	if !fleettest.Until(10*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var s jetstream.Stream
		if s, err = js.Stream(ctx, stream); err != nil {
			return false
		}
		var info *jetstream.StreamInfo
		if info, err = s.Info(ctx); err != nil || info.Cluster == nil {
			return false
		}
		leader = info.Cluster.Leader
		return leader != ""
	}) {
		t.Fatalf("the leader of stream %s: %v", stream, err)
	}
	return leader
}

// TestNATSServerKilled: the NATS server that leads the fleet's turns
// stream is killed with SIGKILL. Daemon A (given all three servers) owns
// the fleet; daemon D was given only the killed server. Every file put
// before is readable after, every turn is restored (queued ones delivered
// in order, the open one answered by turn ID), and the time until writes
// and fleet calls are answered again is measured. D, cut off, answers
// ERR_UNAVAILABLE (a tool error, or HTTP 503 to a plain request) and
// never anything else.
func TestNATSServerKilled(t *testing.T) {
	nodes := startNATSCluster(t, 3)
	urls := natsURLs(nodes...)
	tokens := natsTokenSet(t, urls, map[string]string{"lead": "lead", "m1": "member", "m2": "member"})
	f := natsFleet(t, urls)
	args := []string{"--rejoin-timeout", "60s", "--ready-timeout", "60s", "--send-timeout", "10s"}
	a := startNATSDaemon(t, urls, args...)
	waitOwner(t, f, a.url, 15*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	lead := dialNATS(t, a.url, tokens["lead"], "lead")
	if _, err := lead.NewSession(ctx, "before the kill"); err != nil {
		t.Fatal(err)
	}
	files := map[fleetstate.FileID]string{}
	for i := range 5 {
		content := fmt.Sprintf("file %d, put before the kill", i)
		id, err := lead.Put(ctx, "lead", fmt.Sprintf("notes/%d.md", i), []byte(content), false)
		if err != nil {
			t.Fatal(err)
		}
		files[id] = content
	}
	// Two messages queued for m1 (not connected), one turn open on m2.
	var queued []fleetstate.Outcome
	for i := range 2 {
		o, err := lead.SendDetached(ctx, "m1", fmt.Sprintf("queued %d", i))
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, o)
	}
	m2 := dialNATS(t, a.url, tokens["m2"], "m2")
	open, err := lead.SendDetached(ctx, "m2", "open turn")
	if err != nil {
		t.Fatal(err)
	}
	if msg := nextMsg(ctx, t, m2, 10*time.Second); msg.TurnID != open.TurnID {
		t.Fatalf("m2 got %+v; want turn %s", msg, open.TurnID)
	}

	nc := natsConn(t, urls)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	leaderName := streamLeader(t, js, "KV_"+fleetnats.DefaultFleet+"-turns")
	var victim *natsNode
	for _, n := range nodes {
		if n.name == leaderName {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("the turns stream's leader %q is none of the cluster's servers", leaderName)
	}
	d := startNATSDaemon(t, victim.url, args...)
	leadD := dialNATS(t, d.url, tokens["lead"], "lead on D")
	if _, err := leadD.Members(ctx); err != nil {
		t.Fatalf("fleet_members through D before the kill: %v", err)
	}

	victim.kill()
	killed := time.Now()
	t.Logf("killed %s, the leader of the turns stream", victim.name)

	// Service back on A: a put, then a send (a write of the turns).
	var putBack, sendBack time.Duration
	var afterID fleetstate.FileID
	if !fleettest.Until(30*time.Second, 100*time.Millisecond, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		if putBack == 0 {
			id, err := lead.Put(cctx, "lead", "notes/after.md", []byte("put after the kill"), true)
			if err != nil {
				return false
			}
			afterID, putBack = id, time.Since(killed)
		}
		o, err := lead.SendDetached(cctx, "m1", "queued after the kill")
		if err != nil {
			return false
		}
		queued = append(queued, o)
		sendBack = time.Since(killed)
		return true
	}) {
		t.Fatalf("A did not serve within 30s of the kill (puts back after %v)", putBack)
	}
	t.Logf("NATS server SIGKILL: puts answered again after %v, sends after %v", putBack.Round(time.Millisecond), sendBack.Round(time.Millisecond))

	// Nothing acknowledged was lost.
	for id, want := range files {
		got, err := lead.Get(ctx, id)
		if err != nil || string(got) != want {
			t.Errorf("get %s after the kill: %q, %v; want %q", id, got, err, want)
		}
	}
	for _, q := range queued {
		if o, err := lead.Poll(ctx, q.Ticket, 0); err != nil || o.State != fleetstate.TicketQueued {
			t.Errorf("queued ticket after the kill: %+v, %v; want still queued", o, err)
		}
	}
	if o, err := lead.Poll(ctx, open.Ticket, 0); err != nil || o.State != fleetstate.TicketWorking {
		t.Errorf("open ticket after the kill: %+v, %v; want still working", o, err)
	}
	if err := m2.ReplyTurn(ctx, open.TurnID, "done after the kill"); err != nil {
		t.Fatalf("m2's reply to its restored turn: %v", err)
	}
	if o := pollDone(ctx, t, lead, open.Ticket, 10*time.Second); o.Kind != fleetstate.OutcomeReply || o.Content != "done after the kill" {
		t.Errorf("the open turn ended %+v; want m2's reply", o)
	}
	m1 := dialNATS(t, a.url, tokens["m1"], "m1")
	// In order; a send after the kill that timed out may have been
	// accepted too, and comes in its place.
	for i := 0; i < len(queued); {
		q := queued[i]
		msg := nextMsg(ctx, t, m1, 10*time.Second)
		if msg.TurnID != q.TurnID && msg.Content != "queued after the kill" {
			t.Fatalf("m1's message %d after the kill: %+v; want turn %s", i, msg, q.TurnID)
		}
		if err := m1.ReplyTurn(ctx, msg.TurnID, "r"+msg.Content); err != nil {
			t.Fatal(err)
		}
		if msg.TurnID != q.TurnID {
			continue
		}
		if o := pollDone(ctx, t, lead, q.Ticket, 10*time.Second); o.Kind != fleetstate.OutcomeReply || o.Content != "r"+msg.Content {
			t.Errorf("queued ticket %d ended %+v", i, o)
		}
		i++
	}

	// D was given only the killed server; the client learnt the others
	// from it and reconnected, so D serves, fresh.
	var dErr error
	if !fleettest.Until(15*time.Second, 100*time.Millisecond, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		defer ccancel()
		var got []byte
		if got, dErr = leadD.Get(cctx, afterID); dErr == nil && string(got) != "put after the kill" {
			t.Fatalf("D, after the election, reads %q; want the put after the kill", got)
		}
		return dErr == nil
	}) {
		t.Errorf("D, whose only named server died, did not serve within 15s of the election: %v", dErr)
	} else {
		t.Logf("D, whose only named server died, serves again %v after the kill", time.Since(killed).Round(time.Millisecond))
	}

	// Cut off: the two other servers killed too, A and D answer
	// ERR_UNAVAILABLE within a bound, and nothing else from then on.
	for _, n := range nodes {
		n.kill()
	}
	cut := time.Now()
	for _, c := range []struct {
		name   string
		url    string
		client *mcpadapter.Client
	}{{"A, the owner", a.url, lead}, {"D, forwarding", d.url, leadD}} {
		var first time.Duration
		var answered int
		fleettest.Until(15*time.Second, 50*time.Millisecond, func() bool {
			cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
			defer ccancel()
			_, err := c.client.Members(cctx)
			switch {
			case err == nil:
				if first != 0 {
					t.Fatalf("%s, cut off from NATS, answered fleet_members %v after the cut (ERR_UNAVAILABLE first at %v)", c.name, time.Since(cut), first)
				}
				answered++
			// ERR_UNAVAILABLE as the tool's error, or as a 503 when the
			// answer was computed just before the proof of ownership
			// lapsed (provenWriter), which clients take alike.
			case errKind(err) == string(fleetstate.CodeUnavailable), errKind(err) == "HTTP 503 "+string(fleetstate.CodeUnavailable):
				if first == 0 {
					first = time.Since(cut)
				}
			default:
				t.Fatalf("%s, cut off from NATS: %v; want ERR_UNAVAILABLE", c.name, err)
			}
			return first != 0 && time.Since(cut) > first+2*time.Second
		})
		if first == 0 {
			t.Errorf("%s, cut off from NATS, never answered ERR_UNAVAILABLE in 15s", c.name)
			continue
		}
		t.Logf("%s, cut off from NATS: ERR_UNAVAILABLE %v after the cut (%d calls answered before)", c.name, first.Round(time.Millisecond), answered)
		req, err := http.NewRequest(http.MethodGet, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Close = true // no idle connection left behind
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), string(fleetstate.CodeUnavailable)) {
			t.Errorf("a plain GET of %s, cut off: %s %q; want 503 with ERR_UNAVAILABLE", c.name, resp.Status, body)
		}
	}
}
