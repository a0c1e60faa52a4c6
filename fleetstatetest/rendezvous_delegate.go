package fleetstatetest

import (
	"context"
	"errors"
	"testing"

	"github.com/fleetstate/fleetstate"
)

// TestSetReadyAddOnReady: with AddOnReady, making an unknown name ready
// makes it a pulling member at once; without, it stays unknown.
func testSetReadyAddOnReady(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	wantCode(t, f.r.SetReady("late", true), fleetstate.CodeUnknownMember)
	if m := f.r.Members(); len(m) != 0 {
		t.Fatalf("members %v; want none", m)
	}

	f = s.newFleet(t, &fleetstate.RendezvousOptions{AddOnReady: true})
	wantCode(t, f.r.SetReady("late", false), fleetstate.CodeUnknownMember)
	wantCode(t, f.r.SetReady("a::b", true), fleetstate.CodeInvalidAgentName)
	if err := f.r.SetReady("late", true); err != nil {
		t.Fatal(err)
	}
	want := []fleetstate.MemberInfo{{Name: "late", Ready: true, Status: "PULL"}}
	if got := f.r.Members(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("members %v; want %v", got, want)
	}
	o := f.send("late", "work")
	if msg := f.next("late"); msg.TurnID != o.TurnID {
		t.Fatalf("Next = %+v; want the turn %s", msg, o.TurnID)
	}
}

// TestDelegate: one call for every form of a lead's send, returning an
// outcome or an error, never both.
func testDelegate(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	ctx := context.Background()

	for _, req := range []fleetstate.SendRequest{
		{Content: "x"},
		{To: "scout", TurnID: "t", Content: "x"},
		{TurnID: "t", Content: "x", Detached: true},
	} {
		if o, err := f.r.Delegate(ctx, "lead", req); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument || o.Kind != "" {
			t.Errorf("Delegate(%+v) = %+v, %v; want no outcome and ERR_INVALID_ARGUMENT", req, o, err)
		}
	}

	o, err := f.r.Delegate(ctx, "lead", fleetstate.SendRequest{To: "scout", Content: "detached", Detached: true})
	if err != nil || o.Kind != fleetstate.OutcomePending || o.Ticket == "" {
		t.Fatalf("detached = %+v, %v; want pending with a ticket", o, err)
	}
	f.next("scout")
	if err := f.r.Reply("scout", "done"); err != nil {
		t.Fatal(err)
	}

	// A question, then its answer by turn ID.
	sent := async(func() (fleetstate.Outcome, error) {
		return f.r.Delegate(ctx, "lead", fleetstate.SendRequest{To: "scout", Content: "ask me"})
	})
	f.next("scout")
	asked := make(chan string, 1)
	go func() {
		a, _, _ := f.r.Ask(ctx, "scout", "which?", "none")
		asked <- a
	}()
	q := <-sent
	if q.err != nil || q.o.Kind != fleetstate.OutcomeQuestion {
		t.Fatalf("send = %+v, %v; want the question", q.o, q.err)
	}
	answered := async(func() (fleetstate.Outcome, error) {
		return f.r.Delegate(ctx, "lead", fleetstate.SendRequest{TurnID: q.o.TurnID, Content: "that"})
	})
	if a := <-asked; a != "that" {
		t.Fatalf("Ask = %q; want the answer", a)
	}
	if err := f.r.Reply("scout", "ok"); err != nil {
		t.Fatal(err)
	}
	if r := <-answered; r.err != nil || r.o.Kind != fleetstate.OutcomeReply || r.o.Content != "ok" {
		t.Fatalf("answer = %+v, %v; want the reply", r.o, r.err)
	}

	// A caller that gives up gets ctx.Err() alone; the turn stays on its
	// ticket.
	cctx, cancel := context.WithCancel(ctx)
	gone := async(func() (fleetstate.Outcome, error) {
		return f.r.Delegate(cctx, "lead", fleetstate.SendRequest{To: "scout", Content: "given up"})
	})
	msg := f.next("scout")
	cancel()
	if r := <-gone; !errors.Is(r.err, context.Canceled) || r.o.Kind != "" {
		t.Fatalf("cancelled = %+v, %v; want no outcome and context.Canceled", r.o, r.err)
	}
	if err := f.r.Reply("scout", "kept"); err != nil {
		t.Fatal(err)
	}
	all, err := f.r.PollAll(ctx, "lead", 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range all {
		found = found || o.TurnID == msg.TurnID && o.Content == "kept"
	}
	if !found {
		t.Fatalf("PollAll = %+v; want the reply of the cancelled send's turn %s", all, msg.TurnID)
	}

	// Close releases a blocked send with its ticket and no error.
	blocked := async(func() (fleetstate.Outcome, error) {
		return f.r.Delegate(ctx, "lead", fleetstate.SendRequest{To: "scout", Content: "at close"})
	})
	f.next("scout")
	f.r.Close()
	if r := <-blocked; r.err != nil || r.o.Kind != fleetstate.OutcomePending || r.o.Ticket == "" {
		t.Fatalf("send at Close = %+v, %v; want pending with its ticket", r.o, r.err)
	}
}
