package mcpadapter_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// TestUnknownCallerIsNeverLead: callers that are anonymous, that name no
// role or an unknown one, or that claim a role with no agent, get
// ERR_NOT_PERMITTED from every fleet tool, and nothing happens.
func TestUnknownCallerIsNeverLead(t *testing.T) {
	e := newEnv(t, envOpts{})
	callers := map[string]mcpadapter.Identity{
		"anonymous":        anon,
		"agent, no role":   {Agent: "lead"},
		"unknown role":     {Agent: "lead", Role: "admin"},
		"role in capitals": {Agent: "lead", Role: "LEAD"},
		"lead, no agent":   {Role: mcpadapter.RoleLead},
		"member, no agent": {Role: mcpadapter.RoleMember},
	}
	for name, id := range callers {
		for tool, args := range adaptertest.ValidArgs {
			t.Run(name+"/"+tool, func(t *testing.T) {
				e.T = t
				defer func() { e.T = nil }()
				msg := e.Fail(id, tool, args, fleetstate.CodeNotPermitted)
				if !strings.Contains(msg, tool) {
					t.Errorf("message %q does not name the tool", msg)
				}
			})
		}
	}
	e.T = t
	if m := e.Ok(lead, "fleet_members", nil); m["members"].([]any)[1].(map[string]any)["queued"] != 0.0 {
		t.Errorf("a refused fleet_send queued a message: %v", m)
	}
	if p := e.Ok(lead, "fleet_poll", nil); len(p["tickets"].([]any)) != 0 {
		t.Errorf("a refused fleet_send left a ticket: %v", p)
	}
}

// TestMemberCannotLead: a member may not call the lead's tools, nor start
// or clean sessions, whether or not roles are configured.
func TestMemberCannotLead(t *testing.T) {
	for _, configured := range []bool{false, true} {
		e := newEnv(t, envOpts{adapter: &mcpadapter.Options{RolesConfigured: func() bool { return configured }}})
		e.Ok(lead, "new_session", map[string]any{"name": "s"})
		calls := map[string]any{
			"fleet_send":     map[string]any{"to": "miner", "content": "x"},
			"fleet_poll":     map[string]any{},
			"fleet_ack":      map[string]any{"ticket": "ticket-x"},
			"fleet_members":  nil,
			"new_session":    map[string]any{"name": "mine"},
			"clean_sessions": nil,
		}
		for tool, args := range calls {
			e.Fail(scout, tool, args, fleetstate.CodeNotPermitted)
		}
		// fleet_send by turn ID is the lead's too.
		e.Fail(scout, "fleet_send", map[string]any{"turn_id": "turn-x", "content": "x"}, fleetstate.CodeNotPermitted)
		// The session the lead started is still the current one.
		if s := e.Ok(scout, "get_session", nil); s["name"] != "s" {
			t.Errorf("session after refused calls: %v; want s", s)
		}
	}
}

// TestMemberPutsOnlyUnderOwnName: a member writes under its own agent
// name only; leads and anonymous callers under any.
func TestMemberPutsOnlyUnderOwnName(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.Ok(lead, "new_session", map[string]any{"name": "s"})
	e.Fail(scout, "put", map[string]any{"agent_name": "miner", "file_name": "f", "content": "forged"}, fleetstate.CodeNotPermitted)
	e.Fail(scout, "put", map[string]any{"agent_name": "lead", "file_name": "f", "content": "forged", "overwrite": true}, fleetstate.CodeNotPermitted)
	e.Fail(scout, "put", map[string]any{"agent_name": "Scout", "file_name": "f", "content": "forged"}, fleetstate.CodeNotPermitted)
	if l := e.Ok(anon, "list", nil); len(l["files"].([]any)) != 0 {
		t.Errorf("files after refused puts: %v", l)
	}
	e.Ok(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f", "content": "mine"})
	e.Ok(lead, "put", map[string]any{"agent_name": "miner", "file_name": "f", "content": "lead's"})
	e.Ok(anon, "put", map[string]any{"agent_name": "other", "file_name": "f", "content": "anon's"})
	// The check is on the caller's name, not on whether the file exists:
	// scout cannot overwrite miner's file either.
	e.Fail(scout, "put", map[string]any{"agent_name": "miner", "file_name": "f", "content": "x", "overwrite": true}, fleetstate.CodeNotPermitted)
	// Reading is open to all.
	l := e.Ok(scout, "list", nil)
	if n := len(l["files"].([]any)); n != 3 {
		t.Errorf("list: %d files; want 3", n)
	}
}

// TestMemberCannotReplyToAnothersTurn: fleet_reply ends the caller's own
// open turn only. B's reply while only A has a turn is ERR_NO_OPEN_TURN,
// and A's lead still waits for A.
func TestMemberCannotReplyToAnothersTurn(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	send := make(chan adaptertest.Reply, 1)
	go func() {
		send <- e.Do(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "A's work"}, nil)
	}()
	msg := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))

	e.Fail(miner, "fleet_reply", map[string]any{"content": "forged reply"}, fleetstate.CodeNoOpenTurn)
	e.Fail(miner, "fleet_ask", map[string]any{"question": "forged question"}, fleetstate.CodeNoOpenTurn)
	if !adaptertest.PendingCall(send) {
		t.Fatalf("the lead's send returned after another member's reply: %v", e.OkOf(<-send))
	}
	// A's turn is still open: A's own reply is the one the lead gets.
	e.Ok(scout, "fleet_reply", map[string]any{"content": "A's reply"})
	out := adaptertest.WantOutcome(t, e.OkOf(e.Recv(send)), "reply", "turn_id", "from", "content")
	if out["content"] != "A's reply" || out["from"] != "scout" || out["turn_id"] != msg["turn_id"] {
		t.Errorf("outcome %v; want A's reply", out)
	}
}

// TestMemberCannotAnswerAnothersQuestion: a question is answered by the
// lead through fleet_send{turn_id}; another member can neither answer it
// nor end the turn it was asked in.
func TestMemberCannotAnswerAnothersQuestion(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	send := e.Async(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "work"}, nil)
	e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
	ask := make(chan adaptertest.Reply, 1)
	go func() { ask <- e.Do(ctx, scout, "fleet_ask", map[string]any{"question": "which?"}, nil) }()
	q := adaptertest.WantOutcome(t, e.OkOf(e.Recv(send)), "question", "turn_id", "ticket", "from", "content", "state")

	e.Fail(miner, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "forged"}, fleetstate.CodeNotPermitted)
	e.Fail(miner, "fleet_reply", map[string]any{"content": "forged"}, fleetstate.CodeNoOpenTurn)
	// miner's next does not touch scout's turn.
	if got := e.Ok(miner, "fleet_next", adaptertest.WaitArgs(0)); got["outcome"] != "none" {
		t.Errorf("miner's fleet_next %v; want none", got)
	}
	if !adaptertest.PendingCall(ask) {
		t.Fatalf("scout's question was answered by someone else: %v", e.OkOf(<-ask))
	}
	ans := e.Async(ctx, lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "this one"}, nil)
	if got := e.OkOf(e.Recv(ask)); got["answer"] != "this one" {
		t.Errorf("answer %v; want the lead's", got)
	}
	e.Ok(scout, "fleet_reply", map[string]any{"content": "done"})
	e.OkOf(e.Recv(ans))
}

// TestLeadCannotActAsMember: a lead cannot reply, ask or take messages on
// a member's behalf.
func TestLeadCannotActAsMember(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	send := make(chan adaptertest.Reply, 1)
	go func() { send <- e.Do(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "work"}, nil) }()
	e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))

	e.Fail(lead, "fleet_reply", map[string]any{"content": "forged"}, fleetstate.CodeNotPermitted)
	e.Fail(lead2, "fleet_reply", map[string]any{"content": "forged"}, fleetstate.CodeNotPermitted)
	e.Fail(lead, "fleet_ask", map[string]any{"question": "forged"}, fleetstate.CodeNotPermitted)
	e.Fail(lead, "fleet_next", adaptertest.WaitArgs(0), fleetstate.CodeNotPermitted)
	// A lead whose agent name is a member's is still no member.
	asScout := mcpadapter.Identity{Agent: "scout", Role: mcpadapter.RoleLead}
	e.Fail(asScout, "fleet_reply", map[string]any{"content": "forged"}, fleetstate.CodeNotPermitted)
	if !adaptertest.PendingCall(send) {
		t.Fatalf("the send returned after a lead's reply: %v", e.OkOf(<-send))
	}
	e.Ok(scout, "fleet_reply", map[string]any{"content": "real"})
	if out := e.OkOf(e.Recv(send)); out["content"] != "real" {
		t.Errorf("outcome %v; want the member's reply", out)
	}
}

// TestAnonymousLifecycle: anonymous callers may start and clean sessions
// only while Options.RolesConfigured reports false; leads always may.
func TestAnonymousLifecycle(t *testing.T) {
	var configured atomic.Bool
	e := newEnv(t, envOpts{adapter: &mcpadapter.Options{RolesConfigured: configured.Load}})

	e.Ok(anon, "new_session", map[string]any{"name": "a"})
	e.Ok(anon, "clean_sessions", nil)

	configured.Store(true)
	sid := adaptertest.Str(e.Ok(lead, "new_session", map[string]any{"name": "b"}), "id")
	e.Fail(anon, "new_session", map[string]any{"name": "c"}, fleetstate.CodeNotPermitted)
	e.Fail(anon, "clean_sessions", nil, fleetstate.CodeNotPermitted)
	// Role before arguments here too.
	e.Fail(anon, "new_session", map[string]any{"bogus": 1}, fleetstate.CodeNotPermitted)
	if s := e.Ok(anon, "get_session", nil); s["id"] != sid {
		t.Errorf("session %v; want the lead's %s", s, sid)
	}
	// The store tools stay open to anonymous callers.
	e.Ok(anon, "put", map[string]any{"agent_name": "x", "file_name": "f", "content": "c"})
	e.Ok(anon, "list", nil)

	configured.Store(false)
	e.Ok(anon, "clean_sessions", nil)
	e.Fail(anon, "get_session", nil, fleetstate.CodeNoActiveSession)

	// A nil RolesConfigured means no roles are configured.
	e2 := newEnv(t, envOpts{})
	e2.Ok(anon, "new_session", map[string]any{"name": "a"})
	e2.Ok(anon, "clean_sessions", nil)
	e2.Ok(lead, "clean_sessions", nil)
}
