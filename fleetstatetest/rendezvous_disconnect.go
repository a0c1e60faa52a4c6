package fleetstatetest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
)

// A member's connection drops mid-turn, mid-ask, with work queued, or
// before it ever took any: every case ends in a named outcome, and no call
// waits past its bound.

func testDisconnectMidTurnEndsBlockedSend(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "work")
		})
		msg := f.next("scout")
		start := time.Now()
		if err := f.r.Disconnect("scout"); err != nil {
			t.Fatal(err)
		}
		res := <-sent
		if d := time.Since(start); d != fleetstate.DefaultPresenceWindow {
			t.Errorf("the turn ended %v after the disconnect; want the presence window, %v", d, fleetstate.DefaultPresenceWindow)
		}
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

// askResult is what an Ask returned.
type askResult struct {
	text string
	err  error
}

// askAsync starts member's Ask of question (default "main") and waits
// until it blocks or returns.
func (f *fleet) askAsync(member, question string) <-chan askResult {
	ch := make(chan askResult, 1)
	go func() {
		text, _, err := f.r.Ask(context.Background(), member, question, "main")
		ch <- askResult{text, err}
	}()
	synctest.Wait()
	return ch
}

func testDisconnectMidAsk(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		o := f.working("scout", "work")
		asked := f.askAsync("scout", "which branch?")
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

// TestAskAgainTakesTheQuestionOver: the same question asked again while
// the first Ask of it still waits (a proxy sent it again through another
// daemon before the owner saw the first call go) moves the question to the
// newer call: the first returns ERR_SUPERSEDED, the lead's answer reaches
// the newer one, and the lead sees one question. Another question while
// one waits is ERR_QUESTION_PENDING.
func testAskAgainTakesTheQuestionOver(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		o := f.working("scout", "work")
		ask := func() <-chan askResult { return f.askAsync("scout", "which branch?") }
		sub, _ := f.r.Subscribe(16)
		defer sub.Close()
		first := ask()
		_, _, err := f.r.Ask(context.Background(), "scout", "which tag?", "v1")
		wantCode(t, err, fleetstate.CodeQuestionPending)
		second := ask()
		wantCode(t, (<-first).err, fleetstate.CodeSuperseded)
		if _, err := f.r.Answer(context.Background(), "lead", o.TurnID, "release"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if a := <-second; a.err != nil || a.text != "release" {
			t.Fatalf("the newer Ask = %q, %v; want the lead's answer", a.text, a.err)
		}
		asked := 0
		for len(sub.Events()) > 0 {
			if e := <-sub.Events(); e.Kind == fleetstate.EventAsked {
				asked++
			}
		}
		if asked != 1 {
			t.Errorf("the lead was shown the question %d times; want once", asked)
		}
	})
}

// TestDisconnectOutcomeIsDurable: the member_gone outcome is held on the
// ticket across a restart.
func testDisconnectOutcomeIsDurable(t *testing.T, s suite) {
	f := s.newFleet(t, &fleetstate.RendezvousOptions{PresenceWindow: -1})
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

// TestDisconnectWithinPresenceWindow: a member whose connection goes
// mid-turn and comes back within the presence window, through another
// connection, keeps its turn: its reply reaches the lead's blocked send.
func testDisconnectWithinPresenceWindow(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{PresenceWindow: 10 * time.Second}, func(t *testing.T, f *fleet) {
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "work")
		})
		msg := f.next("scout")
		if err := f.r.Disconnect("scout"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second)
		if p, _ := f.r.Poll(context.Background(), "lead", msg.TurnID, 0); p.State == fleetstate.TicketDone {
			t.Fatalf("turn within the window = %+v; want still open", p)
		}
		if err := f.r.SetReady("scout", true); err != nil { // back, through another daemon
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second) // past the window: coming back stopped it
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatalf("reply after coming back: %v", err)
		}
		if res := <-sent; res.err != nil || res.o.Kind != fleetstate.OutcomeReply || res.o.Content != "done" {
			t.Fatalf("send = %+v, %v; want the reply", res.o, res.err)
		}
		if m := f.r.Members(); !m[0].Ready {
			t.Errorf("members = %+v; want scout ready", m)
		}
	})
}

// TestDisconnectMidAskKeepsQuestion: a member's Ask abandoned because its
// connection went (the call's context ends, in either order with the
// disconnect) keeps its question for the presence window: the lead
// answers it meanwhile, and the member, back through another connection,
// asks again in the same turn and gets that answer.
func testDisconnectMidAskKeepsQuestion(t *testing.T, s suite) {
	for _, disconnectFirst := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			f := s.newFleet(t, nil)
			f.pull("scout")
			o := f.send("scout", "work")
			msg := f.next("scout")
			ctx, cancel := context.WithCancel(context.Background())
			asked := async(func() (fleetstate.Outcome, error) {
				text, _, err := f.r.AskTurn(ctx, "scout", msg.TurnID, "which branch?", "main")
				return fleetstate.Outcome{Content: text}, err
			})
			synctest.Wait()
			if disconnectFirst {
				if err := f.r.Disconnect("scout"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(100 * time.Millisecond)
			cancel() // the daemon the call ran through died
			if res := <-asked; res.err == nil {
				t.Fatalf("abandoned ask = %+v; want its context's error", res.o)
			}
			time.Sleep(100 * time.Millisecond)
			if !disconnectFirst {
				if err := f.r.Disconnect("scout"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(3 * time.Second) // past the abandoned question's grace
			if p, _ := f.r.Poll(context.Background(), "lead", o.Ticket, 0); p.Kind != fleetstate.OutcomeQuestion || p.Content != "which branch?" {
				t.Fatalf("ticket while the member is away = %+v; want its question", p)
			}
			// The lead's Answer waits for the turn's outcome.
			answered := async(func() (fleetstate.Outcome, error) {
				return f.r.Answer(context.Background(), "lead", msg.TurnID, "release")
			})
			time.Sleep(time.Second)
			if err := f.r.SetReady("scout", true); err != nil {
				t.Fatal(err)
			}
			text, timedOut, err := f.r.AskTurn(context.Background(), "scout", msg.TurnID, "which branch?", "main")
			if err != nil || timedOut || text != "release" {
				t.Fatalf("ask again after coming back = %q, %v, %v; want the lead's answer", text, timedOut, err)
			}
			if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
				t.Fatal(err)
			}
			if res := <-answered; res.err != nil || res.o.Kind != fleetstate.OutcomeReply || res.o.Content != "done" {
				t.Fatalf("answer = %+v, %v; want the reply", res.o, res.err)
			}
		})
	}
}

// TestAbandonedAskWithdrawn: an Ask its caller gives up while the member
// stays connected is withdrawn after a short grace: the lead no longer
// sees the question, and the turn goes on.
func testAbandonedAskWithdrawn(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		o, _ := f.r.SendDetached("lead", "scout", "work")
		msg := f.next("scout")
		ctx, cancel := context.WithCancel(context.Background())
		asked := async(func() (fleetstate.Outcome, error) {
			_, _, err := f.r.AskTurn(ctx, "scout", msg.TurnID, "which branch?", "main")
			return fleetstate.Outcome{}, err
		})
		synctest.Wait()
		cancel()
		<-asked
		time.Sleep(2 * time.Second)
		if p, _ := f.r.Poll(context.Background(), "lead", o.Ticket, 0); p.Kind == fleetstate.OutcomeQuestion || p.State != fleetstate.TicketWorking {
			t.Fatalf("ticket after the ask was given up = %+v; want working, no question", p)
		}
		_, err := f.r.Answer(context.Background(), "lead", msg.TurnID, "too late")
		wantCode(t, err, fleetstate.CodeNoPendingQuestion)
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDropEndsTurnAtOnce: Drop, a newer connection taking over from one
// still there, ends the open turn at once, whatever the window, and
// leaves the member ready.
func testDropEndsTurnAtOnce(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	o, _ := f.r.SendDetached("lead", "scout", "work")
	f.next("scout")
	if err := f.r.Drop("scout"); err != nil {
		t.Fatal(err)
	}
	p, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0)
	if err != nil || p.Kind != fleetstate.OutcomeFailed || p.Reason != fleetstate.ReasonMemberGone {
		t.Fatalf("ticket after Drop = %+v, %v; want failed/member_gone", p, err)
	}
	if m := f.r.Members(); !m[0].Ready {
		t.Errorf("members = %+v; want scout still ready", m)
	}
	wantCode(t, f.r.Drop("ghost"), fleetstate.CodeUnknownMember)
}

// TestNextAfterHandsLostTurnAgain: a Next sent again after its answer was
// lost names the turn its caller took last; the turn handed to the lost
// call is handed again, still open, and a Next naming the open turn ends
// it as Next does.
func testNextAfterHandsLostTurnAgain(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	first, _ := f.r.SendDetached("lead", "scout", "first")
	second, _ := f.r.SendDetached("lead", "scout", "second")
	lost := f.next("scout") // its answer never reached the member
	for range 2 {
		again, ok, err := f.r.NextAfter(context.Background(), "scout", "", 0)
		if err != nil || !ok || again.TurnID != lost.TurnID || again.Content != "first" || again.From != "lead" {
			t.Fatalf("NextAfter(none) = %+v, %v, %v; want turn %s again", again, ok, err, lost.TurnID)
		}
	}
	if p, _ := f.r.Poll(context.Background(), "lead", first.Ticket, 0); p.State != fleetstate.TicketWorking {
		t.Fatalf("first ticket = %+v; want still working", p)
	}
	// Done with the first: a Next naming it ends it and takes the second.
	msg, ok, err := f.r.NextAfter(context.Background(), "scout", lost.TurnID, 0)
	if err != nil || !ok || msg.TurnID != second.TurnID {
		t.Fatalf("NextAfter(first) = %+v, %v, %v; want the second message", msg, ok, err)
	}
	if p, _ := f.r.Poll(context.Background(), "lead", first.Ticket, 0); p.Kind != fleetstate.OutcomeTurnDone {
		t.Fatalf("first ticket = %+v; want turn_done", p)
	}
	if err := f.r.ReplyTurn("scout", second.TurnID, "done"); err != nil {
		t.Fatal(err)
	}
	// Nothing open, nothing queued: it waits as Next does.
	if msg, ok, err := f.r.NextAfter(context.Background(), "scout", second.TurnID, 0); err != nil || ok {
		t.Fatalf("NextAfter with nothing queued = %+v, %v, %v; want none", msg, ok, err)
	}
}

// TestNextAfterRefusesALateCall: a Next that names a turn older than the
// member's last, with no turn open, was sent before a later call took
// work (held up in a paused daemon, say, while its client gave up and sent
// again): it is refused at once with ERR_SUPERSEDED, queued or not, and
// takes nothing; the member's own calls go on as before.
func testNextAfterRefusesALateCall(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	ctx := context.Background()
	if _, err := f.r.SendDetached("lead", "scout", "first"); err != nil {
		t.Fatal(err)
	}
	first := f.next("scout")
	if err := f.r.ReplyTurn("scout", first.TurnID, "done"); err != nil {
		t.Fatal(err)
	}
	second, _ := f.r.SendDetached("lead", "scout", "second")
	took, ok, err := f.r.NextAfter(ctx, "scout", first.TurnID, 0)
	if err != nil || !ok || took.TurnID != second.TurnID {
		t.Fatalf("NextAfter(first) = %+v, %v, %v; want the second message", took, ok, err)
	}
	if err := f.r.ReplyTurn("scout", second.TurnID, "done"); err != nil {
		t.Fatal(err)
	}
	// Nothing queued: the late call would park and take the next send.
	if msg, ok, err := f.r.NextAfter(ctx, "scout", first.TurnID, 10*time.Millisecond); !errors.Is(err, fleetstate.ErrSuperseded) || ok {
		t.Fatalf("a late NextAfter(first), nothing queued = %+v, %v, %v; want ERR_SUPERSEDED at once", msg, ok, err)
	}
	third, _ := f.r.SendDetached("lead", "scout", "third")
	// Queued: the late call would take it.
	if msg, ok, err := f.r.NextAfter(ctx, "scout", first.TurnID, 0); !errors.Is(err, fleetstate.ErrSuperseded) || ok {
		t.Fatalf("a late NextAfter(first), one queued = %+v, %v, %v; want ERR_SUPERSEDED", msg, ok, err)
	}
	if p, _ := f.r.Poll(ctx, "lead", third.Ticket, 0); p.State != fleetstate.TicketQueued {
		t.Fatalf("third ticket after the late call = %+v; want still queued", p)
	}
	// The member's own call, naming its last turn (or none), takes it.
	msg, ok, err := f.r.NextAfter(ctx, "scout", second.TurnID, 0)
	if err != nil || !ok || msg.TurnID != third.TurnID {
		t.Fatalf("NextAfter(second) = %+v, %v, %v; want the third message", msg, ok, err)
	}
	// With a turn open, a late call is handed that turn again, and ends
	// nothing.
	if again, ok, err := f.r.NextAfter(ctx, "scout", first.TurnID, 0); err != nil || !ok || again.TurnID != third.TurnID {
		t.Fatalf("a late NextAfter(first), third open = %+v, %v, %v; want the third again", again, ok, err)
	}
	if p, _ := f.r.Poll(ctx, "lead", third.Ticket, 0); p.State != fleetstate.TicketWorking {
		t.Fatalf("third ticket = %+v; want still working", p)
	}
}

// TestDisconnectQueuedWaitsForReturn: messages for a disconnected member
// wait for it at most ReadyTimeout; one that comes back in time gets them.
func testDisconnectQueuedWaitsForReturn(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{ReadyTimeout: 10 * time.Second}, func(t *testing.T, f *fleet) {
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
		back := f.send("miner", "for a member that comes back")
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
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
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

// TestActingForALead: CancelFor and AnswerFor, a person acting for a lead,
// are not calls of the lead: the outcome a blocking send returned to the
// lead stays held (the lead's next own call lets it go), AnswerFor does
// not wait for the turn's next outcome, and a lead's waiting Poll returns
// a cancellation made for it as news.
func testActingForALead(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		for _, m := range []string{"scout", "miner", "digger"} {
			f.pull(m)
		}
		x := f.send("miner", "to be cancelled")
		y, _ := f.r.SendDetached("lead", "scout", "a question turn")
		msg := f.next("scout")
		asked := async(func() (fleetstate.Outcome, error) {
			text, _, err := f.r.AskTurn(context.Background(), "scout", msg.TurnID, "which?", "")
			return fleetstate.Outcome{Content: text}, err
		})
		synctest.Wait()
		if p, _ := f.r.Poll(context.Background(), "lead", y.Ticket, 0); p.Kind != fleetstate.OutcomeQuestion {
			t.Fatalf("ticket %+v; want the question", p)
		}
		// The last call of the lead: a blocking send, its reply returned.
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "digger", "first")
		})
		f.next("digger")
		if err := f.r.Reply("digger", "first done"); err != nil {
			t.Fatal(err)
		}
		first := (<-sent).o

		if o, err := f.r.AnswerFor("lead", msg.TurnID, "this one"); err != nil || o.State != fleetstate.TicketWorking {
			t.Fatalf("AnswerFor = %+v, %v; want the turn working again, at once", o, err)
		}
		if res := <-asked; res.err != nil || res.o.Content != "this one" {
			t.Fatalf("the member's Ask = %+v, %v; want the answer", res.o, res.err)
		}
		if o, err := f.r.CancelFor("lead", x.Ticket); err != nil || o.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("CancelFor = %+v, %v; want cancelled", o, err)
		}
		// The lead's first own call since: the reply its send returned is
		// still there, for this call to find.
		if o, err := f.r.Poll(context.Background(), "lead", first.Ticket, 0); err != nil || o.Content != "first done" {
			t.Fatalf("the reply returned to the lead, after AnswerFor and CancelFor = %+v, %v; want it still held", o, err)
		}
		if err := f.r.ReplyTurn("scout", msg.TurnID, "answered and done"); err != nil {
			t.Fatal(err)
		}
		if o, err := f.r.Poll(context.Background(), "lead", y.Ticket, 0); err != nil || o.Content != "answered and done" {
			t.Fatalf("the lead's ticket after the answered turn's reply = %+v, %v; want it", o, err)
		}

		// A lead waiting on a ticket is woken by a cancellation made for it.
		q, _ := f.r.SendDetached("other", "miner", "waited on")
		polled := async(func() (fleetstate.Outcome, error) {
			return f.r.Poll(context.Background(), "other", q.Ticket, 30*time.Second)
		})
		synctest.Wait()
		if _, err := f.r.CancelFor("other", q.Ticket); err != nil {
			t.Fatal(err)
		}
		if res := <-polled; res.err != nil || res.o.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("the lead's waiting poll = %+v, %v; want the cancellation", res.o, res.err)
		}
	})
}
