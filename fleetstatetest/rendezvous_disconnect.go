package fleetstatetest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
)

// A member's connection drops mid-turn, mid-ask, with work queued, or
// before it ever took any: every case ends in a named outcome, and no call
// waits past its bound.

func testDisconnectMidTurnEndsBlockedSend(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		f := s.newFleet(t, nil)
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "work")
		})
		msg := f.next("scout")
		if err := f.r.Disconnect("scout"); err != nil {
			t.Fatal(err)
		}
		res := <-sent
		if res.err != nil || res.o.Kind != fleetstate.OutcomeFailed || res.o.Reason != fleetstate.ReasonMemberGone ||
			res.o.TurnID != msg.TurnID || res.o.From != "scout" {
			t.Fatalf("send = %+v, %v; want failed/member_gone for turn %s", res.o, res.err, msg.TurnID)
		}
		// The turn is over: a late reply is refused, not misfiled.
		wantCode(t, f.r.Reply("scout", "too late"), fleetstate.CodeNoOpenTurn)
		if m := f.r.Members(); m[0].Ready {
			t.Errorf("members = %+v; want scout not ready", m)
		}
	})
}

func testDisconnectMidAsk(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		f := s.newFleet(t, nil)
		f.pull("scout")
		o, err := f.r.SendDetached("lead", "scout", "work")
		if err != nil {
			t.Fatal(err)
		}
		f.next("scout")
		type askResult struct {
			text string
			err  error
		}
		asked := make(chan askResult, 1)
		go func() {
			text, _, err := f.r.Ask(context.Background(), "scout", "which branch?", "main")
			asked <- askResult{text, err}
		}()
		synctest.Wait()
		if p, _ := f.r.Poll(context.Background(), "lead", o.Ticket, 0); p.Kind != fleetstate.OutcomeQuestion {
			t.Fatalf("ticket %+v; want the question", p)
		}
		if err := f.r.Disconnect("scout"); err != nil {
			t.Fatal(err)
		}
		a := <-asked
		wantCode(t, a.err, fleetstate.CodeNoOpenTurn)
		p, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0)
		if err != nil || p.Kind != fleetstate.OutcomeFailed || p.Reason != fleetstate.ReasonMemberGone || p.State != fleetstate.TicketDone {
			t.Fatalf("ticket %+v, %v; want failed/member_gone, done", p, err)
		}
		_, err = f.r.Answer(context.Background(), "lead", o.TurnID, "release")
		wantCode(t, err, fleetstate.CodeUnknownTurn)
		if err := f.r.Ack("lead", o.Ticket); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDisconnectOutcomeIsDurable: the member_gone outcome is held on the
// ticket across a restart.
func testDisconnectOutcomeIsDurable(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	o, _ := f.r.SendDetached("lead", "scout", "work")
	f.next("scout")
	if err := f.r.Disconnect("scout"); err != nil {
		t.Fatal(err)
	}
	f.r.Close()
	_, r2 := openRendezvous(t, f.h, nil)
	p, err := r2.Poll(context.Background(), "lead", o.Ticket, 0)
	if err != nil || p.Reason != fleetstate.ReasonMemberGone {
		t.Fatalf("ticket after a restart %+v, %v; want failed/member_gone", p, err)
	}
}

// TestDisconnectQueuedWaitsForReturn: messages for a disconnected member
// wait for it at most ReadyTimeout; one that comes back in time gets them.
func testDisconnectQueuedWaitsForReturn(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		f := s.newFleet(t, &fleetstate.RendezvousOptions{ReadyTimeout: 10 * time.Second})
		f.pull("scout")
		f.pull("miner")
		if err := f.r.Disconnect("scout"); err != nil { // no open turn: only not ready
			t.Fatal(err)
		}
		if err := f.r.Disconnect("miner"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		gone := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "for a member that left")
		})
		back, err := f.r.SendDetached("lead", "miner", "for a member that comes back")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		f.next("miner") // back, within the bound: it gets the message
		res := <-gone
		if res.o.Kind != fleetstate.OutcomeFailed || res.o.Reason != fleetstate.ReasonMemberNotReady {
			t.Fatalf("send to a member that left = %+v; want failed/member_not_ready", res.o)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("failed after %v; want the ready bound, 10s", d)
		}
		if p, _ := f.r.Poll(context.Background(), "lead", back.Ticket, 0); p.State != fleetstate.TicketWorking {
			t.Errorf("message for the member that came back: %+v; want delivered", p)
		}
	})
}

// TestDisconnectPortMemberKeepsTurn: a member with a pane keeps its turn
// when its MCP connection drops; the pane says when the turn ends.
func testDisconnectPortMemberKeepsTurn(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		f := s.newFleet(t, nil)
		lm := f.local("pane")
		o, _ := f.r.SendDetached("lead", "pane", "work")
		recv(lm)
		lm.SetStatus(fleetstate.StatusWorking)
		settle(time.Second)
		if err := f.r.Disconnect("pane"); err != nil {
			t.Fatal(err)
		}
		if p, _ := f.r.Poll(context.Background(), "lead", o.Ticket, 0); p.State != fleetstate.TicketWorking {
			t.Fatalf("ticket %+v; want still working", p)
		}
		if err := f.r.Reply("pane", "done in the pane"); err != nil {
			t.Fatal(err)
		}
		if p, _ := f.r.Poll(context.Background(), "lead", o.Ticket, 0); p.Content != "done in the pane" {
			t.Fatalf("ticket %+v; want the reply", p)
		}
	})
}

func testDisconnectErrors(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	wantCode(t, f.r.Disconnect("ghost"), fleetstate.CodeUnknownMember)
	f.pull("scout")
	if err := f.r.Disconnect("scout"); err != nil {
		t.Fatal(err)
	}
	if err := f.r.Disconnect("scout"); err != nil { // twice is fine
		t.Fatal(err)
	}
	f.r.Close()
	wantCode(t, f.r.Disconnect("scout"), fleetstate.CodeClosed)
}

// givenUpSend has the lead send "job" to scout, a member that pulls, the
// member take it, the lead's call give up and then the member reply "the
// answer"; it returns what the send returned.
func givenUpSend(t *testing.T, f *fleet) result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "scout", "job") })
	f.next("scout")
	cancel()
	if err := f.r.Reply("scout", "the answer"); err != nil {
		t.Fatal(err)
	}
	return <-sent
}

// TestGivenUpCallerLeavesOutcomeOnTicket: a lead whose call has given up
// (its connection dropped) before its member replies never has the reply
// handed to that call, even if the call had not yet noticed: the reply is
// held on the ticket, where the lead finds it when it comes back.
func testGivenUpCallerLeavesOutcomeOnTicket(t *testing.T, s suite) {
	for i := range 200 {
		f := s.newFleet(t, nil)
		f.pull("scout")
		res := givenUpSend(t, f)
		all, err := f.r.PollAll(context.Background(), "lead", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || all[0].Kind != fleetstate.OutcomeReply || all[0].Content != "the answer" {
			t.Fatalf("round %d: tickets %+v; want the reply held", i, all)
		}
		if res.err != context.Canceled || res.o.Ticket != all[0].Ticket {
			t.Fatalf("round %d: send = %+v, %v; want its ticket and context.Canceled", i, res.o, res.err)
		}
		f.r.Close()
	}
}
