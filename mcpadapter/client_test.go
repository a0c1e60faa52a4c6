package mcpadapter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// dial returns a Client of the MCP endpoint url that sends token; the
// test's cleanup closes it.
func dial(t *testing.T, url, token, name string) *mcpadapter.Client {
	t.Helper()
	c, err := mcpadapter.Dial(context.Background(), url, token, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClientTyped drives every typed method of Client over HTTP and checks
// the library's types come back, and tool errors keep their codes.
func TestClientTyped(t *testing.T) {
	d := adaptertest.Start(t, adaptertest.Options{
		Agents: map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember, "miner": mcpadapter.RoleMember},
	})
	ctx := context.Background()
	lead := dial(t, d.URL, d.Token["lead"], "lead")
	scout := dial(t, d.URL, d.Token["scout"], "scout")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// The store.
	_, err := lead.CurrentSession(ctx)
	var fe *fleetstate.Error
	if !errors.Is(err, fleetstate.ErrNoActiveSession) || !errors.As(err, &fe) || fe.Code != fleetstate.CodeNoActiveSession {
		t.Fatalf("CurrentSession before any = %v; want ERR_NO_ACTIVE_SESSION", err)
	}
	s, err := lead.NewSession(ctx, "typed")
	must(err)
	if cur, err := lead.CurrentSession(ctx); err != nil || cur != s || s.Name != "typed" || s.ID == "" {
		t.Fatalf("CurrentSession = %+v, %v; want %+v", cur, err, s)
	}
	id, err := scout.Put(ctx, "scout", "notes/a.md", []byte("hello"), false)
	must(err)
	if _, err := scout.Put(ctx, "scout", "notes/a.md", []byte("again"), false); fleetstate.CodeOf(err) != fleetstate.CodeFileExists {
		t.Fatalf("second Put = %v; want ERR_FILE_EXISTS", err)
	}
	if data, err := lead.Get(ctx, id); err != nil || string(data) != "hello" {
		t.Fatalf("Get = %q, %v; want hello", data, err)
	}
	files, err := lead.List(ctx, "", "scout")
	must(err)
	if len(files) != 1 || files[0].ID != id || files[0].Size != 5 || files[0].ModTime.IsZero() {
		t.Fatalf("List = %+v; want the one file %s of 5 bytes", files, id)
	}

	// A blocking send, a question and its answer, the reply.
	sent := make(chan fleetstate.Outcome, 1)
	go func() {
		o, err := lead.Send(ctx, "scout", "work")
		if err != nil {
			t.Error(err)
		}
		sent <- o
	}()
	msg, ok, err := scout.Next(ctx, 10*time.Second)
	if err != nil || !ok || msg.Content != "work" || msg.From != "lead" {
		t.Fatalf("Next = %+v, %v, %v; want the work", msg, ok, err)
	}
	asked := make(chan string, 1)
	go func() {
		a, _, err := scout.AskTurn(ctx, msg.TurnID, "which?", "none")
		if err != nil {
			t.Error(err)
		}
		asked <- a
	}()
	q := <-sent
	if q.Kind != fleetstate.OutcomeQuestion || q.TurnID != msg.TurnID || q.Content != "which?" {
		t.Fatalf("Send = %+v; want the question", q)
	}
	answered := make(chan fleetstate.Outcome, 1)
	go func() {
		o, err := lead.Answer(ctx, q.TurnID, "this")
		if err != nil {
			t.Error(err)
		}
		answered <- o
	}()
	if a := <-asked; a != "this" {
		t.Fatalf("Ask = %q; want this", a)
	}
	must(scout.ReplyTurn(ctx, msg.TurnID, "done"))
	if o := <-answered; o.Kind != fleetstate.OutcomeReply || o.Content != "done" {
		t.Fatalf("Answer = %+v; want the reply", o)
	}
	if _, _, err := scout.Ask(ctx, "no turn?", ""); fleetstate.CodeOf(err) != fleetstate.CodeNoOpenTurn {
		t.Fatalf("Ask without a turn = %v; want ERR_NO_OPEN_TURN", err)
	}

	// Detached work, polled, acked; a cancelled one.
	o, err := lead.SendDetached(ctx, "scout", "later")
	must(err)
	if o.Kind != fleetstate.OutcomePending || o.Ticket == "" {
		t.Fatalf("SendDetached = %+v; want pending with a ticket", o)
	}
	msg, ok, err = scout.Next(ctx, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("Next = %v, %v", ok, err)
	}
	must(scout.Reply(ctx, "later done"))
	if p, err := lead.Poll(ctx, o.Ticket, 0); err != nil || p.Kind != fleetstate.OutcomeReply || p.Content != "later done" {
		t.Fatalf("Poll = %+v, %v; want the reply", p, err)
	}
	c, err := lead.SendDetached(ctx, "miner", "never")
	must(err)
	if x, err := lead.Cancel(ctx, c.Ticket); err != nil || x.Reason != fleetstate.ReasonCancelled {
		t.Fatalf("Cancel = %+v, %v; want failed cancelled", x, err)
	}
	c2, err := lead.SendDetached(ctx, "miner", "never either")
	must(err)
	if x, err := lead.CancelTurn(ctx, c2.TurnID); err != nil || x.Reason != fleetstate.ReasonCancelled || x.Ticket != c2.Ticket {
		t.Fatalf("CancelTurn = %+v, %v; want failed cancelled on ticket %s", x, err, c2.Ticket)
	}
	all, err := lead.PollAll(ctx, 0)
	must(err)
	// The first cancel's outcome went with the call that returned it
	// (the lead called again since); the others are held.
	if len(all) != 2 || all[0].Ticket != o.Ticket || all[1].Ticket != c2.Ticket || !all[1].Returned {
		t.Fatalf("PollAll = %+v; want tickets %s and %s, the last returned", all, o.Ticket, c2.Ticket)
	}
	page, err := lead.PollPage(ctx, 0, "", 1)
	must(err)
	if len(page.Tickets) != 1 || page.Next == "" {
		t.Fatalf("PollPage limit 1 = %+v; want one ticket and a cursor", page)
	}
	must(lead.Ack(ctx, o.Ticket))
	if err := lead.Ack(ctx, o.Ticket); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("second Ack = %v; want ERR_UNKNOWN_TICKET", err)
	}

	// Next with nothing queued; members; clean.
	if _, ok, err := scout.Next(ctx, 0); err != nil || ok {
		t.Fatalf("Next with nothing queued = %v, %v; want none", ok, err)
	}
	ms, err := lead.Members(ctx)
	must(err)
	if len(ms) != 2 || ms[0].Name != "miner" || ms[1] != (fleetstate.MemberInfo{Name: "scout", Ready: true, Status: "PULL"}) {
		t.Fatalf("Members = %+v; want miner and a ready scout", ms)
	}
	must(lead.Clean(ctx))
	if _, err := lead.CurrentSession(ctx); fleetstate.CodeOf(err) != fleetstate.CodeNoActiveSession {
		t.Fatalf("CurrentSession after Clean = %v; want ERR_NO_ACTIVE_SESSION", err)
	}
}
