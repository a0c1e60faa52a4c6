package fleetstatetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
)

// ---- one owner -------------------------------------------------------------

// Store.Clean refuses, and changes nothing, while a rendezvous owns the
// fleet; Rendezvous.Clean cleans the store and ends the turns in one step.
func testCleanGoesThroughTheOwner(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		if _, err := f.st.NewSession("s"); err != nil {
			t.Fatal(err)
		}
		id := put(t, f.st, "scout", "notes.md", "keep", false)
		o := f.send("scout", "work")
		if err := f.st.Clean(); !errors.Is(err, fleetstate.ErrFleetOwned) {
			t.Fatalf("Store.Clean under an owner = %v; want %s", err, fleetstate.CodeFleetOwned)
		}
		if got := get(t, f.st, id); got != "keep" {
			t.Fatalf("a refused clean changed a file: %q", got)
		}
		if _, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0); err != nil {
			t.Fatalf("a refused clean dropped a ticket: %v", err)
		}
		if err := f.r.Clean(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.CurrentSession(); !errors.Is(err, fleetstate.ErrNoActiveSession) {
			t.Fatalf("session after Rendezvous.Clean: %v; want none", err)
		}
		if _, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("ticket after Rendezvous.Clean: %v; want %s", err, fleetstate.CodeUnknownTicket)
		}
		if _, ok, _ := f.r.Next(context.Background(), "scout", 0); ok {
			t.Fatal("a cleaned message was delivered")
		}
	})
}

// ---- restarts --------------------------------------------------------------

// restart crashes f's rendezvous and opens a new one in the same home
// with opts, registering the pulling members named.
func (f *fleet) restart(opts *fleetstate.RendezvousOptions, members ...string) {
	f.t.Helper()
	f.h.Crash(f.t, f.r)
	st, r := openRendezvous(f.t, f.h, opts)
	f.st, f.r = st, r
	for _, m := range members {
		if err := r.AddMember(m, nil); err != nil {
			f.t.Fatal(err)
		}
	}
}

// send sends brief from the lead to member, detached, failing the test
// if it cannot.
func (f *fleet) send(member, brief string) fleetstate.Outcome {
	f.t.Helper()
	o, err := f.r.SendDetached("lead", member, brief)
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

// working sends brief to member, detached, and has the member take it:
// the turn is open.
func (f *fleet) working(member, brief string) fleetstate.Outcome {
	f.t.Helper()
	o := f.send(member, brief)
	f.next(member)
	return o
}

func (f *fleet) poll(ticket string) fleetstate.Outcome {
	f.t.Helper()
	o, err := f.r.Poll(context.Background(), "lead", ticket, 0)
	if err != nil {
		f.t.Fatalf("Poll(%s): %v", ticket, err)
	}
	return o
}

// A member that held an open turn counts as ready after a restart, so a
// message queued behind the turn does not fail for want of readiness; if
// the member never comes back, the turn ends member_gone at the rejoin
// bound, and the queued message member_not_ready at the ready bound after.
func testRestoredTurnsOfAMemberThatNeverComesBack(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		open := f.working("scout", "long task")
		queued, _ := f.r.SendDetached("lead", "scout", "after it")
		opts := &fleetstate.RendezvousOptions{RejoinTimeout: 30 * time.Second, ReadyTimeout: 10 * time.Second}
		f.restart(opts, "scout")

		settle(20 * time.Second) // past the ready bound, within the rejoin bound
		if o := f.poll(queued.Ticket); o.State != fleetstate.TicketQueued {
			t.Fatalf("queued ticket within the rejoin bound = %+v; want still queued (the member counts as ready)", o)
		}
		if got := f.r.Members(); len(got) != 1 || !got[0].Ready {
			t.Fatalf("members within the rejoin bound = %+v; want scout ready", got)
		}
		settle(11 * time.Second) // past the rejoin bound
		if o := f.poll(open.Ticket); o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonMemberGone {
			t.Fatalf("restored open turn past the rejoin bound = %+v; want failed, member_gone", o)
		}
		if err := f.r.Ack("lead", open.Ticket); err != nil {
			t.Fatalf("ack of the ended turn: %v", err)
		}
		settle(11 * time.Second) // past the ready bound that then starts
		if o := f.poll(queued.Ticket); o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonMemberNotReady {
			t.Fatalf("queued ticket of a member gone = %+v; want failed, member_not_ready", o)
		}
	})
}

// A member that comes back within the rejoin bound keeps its turn and
// answers it.
func testRestoredTurnKeptByAMemberThatComesBack(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		open := f.working("scout", "long task")
		f.restart(&fleetstate.RendezvousOptions{RejoinTimeout: 30 * time.Second}, "scout")
		settle(10 * time.Second)
		if err := f.r.SetReady("scout", true); err != nil { // its stream reopened
			t.Fatal(err)
		}
		settle(time.Minute)
		if err := f.r.Reply("scout", "done after all"); err != nil {
			t.Fatalf("reply to the restored turn: %v", err)
		}
		if o := f.poll(open.Ticket); o.Content != "done after all" {
			t.Fatalf("ticket = %+v; want the reply", o)
		}
	})
}

// Messages queued for a member that is not registered after the restart
// (its token was revoked meanwhile) end at the ready bound; so does the
// open turn of such a member at the rejoin bound.
func testRestoredTurnsOfAnUnregisteredMemberEnd(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		open := f.working("scout", "task")
		queued, _ := f.r.SendDetached("lead", "scout", "next")
		f.restart(&fleetstate.RendezvousOptions{RejoinTimeout: 5 * time.Second, ReadyTimeout: 5 * time.Second})
		settle(11 * time.Second)
		if o := f.poll(open.Ticket); o.Reason != fleetstate.ReasonMemberGone {
			t.Fatalf("open turn = %+v; want failed, member_gone", o)
		}
		if o := f.poll(queued.Ticket); o.Reason != fleetstate.ReasonMemberNotReady {
			t.Fatalf("queued ticket = %+v; want failed, member_not_ready", o)
		}
	})
}

// A question pending at a restart keeps its window: the lead can answer it
// by turn ID and the member's next Ask gets the answer at once.
func testRestoredQuestionCanBeAnswered(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		o := f.working("scout", "task")
		asked := make(chan error, 1)
		go func() {
			_, _, err := f.r.Ask(context.Background(), "scout", "which way?", "left")
			asked <- err
		}()
		settle(10 * time.Second)
		f.restart(nil, "scout")
		if err := <-asked; fleetstate.CodeOf(err) != fleetstate.CodeClosed {
			t.Fatalf("the Ask cut by the restart = %v; want %s", err, fleetstate.CodeClosed)
		}
		q := f.poll(o.Ticket)
		if q.Kind != fleetstate.OutcomeQuestion || q.Content != "which way?" {
			t.Fatalf("restored ticket = %+v; want the question", q)
		}
		answered := async(func() (fleetstate.Outcome, error) {
			return f.r.Answer(context.Background(), "lead", q.TurnID, "right")
		})
		synctest.Wait()
		text, timedOut, err := f.r.Ask(context.Background(), "scout", "which way?", "left")
		if err != nil || timedOut || text != "right" {
			t.Fatalf("the member's next Ask = %q, %v, %v; want the lead's answer at once", text, timedOut, err)
		}
		if err := f.r.Reply("scout", "went right"); err != nil {
			t.Fatal(err)
		}
		if res := <-answered; res.err != nil || res.o.Content != "went right" {
			t.Fatalf("Answer = %+v, %v; want the member's reply", res.o, res.err)
		}
	})
}

// A restored question nobody answers goes back to working when what was
// left of its window passes, and a waiting poll over all tickets does not
// spin on it meanwhile.
func testRestoredQuestionWindowEnds(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		o := f.working("scout", "task")
		go f.r.Ask(context.Background(), "scout", "which way?", "left")
		settle(20 * time.Second)
		f.restart(nil, "scout")
		if err := f.r.SetReady("scout", true); err != nil { // the member is back, but does not ask again
			t.Fatal(err)
		}
		all, err := f.r.PollAll(context.Background(), "lead", 0) // the lead sees the question
		if err != nil || len(all) != 1 || all[0].Kind != fleetstate.OutcomeQuestion {
			t.Fatalf("PollAll = %+v, %v; want the question", all, err)
		}
		// The question was seen: the waiting poll does not return at once,
		// and the end of the window (35 s on) is no news either.
		start := time.Now()
		all, err = f.r.PollAll(context.Background(), "lead", 50*time.Second)
		if waited := time.Since(start); err != nil || waited != 50*time.Second || len(all) != 1 || all[0].State != fleetstate.TicketWorking {
			t.Fatalf("waiting PollAll = %+v, %v after %v; want the ticket back to working, after the full 50s", all, err, waited)
		}
		if _, err := f.r.Answer(context.Background(), "lead", o.TurnID, "late"); fleetstate.CodeOf(err) != fleetstate.CodeNoPendingQuestion {
			t.Fatalf("Answer after the window = %v; want %s", err, fleetstate.CodeNoPendingQuestion)
		}
	})
}

// A waiting poll over all tickets returns at once for news only: a question
// the lead has seen does not make it return again.
func testPollAllWaitsForNews(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.r.SendDetached("lead", "scout", "task")
		f.next("scout")
		go f.r.Ask(context.Background(), "scout", "which way?", "left")
		synctest.Wait()
		start := time.Now()
		if all, _ := f.r.PollAll(context.Background(), "lead", 30*time.Second); len(all) != 1 || time.Since(start) != 0 {
			t.Fatalf("first waiting PollAll = %+v after %v; want the new question at once", all, time.Since(start))
		}
		start = time.Now()
		f.r.PollAll(context.Background(), "lead", 30*time.Second)
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("second waiting PollAll returned after %v; want it to wait 30s for news", d)
		}
	})
}

// ---- cancel ----------------------------------------------------------------

func testCancelQueuedTurnIsNeverDelivered(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	first, _ := f.r.SendDetached("lead", "scout", "first")
	second, _ := f.r.SendDetached("lead", "scout", "second")
	o, err := f.r.Cancel("lead", first.Ticket)
	if err != nil || o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonCancelled || o.State != fleetstate.TicketDone {
		t.Fatalf("Cancel = %+v, %v; want failed, cancelled, done", o, err)
	}
	if msg := f.next("scout"); msg.Content != "second" {
		t.Fatalf("Next after a cancel = %q; want the second message", msg.Content)
	}
	_ = second
}

func testCancelOpenTurnTellsTheMember(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "task")
		})
		msg := f.next("scout")
		asked := make(chan error, 1)
		go func() {
			_, _, err := f.r.Ask(context.Background(), "scout", "sure?", "yes")
			asked <- err
		}()
		synctest.Wait()
		<-sent                                   // the question
		o, err := f.r.Cancel("lead", msg.TurnID) // by turn ID
		if err != nil || o.Reason != fleetstate.ReasonCancelled || o.TurnID != msg.TurnID {
			t.Fatalf("Cancel by turn ID = %+v, %v", o, err)
		}
		if err := <-asked; !errors.Is(err, fleetstate.ErrTurnCancelled) {
			t.Fatalf("the blocked Ask = %v; want %s", err, fleetstate.CodeTurnCancelled)
		}
		if err := f.r.Reply("scout", "too late"); !errors.Is(err, fleetstate.ErrTurnCancelled) {
			t.Fatalf("Reply after the cancel = %v; want %s", err, fleetstate.CodeTurnCancelled)
		}
		// The outcome the cancel returned is held until the lead's next
		// call, which a second cancel is: then it is gone.
		if p := f.poll(o.Ticket); p.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("ticket after the cancel = %+v", p)
		}
		if _, err := f.r.Cancel("lead", o.Ticket); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("second Cancel = %v; want %s", err, fleetstate.CodeUnknownTicket)
		}
		if _, ok, err := f.r.Next(context.Background(), "scout", 0); ok || err != nil {
			t.Fatalf("Next = %v, %v", ok, err)
		}
		if err := f.r.Reply("scout", "x"); !errors.Is(err, fleetstate.ErrNoOpenTurn) {
			t.Fatalf("Reply after Next = %v; want %s", err, fleetstate.CodeNoOpenTurn)
		}
	})
}

func testCancelWakesTheBlockedSend(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "task")
		})
		msg := f.next("scout")
		if _, err := f.r.Cancel("lead", msg.TurnID); err != nil {
			t.Fatal(err)
		}
		if res := <-sent; res.err != nil || res.o.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("the blocked Send = %+v, %v; want failed, cancelled", res.o, res.err)
		}
	})
}

func testCancelRefusesOthers(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	o, _ := f.r.SendDetached("lead", "scout", "task")
	for _, tc := range []struct{ lead, id string }{
		{"other-lead", o.Ticket},
		{"lead", "ticket-00000000-0000-0000-0000-000000000000"},
	} {
		if _, err := f.r.Cancel(tc.lead, tc.id); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Errorf("Cancel(%s, %s) = %v; want %s", tc.lead, tc.id, err, fleetstate.CodeUnknownTicket)
		}
	}
	if p := f.poll(o.Ticket); p.State != fleetstate.TicketQueued {
		t.Fatalf("refused cancels changed the ticket: %+v", p)
	}
}

// ---- watchers --------------------------------------------------------------

// countingPort is a Member port that counts its status reads and gives no
// change notices, so it is read every PollInterval.
type countingPort struct{ reads atomic.Int64 }

func (p *countingPort) Deliver(context.Context, string) error { return nil }
func (p *countingPort) Status(context.Context) (fleetstate.Status, error) {
	p.reads.Add(1)
	return fleetstate.StatusWorking, nil
}
func (p *countingPort) Tail(context.Context, int) (string, bool, error) { return "", false, nil }

// However often a member's port is removed and given back, one goroutine
// watches it.
func testOneWatcherPerMember(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{PollInterval: time.Second}, func(t *testing.T, f *fleet) {
		p := &countingPort{}
		for range 10 {
			if err := f.r.AddMember("scout", p); err != nil {
				t.Fatal(err)
			}
			if err := f.r.AddMember("scout", nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.r.AddMember("scout", p); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := p.reads.Load()
		settle(10 * time.Second)
		if n := p.reads.Load() - before; n != 10 {
			t.Fatalf("%d status reads in 10 poll intervals; want 10 (one watcher)", n)
		}
	})
}

// A fleetmem.Member tells the rendezvous when its status changes: with a poll
// interval of an hour, a delivery and the end of a turn happen at once.
func testMemMemberIsNotPolled(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{PollInterval: time.Hour}, func(t *testing.T, f *fleet) {
		lm := f.local("worker")
		start := time.Now()
		o, _ := f.r.SendDetached("lead", "worker", "task")
		if got := recv(lm); got != "task" {
			t.Fatalf("member got %q; want the task at once", got)
		}
		lm.SetStatus(fleetstate.StatusWorking)
		synctest.Wait()
		lm.Print("all done")
		lm.SetStatus(fleetstate.StatusIdle)
		synctest.Wait()
		if p := f.poll(o.Ticket); p.Kind != fleetstate.OutcomeTurnDone || p.Content != "all done" {
			t.Fatalf("ticket = %+v; want turn_done with the tail", p)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("%v of fake time passed; want none (no polling)", d)
		}
	})
}

// ---- paging ----------------------------------------------------------------

func testPollPage(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	var want []string
	for i := range 250 {
		o := f.send("scout", fmt.Sprintf("job %d", i))
		want = append(want, o.Ticket)
	}
	var got []string
	cursor, pages := "", 0
	for {
		p, err := f.r.PollPage(context.Background(), "lead", 0, cursor, 0)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Tickets) > fleetstate.DefaultPollLimit {
			t.Fatalf("page of %d tickets; want at most %d", len(p.Tickets), fleetstate.DefaultPollLimit)
		}
		for _, o := range p.Tickets {
			got = append(got, o.Ticket)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if pages != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%d pages, %d tickets; want 3 pages of all 250 oldest first", pages, len(got))
	}
	if p, _ := f.r.PollPage(context.Background(), "lead", 0, "", 5000); len(p.Tickets) != 250 || p.Next != "" {
		t.Fatalf("a page with a huge limit: %d tickets, next %q", len(p.Tickets), p.Next)
	}
	if _, err := f.r.PollPage(context.Background(), "lead", 0, "not-a-cursor", 10); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
		t.Fatalf("bad cursor = %v; want %s", err, fleetstate.CodeInvalidArgument)
	}
}

// After a restart, the members that restored turns name but that were not
// added again are listed, and removing them ends their turns at once.
func testRemoveRestoredMember(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.pull("miner")
		open := f.working("scout", "task")
		queued, _ := f.r.SendDetached("lead", "scout", "next")
		f.r.SendDetached("lead", "miner", "keep")
		f.restart(nil, "miner")
		if got := f.r.Unregistered(); fmt.Sprint(got) != "[scout]" {
			t.Fatalf("Unregistered() = %v; want [scout]", got)
		}
		if err := f.r.RemoveMember("scout"); err != nil {
			t.Fatal(err)
		}
		for _, tk := range []string{open.Ticket, queued.Ticket} {
			if o := f.poll(tk); o.Reason != fleetstate.ReasonMemberRemoved {
				t.Fatalf("ticket %s = %+v; want failed, member_removed at once", tk, o)
			}
		}
		if got := f.r.Unregistered(); len(got) != 0 {
			t.Fatalf("Unregistered() after the removal = %v", got)
		}
	})
}

// A reply or question bound to a turn never lands on another.
func testReplyTurnIsBoundToItsTurn(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	f.r.SendDetached("lead", "scout", "task 1")
	two, _ := f.r.SendDetached("lead", "scout", "task 2")
	first := f.next("scout")
	second := f.next("scout") // ends the first turn: a member asking for work is done with the old
	if err := f.r.ReplyTurn("scout", first.TurnID, "X = 42"); !errors.Is(err, fleetstate.ErrNoOpenTurn) {
		t.Fatalf("reply bound to an ended turn = %v; want %s", err, fleetstate.CodeNoOpenTurn)
	}
	if _, _, err := f.r.AskTurn(context.Background(), "scout", first.TurnID, "q?", "d"); !errors.Is(err, fleetstate.ErrNoOpenTurn) {
		t.Fatalf("ask bound to an ended turn = %v; want %s", err, fleetstate.CodeNoOpenTurn)
	}
	if err := f.r.ReplyTurn("scout", second.TurnID, "Y = 7"); err != nil {
		t.Fatal(err)
	}
	if o := f.poll(two.Ticket); o.Content != "Y = 7" {
		t.Fatalf("task 2 = %+v; want Y = 7", o)
	}
}

// With HoldReturned, an outcome a call returned is not released by the
// lead's next call, only by an ack or the end of the hold.
func testHoldReturned(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{HoldReturned: time.Minute}, func(t *testing.T, f *fleet) {
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "task")
		})
		f.next("scout")
		f.r.Reply("scout", "done")
		res := <-sent
		f.r.SendDetached("lead", "scout", "another call of the lead")
		if o := f.poll(res.o.Ticket); o.Content != "done" {
			t.Fatalf("held outcome after the lead's next call = %+v; want it kept", o)
		}
		settle(time.Minute)
		if _, err := f.r.Poll(context.Background(), "lead", res.o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("held outcome after the hold = %v; want %s", err, fleetstate.CodeUnknownTicket)
		}
	})
}

// A brief and a reply far larger than a message of a replicated log (NATS
// carries at most 1 MiB by default) are kept whole: queued, across a
// restart, delivered, replied to, and held across another restart.
func testLargeBriefAndReplySurviveRestarts(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	brief := largeText("brief", 3<<20)
	o, err := f.r.SendDetached("lead", "scout", brief)
	if err != nil {
		t.Fatalf("SendDetached of %d bytes: %v", len(brief), err)
	}
	f.restart(nil, "scout")
	if err := f.r.SetReady("scout", true); err != nil {
		t.Fatal(err)
	}
	if msg := f.next("scout"); msg.Content != brief {
		t.Fatalf("member got %d bytes after a restart; want the %d-byte brief whole", len(msg.Content), len(brief))
	}
	reply := largeText("reply", 2<<20+17)
	if err := f.r.Reply("scout", reply); err != nil {
		t.Fatalf("Reply of %d bytes: %v", len(reply), err)
	}
	f.restart(nil, "scout")
	if got := f.poll(o.Ticket); got.Kind != fleetstate.OutcomeReply || got.Content != reply {
		t.Fatalf("ticket after a restart = %s with %d bytes; want the %d-byte reply", got.Kind, len(got.Content), len(reply))
	}
	if err := f.r.Ack("lead", o.Ticket); err != nil {
		t.Fatal(err)
	}
	f.restart(nil, "scout")
	if _, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("Poll of an acked ticket after a restart: %v; want %s", err, fleetstate.CodeUnknownTicket)
	}
}

// largeText is n bytes of varied text (lines numbered, so that a chunk
// lost, repeated or out of order shows).
func largeText(what string, n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s line %d: \"quoted\" <tag> & tab\t é\n", what, i)
	}
	return b.String()[:n]
}
