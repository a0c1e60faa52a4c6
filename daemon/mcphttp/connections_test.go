package mcphttp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// connDaemon is the adapter over HTTP on 127.0.0.1, with the adapter at
// hand to see the connections it counts.
type connDaemon struct {
	t      *testing.T
	url    string
	dir    string
	a      *mcpadapter.Adapter
	conns  *mcphttp.Connections
	rv     *fleetstate.Rendezvous
	tokens map[string]string
}

func newConnDaemon(t *testing.T, rvOpts *fleetstate.RendezvousOptions) *connDaemon {
	t.Helper()
	k := adaptertest.Start(t, adaptertest.Options{
		Agents:     map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember, "miner": mcpadapter.RoleMember},
		Rendezvous: rvOpts,
	})
	return &connDaemon{t: t, url: k.URL, dir: k.Store.Dir(), a: k.Adapter, conns: k.Connections, rv: k.Rendezvous, tokens: k.Token}
}

// agent is one agent's MCP client, and the means to cut its connections.
type agent struct {
	c   *client.Client
	tr  *transport.StreamableHTTP
	net *fleettest.Cuttable
	e   *adaptertest.Checker
}

// connect connects as the agent named; with listen, the client holds a
// listening stream, as the fleetstate proxy does.
func (d *connDaemon) connect(name string, listen bool) *agent {
	d.t.Helper()
	n := fleettest.NewCuttable()
	d.t.Cleanup(n.CloseIdleConnections)
	var copts []client.ClientOption
	if !listen {
		copts = append(copts, client.WithLegacyProtocolOnly())
	}
	c, tr, err := adaptertest.Dial(context.Background(), d.url, &http.Client{Transport: fleettest.Bearer{Token: d.tokens[name], Base: n}},
		adaptertest.DialOptions{Name: name, ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Listen: listen, Client: copts})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	return &agent{c: c, tr: tr, net: n, e: adaptertest.NewChecker(d.t, d.dir, c)}
}

// waitStreams waits until member holds n listening streams.
func (d *connDaemon) waitStreams(member string, n int) {
	d.t.Helper()
	if !fleettest.Until(adaptertest.WaitLimit, 5*time.Millisecond, func() bool { return d.conns.Streams(member) == n }) {
		d.t.Fatalf("%s holds %d listening streams; want %d", member, d.conns.Streams(member), n)
	}
}

func (d *connDaemon) ready(lead *agent, member string) bool {
	d.t.Helper()
	for _, m := range lead.e.Ok(anon, "fleet_members", nil)["members"].([]any) {
		if mm := m.(map[string]any); mm["name"] == member {
			return mm["ready"] == true
		}
	}
	d.t.Fatalf("no member %s", member)
	return false
}

// TestMemberConnectionDropsMidTurn: a member whose process dies while it
// holds a turn (its connections cut, no goodbye) ends the turn as
// member_gone, and the lead's blocked send returns it; the member, once
// back, takes new work.
func TestMemberConnectionDropsMidTurn(t *testing.T) {
	d := newConnDaemon(t, shortPresence)
	ctx := context.Background()
	lead := d.connect("lead", false)
	scout := d.connect("scout", true)
	d.waitStreams("scout", 1)

	send := lead.e.Async(ctx, anon, "fleet_send", map[string]any{"to": "scout", "content": "work"}, nil)
	scout.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))
	scout.net.Kill()
	out := adaptertest.WantOutcome(t, lead.e.OkOf(lead.e.Recv(send)), "failed", "turn_id", "from", "content", "reason")
	if out["reason"] != "member_gone" || out["from"] != "scout" {
		t.Fatalf("outcome %v; want failed, member_gone, from scout", out)
	}
	if d.ready(lead, "scout") {
		t.Error("scout is still ready after its connection dropped")
	}
	// A turn the member opened elsewhere is not touched by others' drops,
	// and the member, back, takes work again.
	back := d.connect("scout", true)
	tk := adaptertest.Str(lead.e.Ok(anon, "fleet_send", map[string]any{"to": "scout", "content": "again", "wait": false}), "ticket")
	if msg := back.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10)); msg["content"] != "again" {
		t.Fatalf("fleet_next after reconnecting: %v", msg)
	}
	back.e.Ok(anon, "fleet_reply", map[string]any{"content": "done"})
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": tk}); p["content"] != "done" {
		t.Fatalf("poll %v", p)
	}
}

// TestMemberConnectionDropsMidAsk: a member that dies while its question
// waits for the lead: the ticket ends failed/member_gone, and the lead's
// answer is refused with a named error, not lost in the void.
func TestMemberConnectionDropsMidAsk(t *testing.T) {
	d := newConnDaemon(t, shortPresence)
	ctx := context.Background()
	lead := d.connect("lead", false)
	scout := d.connect("scout", true)
	d.waitStreams("scout", 1)

	send := lead.e.Async(ctx, anon, "fleet_send", map[string]any{"to": "scout", "content": "work"}, nil)
	scout.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))
	ask := scout.e.Async(ctx, anon, "fleet_ask", map[string]any{"question": "which branch?", "default": "main"}, nil)
	q := adaptertest.WantOutcome(t, lead.e.OkOf(lead.e.Recv(send)), "question", "turn_id", "ticket", "from", "content", "state")
	scout.net.Kill()
	if r := scout.e.Recv(ask); r.Err == nil && !r.Res.IsError {
		t.Errorf("the dropped member's ask returned an answer: %v", r.Res)
	}
	// The daemon sees the two connections go in either order: the ask's
	// request (the question is withdrawn, the ticket is working again),
	// and the stream (the turn ends). A poll returns at once while the
	// ticket holds a question, and waits while it is pending.
	p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": q["ticket"], "wait_s": 1})
	fleettest.Until(adaptertest.WaitLimit, 0, func() bool {
		if p["state"] == "done" {
			return true
		}
		if p["outcome"] == "question" {
			time.Sleep(5 * time.Millisecond)
		}
		p = lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": q["ticket"], "wait_s": 1})
		return false
	})
	if p["outcome"] != "failed" || p["reason"] != "member_gone" || p["state"] != "done" {
		t.Fatalf("ticket after the drop %v; want failed, member_gone", p)
	}
	lead.e.Fail(anon, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "release"}, fleetstate.CodeUnknownTurn)
	lead.e.Ok(anon, "fleet_ack", map[string]any{"ticket": q["ticket"]})
}

// shortPresence keeps a disconnected member's turn for a short window, for
// the tests of members that do not come back.
var shortPresence = &fleetstate.RendezvousOptions{PresenceWindow: 200 * time.Millisecond}

// TestMemberComesBackMidTurn: a member whose connection dies mid-turn (its
// daemon died, say) and that comes back within the presence window with a
// new session, as a proxy moving to another daemon does, keeps its turn:
// its reply reaches the lead's blocked send. The new session is the member
// come back, not a second connection superseding the first.
func TestMemberComesBackMidTurn(t *testing.T) {
	d := newConnDaemon(t, nil)
	ctx := context.Background()
	lead := d.connect("lead", false)
	scout := d.connect("scout", true)
	d.waitStreams("scout", 1)

	send := lead.e.Async(ctx, anon, "fleet_send", map[string]any{"to": "scout", "content": "work"}, nil)
	msg := scout.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))
	scout.net.Kill()
	d.waitStreams("scout", 0)
	back := d.connect("scout", true)
	d.waitStreams("scout", 1)
	back.e.Ok(anon, "fleet_reply", map[string]any{"turn_id": msg["turn_id"], "content": "done"})
	out := lead.e.OkOf(lead.e.Recv(send))
	if out["outcome"] != "reply" || out["content"] != "done" {
		t.Fatalf("send after the member came back = %v; want its reply", out)
	}
}

// TestMemberComesBackBeforeItsOldStreamIsSeenGone: the server may notice
// the death of a member's old connection (through a daemon that died) a
// moment after the member's new session calls: the call waits for it,
// and the new session takes the turn over.
func TestMemberComesBackBeforeItsOldStreamIsSeenGone(t *testing.T) {
	d := newConnDaemon(t, nil)
	ctx := context.Background()
	lead := d.connect("lead", false)
	scout := d.connect("scout", true)
	d.waitStreams("scout", 1)

	o := lead.e.Ok(anon, "fleet_send", map[string]any{"to": "scout", "content": "work", "wait": false})
	msg := scout.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))
	back := d.connect("scout", true)
	d.waitStreams("scout", 2)
	reply := back.e.Async(ctx, anon, "fleet_reply", map[string]any{"turn_id": msg["turn_id"], "content": "done"}, nil)
	time.Sleep(200 * time.Millisecond)
	scout.net.Kill() // seen now, after the new session's call
	back.e.OkOf(back.e.Recv(reply))
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["content"] != "done" {
		t.Fatalf("ticket = %v; want the reply", p)
	}
}

// TestMemberComesBackMidAsk: a member whose connection dies while its
// question waits keeps the question for the presence window: the lead
// answers it, and the member, back with a new session, asks again in the
// same turn and gets that answer.
func TestMemberComesBackMidAsk(t *testing.T) {
	d := newConnDaemon(t, nil)
	ctx := context.Background()
	lead := d.connect("lead", false)
	scout := d.connect("scout", true)
	d.waitStreams("scout", 1)

	o := lead.e.Ok(anon, "fleet_send", map[string]any{"to": "scout", "content": "work", "wait": false})
	msg := scout.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))
	args := map[string]any{"turn_id": msg["turn_id"], "question": "which branch?", "default": "main"}
	ask := scout.e.Async(ctx, anon, "fleet_ask", args, nil)
	if !fleettest.Until(adaptertest.WaitLimit, 5*time.Millisecond, func() bool {
		return lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]})["outcome"] == "question"
	}) {
		t.Fatal("the question never showed")
	}
	scout.net.Kill()
	scout.e.Recv(ask)
	d.waitStreams("scout", 0)
	time.Sleep(1500 * time.Millisecond) // past the grace of an abandoned question
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["outcome"] != "question" {
		t.Fatalf("ticket while the member is away = %v; want its question", p)
	}
	// The answer waits for the turn's outcome, which comes once the
	// member is back.
	answered := lead.e.Async(ctx, anon, "fleet_send", map[string]any{"turn_id": msg["turn_id"], "content": "release"}, nil)
	back := d.connect("scout", true)
	d.waitStreams("scout", 1)
	if a := back.e.Ok(anon, "fleet_ask", args); a["answer"] != "release" {
		t.Fatalf("fleet_ask after coming back = %v; want the lead's answer", a)
	}
	back.e.Ok(anon, "fleet_reply", map[string]any{"turn_id": msg["turn_id"], "content": "done"})
	if out := lead.e.OkOf(lead.e.Recv(answered)); out["content"] != "done" {
		t.Fatalf("answer = %v; want the reply", out)
	}
}

// TestMemberSessionClosed: a member without a listening stream that closes
// its session (a DELETE under its own token) is disconnected too; a DELETE
// of its session under another member's token is not.
func TestMemberSessionClosed(t *testing.T) {
	d := newConnDaemon(t, shortPresence)
	ctx := context.Background()
	lead := d.connect("lead", false)
	scout := d.connect("scout", false)

	o := lead.e.Ok(anon, "fleet_send", map[string]any{"to": "scout", "content": "work", "wait": false})
	scout.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))

	// miner, and the lead, try to end scout's session by its ID: refused.
	for _, who := range []string{"miner", "lead"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, d.url, nil)
		req.Header.Set("Authorization", "Bearer "+d.tokens[who])
		req.Header.Set("Mcp-Session-Id", scout.tr.GetSessionId())
		req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s's DELETE of scout's session: status %d; want 403", who, resp.StatusCode)
		}
	}
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["state"] != "working" {
		t.Fatalf("ticket after others' DELETEs %v; want still working", p)
	}
	// scout's own session still works.
	scout.e.Fail(anon, "get_session", nil, fleetstate.CodeNoActiveSession)

	scout2 := d.connect("scout", false)
	scout.c.Close() // DELETE under scout's own token; its second session stays
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["state"] != "working" {
		t.Fatalf("ticket with a second session open %v; want still working", p)
	}
	scout2.c.Close()
	p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"], "wait_s": 10})
	if p["outcome"] != "failed" || p["reason"] != "member_gone" {
		t.Fatalf("ticket after the member closed its sessions %v; want failed, member_gone", p)
	}
}

// TestMemberOneOfTwoStreamsDrops: a member holding two listening streams
// (two clients under one token) stays connected while one remains; the
// other client cannot answer the turn the first took.
func TestMemberOneOfTwoStreamsDrops(t *testing.T) {
	d := newConnDaemon(t, nil)
	lead := d.connect("lead", true) // a lead's stream means nothing to the members
	// A stream that opened this long before another's close is a second
	// connection, not the member come back.
	d.conns.SetReconnectGrace(50 * time.Millisecond)
	a := d.connect("scout", true)
	b := d.connect("scout", true)
	d.waitStreams("scout", 2)
	time.Sleep(100 * time.Millisecond)
	o := lead.e.Ok(anon, "fleet_send", map[string]any{"to": "scout", "content": "work", "wait": false})
	a.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))

	a.net.Kill()
	d.waitStreams("scout", 1)
	lead.net.Kill()
	lead = d.connect("lead", false)
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["state"] != "working" {
		t.Fatalf("ticket with one stream left %v; want still working", p)
	}
	// b's first fleet call supersedes a: a's turn ends, and b's reply
	// does not land on it.
	b.e.Fail(anon, "fleet_reply", map[string]any{"content": "from b"}, fleetstate.CodeNoOpenTurn)
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["reason"] != "member_gone" {
		t.Fatalf("ticket %v; want failed, member_gone", p)
	}
	b.net.Kill()
	d.waitStreams("scout", 0)
	if d.ready(lead, "scout") {
		t.Error("scout ready with no connection left")
	}
}

// TestRefusedStreamIsNoConnection: a listening request that is refused or
// fails never counts as a connection, so it cannot disconnect anyone.
func TestRefusedStreamIsNoConnection(t *testing.T) {
	d := newConnDaemon(t, nil)
	lead := d.connect("lead", false)
	scout := d.connect("scout", false)
	o := lead.e.Ok(anon, "fleet_send", map[string]any{"to": "scout", "content": "work", "wait": false})
	scout.e.Ok(anon, "fleet_next", adaptertest.WaitArgs(10))
	for _, h := range []map[string]string{
		{"Mcp-Protocol-Version": "1999-01-01"},                // unsupported version
		{"Mcp-Protocol-Version": mcp.ProtocolVersion20260728}, // no GET stream in this protocol
	} {
		req, _ := http.NewRequest(http.MethodGet, d.url, nil)
		req.Header.Set("Authorization", "Bearer "+d.tokens["scout"])
		req.Header.Set("Accept", "text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("GET with %v: status 200; want a refusal", h)
		}
	}
	if p := lead.e.Ok(anon, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["state"] != "working" {
		t.Fatalf("ticket after refused streams %v; want still working", p)
	}
}

// TestAckOfAnOutcomeJustReturned: on a connection with a session, the
// outcome a call returned is let go at that connection's next call; when
// that very call acks the ticket (as a lead is told to), or cancels it
// again, it finds it, rather than ERR_UNKNOWN_TICKET. The call after lets
// it go.
func TestAckOfAnOutcomeJustReturned(t *testing.T) {
	d := newConnDaemon(t, &fleetstate.RendezvousOptions{HoldReturned: time.Hour})
	lead := d.connect("lead", false)
	for _, next := range []string{"fleet_ack", "fleet_cancel"} {
		sent := lead.e.Ok(anon, "fleet_send", map[string]any{"to": "scout", "content": "never mind", "wait": false})
		tk := sent["ticket"]
		if o := lead.e.Ok(anon, "fleet_cancel", map[string]any{"ticket": tk}); o["reason"] != string(fleetstate.ReasonCancelled) {
			t.Fatalf("fleet_cancel = %v; want failed, cancelled", o)
		}
		lead.e.Ok(anon, next, map[string]any{"ticket": tk})
		lead.e.Ok(anon, "fleet_members", nil)
		lead.e.Fail(anon, "fleet_poll", map[string]any{"ticket": tk}, fleetstate.CodeUnknownTicket)
	}
}
