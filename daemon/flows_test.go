package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/internal/fleettest/mcptest"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP flows over HTTP, through an embedded daemon and the official
// MCP Go SDK as an independent client.

// fleet is a daemon with a lead and two members connected over HTTP.
type fleet struct {
	url    string
	tokens map[string]string
	lead   *mcp.ClientSession
	m1, m2 *mcp.ClientSession
}

// newFleet embeds a daemon of cfg on a new state directory where a lead
// and the members m1 and m2 hold tokens, and connects them.
func newFleet(t *testing.T, cfg daemon.Config) *fleet {
	t.Helper()
	store, tokens := adaptertest.OpenStore(t)
	f := &fleet{tokens: adaptertest.AddTokens(t, tokens, map[string]mcpadapter.Role{
		"lead": mcpadapter.RoleLead, "m1": mcpadapter.RoleMember, "m2": mcpadapter.RoleMember})}
	cfg.Dir = store.Dir()
	_, f.url = embed(t, cfg)
	f.lead = mcptest.Connect(t, f.url, f.tokens["lead"])
	f.m1 = mcptest.Connect(t, f.url, f.tokens["m1"])
	f.m2 = mcptest.Connect(t, f.url, f.tokens["m2"])
	return f
}

func TestHTTPDelegationClarificationDetached(t *testing.T) {
	f := newFleet(t, daemon.Config{})
	ctx := context.Background()

	// Delegation: blocking send, answered by the member's reply.
	sent := mcptest.Async(ctx, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "count files"})
	msg := mcptest.OK(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	if msg["content"] != "count files" || msg["from"] != "lead" {
		t.Fatalf("fleet_next = %v", msg)
	}
	mcptest.OK(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "12 files"})
	if o := mcptest.RecvWithin(t, sent, 10*time.Second); o["outcome"] != "reply" || o["content"] != "12 files" || o["from"] != "m1" {
		t.Fatalf("fleet_send = %v", o)
	}

	// Clarification by turn ID.
	sent = mcptest.Async(ctx, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "build it"})
	mcptest.OK(ctx, t, f.m2, "fleet_next", map[string]any{"wait_s": 10})
	asked := mcptest.Async(ctx, f.m2, "fleet_ask", map[string]any{"question": "which branch?", "default": "main"})
	q := mcptest.RecvWithin(t, sent, 10*time.Second)
	if q["outcome"] != "question" || q["content"] != "which branch?" || q["turn_id"] == nil {
		t.Fatalf("fleet_send = %v; want the question", q)
	}
	answered := mcptest.Async(ctx, f.lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "release-2"})
	if a := mcptest.RecvWithin(t, asked, 10*time.Second); a["answer"] != "release-2" || a["timed_out"] != false {
		t.Fatalf("fleet_ask = %v", a)
	}
	mcptest.Fails(ctx, t, f.lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "again"}, "ERR_NO_PENDING_QUESTION")
	mcptest.OK(ctx, t, f.m2, "fleet_reply", map[string]any{"content": "built release-2"})
	if o := mcptest.RecvWithin(t, answered, 10*time.Second); o["outcome"] != "reply" || o["content"] != "built release-2" {
		t.Fatalf("answer's outcome = %v", o)
	}

	// Detached: a ticket at once, the reply held until acked.
	o := mcptest.OK(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "long job", "wait": false})
	ticket, _ := o["ticket"].(string)
	if o["outcome"] != "pending" || ticket == "" {
		t.Fatalf("detached send = %v", o)
	}
	mcptest.OK(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	mcptest.OK(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "long job done"})
	p := mcptest.OK(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": ticket, "wait_s": 10})
	if p["outcome"] != "reply" || p["content"] != "long job done" || p["state"] != "done" {
		t.Fatalf("fleet_poll = %v", p)
	}
	// The outcomes the blocking calls returned are held too, for a lead
	// whose responses were lost, and marked returned.
	all := mcptest.OK(ctx, t, f.lead, "fleet_poll", nil)
	held := 0
	for _, tk := range all["tickets"].([]any) {
		if o := tk.(map[string]any); o["returned"] != true {
			held++
		}
	}
	if ts, _ := all["tickets"].([]any); held != 1 || len(ts) != 3 {
		t.Fatalf("fleet_poll all = %v; want the held ticket and the two returned outcomes", all)
	}
	mcptest.OK(ctx, t, f.lead, "fleet_ack", map[string]any{"ticket": ticket})
	mcptest.Fails(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": ticket}, "ERR_UNKNOWN_TICKET")

	// Authority over the wire.
	mcptest.Fails(ctx, t, f.m1, "fleet_send", map[string]any{"to": "m2", "content": "x"}, "ERR_NOT_PERMITTED")
	mcptest.Fails(ctx, t, f.m1, "clean_sessions", nil, "ERR_NOT_PERMITTED")
	mcptest.Fails(ctx, t, f.lead, "fleet_reply", map[string]any{"content": "x"}, "ERR_NOT_PERMITTED")
	mcptest.Fails(ctx, t, f.lead, "fleet_send", map[string]any{"to": "stranger", "content": "x"}, "ERR_UNKNOWN_MEMBER")

	// Cleaning the sessions drops fleet state, never the tokens.
	mcptest.OK(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "dropped", "wait": false})
	mcptest.OK(ctx, t, f.lead, "clean_sessions", nil)
	if all := mcptest.OK(ctx, t, f.lead, "fleet_poll", nil); len(all["tickets"].([]any)) != 0 {
		t.Fatalf("tickets after clean_sessions: %v", all)
	}
	lead2 := mcptest.Connect(t, f.url, f.tokens["lead"])
	if m := mcptest.OK(ctx, t, lead2, "fleet_members", nil); len(m["members"].([]any)) != 2 {
		t.Fatalf("fleet_members after clean_sessions = %v", m)
	}
}

func TestHTTPCancelledSendLosesNothing(t *testing.T) {
	f := newFleet(t, daemon.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	sent := mcptest.Async(ctx, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "job"})
	mcptest.OK(context.Background(), t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	start := time.Now()
	cancel()
	mcptest.RecvWithin(t, sent, 5*time.Second)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the cancelled call took %v to return", d)
	}
	bg := context.Background()
	// The daemon learns of the cancellation when it sees the lead's
	// connection close, and cannot order that against the member's call on
	// another connection: wait until it has (the ticket shows, as
	// fleet_poll lists no ticket a call is blocked on).
	if !fleettest.Until(10*time.Second, 10*time.Millisecond, func() bool {
		ts, _ := mcptest.OK(bg, t, f.lead, "fleet_poll", nil)["tickets"].([]any)
		return len(ts) == 1
	}) {
		t.Fatal("the daemon never noticed the cancelled send")
	}
	mcptest.OK(bg, t, f.m1, "fleet_reply", map[string]any{"content": "kept"})
	all := mcptest.OK(bg, t, f.lead, "fleet_poll", map[string]any{"wait_s": 5})
	ts, _ := all["tickets"].([]any)
	if len(ts) != 1 || ts[0].(map[string]any)["content"] != "kept" {
		t.Fatalf("after cancel, fleet_poll = %v; want the reply on a ticket", all)
	}
}

func TestHTTPSendBoundReturnsPending(t *testing.T) {
	f := newFleet(t, daemon.Config{Rendezvous: fleetstate.RendezvousOptions{SendTimeout: time.Second}})
	ctx := context.Background()
	sent := mcptest.Async(ctx, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "slow job"})
	mcptest.OK(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	o := mcptest.RecvWithin(t, sent, 10*time.Second)
	// Working, as m1 took the message within the bound; queued only if
	// m1's fleet_next reached the daemon more than 1 s after the send,
	// on a slow machine.
	if o["outcome"] != "pending" || o["ticket"] == nil || (o["state"] != "working" && o["state"] != "queued") {
		t.Fatalf("bounded send = %v; want pending with a ticket", o)
	}
	if p := mcptest.OK(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["state"] != "working" {
		t.Fatalf("fleet_poll once m1 has the message = %v; want working", p)
	}
	mcptest.OK(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "late"})
	if p := mcptest.OK(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["content"] != "late" {
		t.Fatalf("fleet_poll = %v; want the late reply", p)
	}
}

func TestHTTPMemberNeverMounts(t *testing.T) {
	store, tokens := adaptertest.OpenStore(t)
	tok := adaptertest.AddTokens(t, tokens, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "ghost": mcpadapter.RoleMember})
	_, url := embed(t, daemon.Config{Dir: store.Dir(), Rendezvous: fleetstate.RendezvousOptions{ReadyTimeout: 500 * time.Millisecond}})
	cs := mcptest.Connect(t, url, tok["lead"])
	o := mcptest.OK(context.Background(), t, cs, "fleet_send", map[string]any{"to": "ghost", "content": "hello"})
	if o["outcome"] != "failed" || o["reason"] != "member_not_ready" {
		t.Fatalf("send to a member that never mounted = %v", o)
	}
}

func TestHTTPRefusesMissingAndWrongTokens(t *testing.T) {
	store, tokens := adaptertest.OpenStore(t)
	adaptertest.AddTokens(t, tokens, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead})
	_, url := embed(t, daemon.Config{Dir: store.Dir()})
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for name, auth := range map[string]string{"missing": "", "wrong": "Bearer fst_wrong", "not bearer": "Basic abc"} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s token: status %d; want 401", name, resp.StatusCode)
		}
	}
}
