package fleetstatetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetmem"
)

// recv returns the next delivery to lm, or "" if none is waiting once every
// goroutine of the bubble is idle.
func recv(lm *fleetmem.Member) string {
	synctest.Wait()
	select {
	case s := <-lm.Inbox():
		return s
	default:
		return ""
	}
}

// recvAfter lets the watchers run for d of fake time, then returns the
// message typed into lm, if any.
func recvAfter(lm *fleetmem.Member, d time.Duration) string {
	settle(d)
	return recv(lm)
}

// settle lets the watchers run for d of fake time.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func testStatusGating(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("builder")
		ctx := context.Background()

		first := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "builder", "first") })
		if got := recv(lm); got != "first" {
			t.Fatalf("idle member got %q; want first", got)
		}
		// A second send to the busy member is queued and reported pending at once.
		second, err := f.r.Send(ctx, "lead", "builder", "second")
		if err != nil || second.Kind != fleetstate.OutcomePending || second.State != fleetstate.TicketQueued {
			t.Fatalf("second send = %+v, %v; want pending/queued at once", second, err)
		}
		lm.SetStatus(fleetstate.StatusWorking)
		settle(2 * time.Second)
		if err := f.r.Reply("builder", "first done"); err != nil {
			t.Fatal(err)
		}
		if r := <-first; r.o.Kind != fleetstate.OutcomeReply {
			t.Fatalf("first = %+v", r.o)
		}
		if got := recvAfter(lm, 5*time.Second); got != "" {
			t.Fatalf("delivered %q to a WORKING member", got)
		}
		lm.SetStatus(fleetstate.StatusIdle)
		if got := recvAfter(lm, time.Second); got != "second" {
			t.Fatalf("after going idle the member got %q; want second", got)
		}
		o, _ := f.r.Poll(ctx, "lead", second.Ticket, 0)
		if o.State != fleetstate.TicketWorking {
			t.Errorf("queued ticket after delivery: %+v; want working", o)
		}
	})
}

// testQuestionIsNeverTypedInto: a member BLOCKED on a question of its
// program's own (a permission prompt) gets nothing delivered, and its
// question shows among the members, until it is answered.
func testQuestionIsNeverTypedInto(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("asker")
		lm.Ask(fleetstate.StatusBlocked, "Do you want to proceed?\n❯ 1. Yes")
		ctx := context.Background()
		sent := f.send("asker", "new work")
		if got := recvAfter(lm, 10*time.Second); got != "" {
			t.Fatalf("delivered %q into the member's own prompt", got)
		}
		var info fleetstate.MemberInfo
		for _, mi := range f.r.Members() {
			if mi.Name == "asker" {
				info = mi
			}
		}
		if info.Status != "BLOCKED" || !strings.Contains(info.Question, "Do you want to proceed?") {
			t.Errorf("member info %+v; want BLOCKED with the question", info)
		}
		lm.SetStatus(fleetstate.StatusIdle)
		if got := recvAfter(lm, time.Second); got != "new work" {
			t.Fatalf("after the question the member got %q; want the queued work", got)
		}
		if o, _ := f.r.Poll(ctx, "lead", sent.Ticket, 0); o.State != fleetstate.TicketWorking {
			t.Errorf("ticket %+v; want working", o)
		}
	})
}

// testCancelInterruptsTheMember: a lead cancelling a turn its member is
// working on interrupts the member's work; a queued turn's cancel does
// not.
func testCancelInterruptsTheMember(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("worker")
		first := f.send("worker", "long work")
		if got := recv(lm); got != "long work" {
			t.Fatalf("got %q", got)
		}
		lm.SetStatus(fleetstate.StatusWorking)
		queued := f.send("worker", "later")
		if _, err := f.r.Cancel("lead", queued.Ticket); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		if n := lm.Interrupts(); n != 0 {
			t.Fatalf("%d interrupts for a queued turn's cancel; want none", n)
		}
		if _, err := f.r.Cancel("lead", first.Ticket); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		if n := lm.Interrupts(); n != 1 {
			t.Errorf("%d interrupts after the working turn's cancel; want 1", n)
		}
	})
}

func testUnknownStatusIsNeverDelivered(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("ghost")
		lm.SetStatus(fleetstate.StatusUnknown)
		o, err := f.r.Send(context.Background(), "lead", "ghost", "hello?")
		if err != nil || o.Kind != fleetstate.OutcomePending {
			t.Fatalf("send = %+v, %v; want pending after the bound", o, err)
		}
		if got := recvAfter(lm, 10*time.Minute); got != "" {
			t.Fatalf("delivered %q to an UNKNOWN member", got)
		}
		lm.SetStatus(fleetstate.StatusIdle)
		if got := recvAfter(lm, time.Second); got != "hello?" {
			t.Fatalf("re-detected idle member got %q", got)
		}
	})
}

func testBlockedIsDeliverable(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("waiter")
		lm.SetStatus(fleetstate.StatusBlocked)
		f.r.SendDetached("lead", "waiter", "go on")
		if got := recv(lm); got != "go on" {
			t.Fatalf("blocked member got %q; want go on", got)
		}
	})
}

func testNextWaitsForPickupWithGraceForFastTurns(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{PickupGrace: 3 * time.Second}, func(t *testing.T, f *fleet) {
		lm := f.local("quick")
		f.r.SendDetached("lead", "quick", "one")
		f.r.SendDetached("lead", "quick", "two")
		if got := recv(lm); got != "one" {
			t.Fatalf("got %q; want one", got)
		}
		// The member replies and is idle again before any status read
		// saw it WORKING: the gate holds the next message for the grace.
		f.r.Reply("quick", "one done")
		if got := recvAfter(lm, 2*time.Second); got != "" {
			t.Fatalf("delivered %q before the pickup grace passed", got)
		}
		if got := recvAfter(lm, 2*time.Second); got != "two" {
			t.Fatalf("after the grace the member got %q; want two", got)
		}
	})
}

// slowTyping is a member whose deliveries take typing to type, as a long
// brief pasted into a pane does.
type slowTyping struct {
	*fleetmem.Member
	typing time.Duration
}

func (p slowTyping) Deliver(ctx context.Context, content string) error {
	time.Sleep(p.typing)
	return p.Member.Deliver(ctx, content)
}

// TestPickupGraceAfterTyping: the pickup grace runs from when the brief
// is all typed, not from when its typing began: a brief that takes longer
// to type than the grace, to a member that starts soon after, is not
// taken for a turn that ended at once.
func testPickupGraceAfterTyping(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{PickupGrace: time.Second}, func(t *testing.T, f *fleet) {
		lm := fleetmem.NewMember()
		if err := f.r.AddMember("paster", slowTyping{lm, 3 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if err := f.r.SetReady("paster", true); err != nil {
			t.Fatal(err)
		}
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "paster", "a long brief")
		})
		settle(3 * time.Second)
		if got := recv(lm); got != "a long brief" {
			t.Fatalf("member got %q; want the brief", got)
		}
		settle(500 * time.Millisecond) // within the grace once typed
		lm.SetStatus(fleetstate.StatusWorking)
		settle(time.Second)
		if err := f.r.Reply("paster", "done"); err != nil {
			t.Fatal(err)
		}
		if res := <-sent; res.err != nil || res.o.Kind != fleetstate.OutcomeReply || res.o.Content != "done" {
			t.Fatalf("send = %+v, %v; want the reply", res.o, res.err)
		}
	})
}

// turnDoneCase delivers a brief to a member that prints tail and ends its
// turn without replying, and returns the outcome the blocked send gets.
func turnDoneCase(t *testing.T, s suite, brief string, print func(lm *fleetmem.Member)) fleetstate.Outcome {
	t.Helper()
	var out fleetstate.Outcome
	s.inFleet(t, &fleetstate.RendezvousOptions{TailLines: 50}, func(t *testing.T, f *fleet) {
		lm := f.local("worker")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "worker", brief)
		})
		if got := recv(lm); got != brief {
			t.Fatalf("member got %q", got)
		}
		lm.SetStatus(fleetstate.StatusWorking)
		settle(time.Second)
		print(lm)
		lm.SetStatus(fleetstate.StatusIdle)
		res := <-sent
		if res.err != nil {
			t.Fatal(res.err)
		}
		out = res.o
	})
	return out
}

func testTurnDoneBackendExhausted(t *testing.T, s suite) {
	o := turnDoneCase(t, s, "refactor the parser", func(lm *fleetmem.Member) {
		lm.Print("> refactor the parser\nError: Credit balance is too low\n")
	})
	if o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonBackendExhausted {
		t.Fatalf("outcome = %+v; want failed/backend_exhausted", o)
	}
}

func testTurnDoneEchoedBrief(t *testing.T, s suite) {
	brief := "Audit the authentication module for token handling bugs. Check expiry, " +
		"refresh and revocation paths, and write findings to notes/auth.md with file and line."
	o := turnDoneCase(t, s, brief, func(lm *fleetmem.Member) {
		// The pane shows the prompt, wrapped at 40 columns, and nothing else.
		lm.Print("╭────────────╮")
		for i := 0; i < len(brief); i += 40 {
			lm.Print("> " + brief[i:min(i+40, len(brief))])
		}
		lm.Print("╰────────────╯")
	})
	if o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonEchoedBrief {
		t.Fatalf("outcome = %+v; want failed/echoed_brief", o)
	}
	if strings.Contains(o.Content, "revocation") {
		t.Errorf("the echoed brief was reported as content: %q", o.Content)
	}
}

func testTurnDonePartialReport(t *testing.T, s suite) {
	o := turnDoneCase(t, s, "write the report", func(lm *fleetmem.Member) {
		for i := range 120 {
			lm.Print(fmt.Sprintf("finding %d: something real", i))
		}
	})
	if o.Kind != fleetstate.OutcomeTurnDone || !o.Partial {
		t.Fatalf("outcome = %+v; want turn_done marked partial", o)
	}
	lines := strings.Split(o.Content, "\n")
	if len(lines) != 50 || lines[49] != "finding 119: something real" {
		t.Errorf("clipped tail has %d lines ending %q; want the last 50", len(lines), lines[len(lines)-1])
	}
}

func testTurnDoneHint(t *testing.T, s suite) {
	o := turnDoneCase(t, s, "check the tests", func(lm *fleetmem.Member) {
		lm.Print("> check the tests\nran 112 tests, 3 failed in store_test.go\n")
	})
	if o.Kind != fleetstate.OutcomeTurnDone || o.Partial || !strings.Contains(o.Content, "3 failed") {
		t.Fatalf("outcome = %+v; want turn_done with the tail as a hint", o)
	}
}

func testSlowMemberGoesPendingThenHint(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{SendTimeout: 30 * time.Second}, func(t *testing.T, f *fleet) {
		lm := f.local("slow")
		ctx := context.Background()
		sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "slow", "long task") })
		recv(lm)
		lm.SetStatus(fleetstate.StatusWorking)
		lm.Print("step 1 of 9 ...")
		res := <-sent
		if res.o.Kind != fleetstate.OutcomePending || res.o.State != fleetstate.TicketWorking {
			t.Fatalf("slow send = %+v; want pending/working", res.o)
		}
		settle(5 * time.Minute)
		lm.Print("step 9 of 9: all green")
		lm.SetStatus(fleetstate.StatusIdle)
		o, err := f.r.Poll(ctx, "lead", res.o.Ticket, time.Minute)
		if err != nil || o.Kind != fleetstate.OutcomeTurnDone || !strings.Contains(o.Content, "all green") {
			t.Fatalf("poll = %+v, %v; want turn_done with the tail", o, err)
		}
	})
}

func testMemberNeverReady(t *testing.T, s suite) {
	for _, mode := range []string{"port", "pull"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := s.newFleet(t, nil)
				lm := fleetmem.NewMember()
				var port fleetstate.Member
				if mode == "port" {
					port = lm
				}
				if err := f.r.AddMember("late", port); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				o, err := f.r.Send(context.Background(), "lead", "late", "hello")
				if err != nil {
					t.Fatal(err)
				}
				if o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonMemberNotReady {
					t.Fatalf("send = %+v; want failed/member_not_ready", o)
				}
				if d := time.Since(start); d != fleetstate.DefaultReadyTimeout {
					t.Errorf("failed after %v; want %v", d, fleetstate.DefaultReadyTimeout)
				}
				if got := recv(lm); got != "" {
					t.Errorf("message reached the member: %q", got)
				}
				if infos := f.r.Members(); len(infos) != 1 || infos[0].Queued != 0 || infos[0].Ready {
					t.Errorf("Members = %+v; want late, not ready, nothing queued", infos)
				}
			})
		})
	}
}

func testMemberGoneMidTurn(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("fragile")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "fragile", "work")
		})
		recv(lm)
		lm.SetStatus(fleetstate.StatusWorking)
		settle(time.Second)
		lm.Kill()
		res := <-sent
		if res.o.Kind != fleetstate.OutcomeFailed || res.o.Reason != fleetstate.ReasonMemberGone {
			t.Fatalf("outcome = %+v; want failed/member_gone", res.o)
		}
	})
}

func testNudgeLeadPaneOnceWhenIdle(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		pane := fleetmem.NewMember()
		pane.SetStatus(fleetstate.StatusWorking)
		if err := f.r.SetLeadPort("lead", pane); err != nil {
			t.Fatal(err)
		}
		o, _ := f.r.SendDetached("lead", "scout", "job")
		f.next("scout")
		f.r.Reply("scout", "done")
		if got := recvAfter(pane, 5*time.Second); got != "" {
			t.Fatalf("nudged a WORKING lead pane: %q", got)
		}
		pane.SetStatus(fleetstate.StatusIdle)
		got := recvAfter(pane, time.Second)
		if !strings.Contains(got, o.Ticket) || !strings.Contains(got, "fleet_poll") {
			t.Fatalf("nudge = %q; want the ticket and how to collect it", got)
		}
		if again := recvAfter(pane, time.Minute); again != "" {
			t.Errorf("nudged twice with the default limit of 1: %q", again)
		}
		// A ticket polled before the lead was idle is not nudged about.
		pane.SetStatus(fleetstate.StatusWorking)
		settle(time.Second)
		o2, _ := f.r.SendDetached("lead", "scout", "job 2")
		f.next("scout")
		f.r.Reply("scout", "done 2")
		f.r.Poll(context.Background(), "lead", o2.Ticket, 0)
		pane.SetStatus(fleetstate.StatusIdle)
		if got := recvAfter(pane, time.Minute); got != "" {
			t.Errorf("nudged about a ticket already polled: %q", got)
		}
	})
}

func testStateSurvivesRestart(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		for _, m := range []string{"queued", "replied", "asking"} {
			f.pull(m)
		}
		ctx := context.Background()
		busy, _ := f.r.SendDetached("lead", "queued", "first")
		f.next("queued")
		queued, _ := f.r.SendDetached("lead", "queued", "waits in the FIFO")
		replied, _ := f.r.SendDetached("lead", "replied", "answer me")
		f.next("replied")
		f.r.Reply("replied", "held reply")
		asking, _ := f.r.SendDetached("lead", "asking", "ask me")
		f.next("asking")
		go f.r.Ask(ctx, "asking", "which one?", "a")
		synctest.Wait()

		// A second rendezvous on the same fleet after the first's
		// process was killed.
		f.h.Crash(t, f.r)
		_, r2 := openRendezvous(t, f.h, nil)
		all, err := r2.PollAll(ctx, "lead", 0)
		if err != nil {
			t.Fatal(err)
		}
		byTicket := map[string]fleetstate.Outcome{}
		for _, o := range all {
			byTicket[o.Ticket] = o
		}
		if o := byTicket[replied.Ticket]; o.Kind != fleetstate.OutcomeReply || o.Content != "held reply" {
			t.Errorf("held reply after restart = %+v", o)
		}
		if o := byTicket[asking.Ticket]; o.Kind != fleetstate.OutcomeQuestion || o.Content != "which one?" {
			t.Errorf("question after restart = %+v", o)
		}
		if o := byTicket[queued.Ticket]; o.State != fleetstate.TicketQueued {
			t.Errorf("queued message after restart = %+v", o)
		}
		if o := byTicket[busy.Ticket]; o.State != fleetstate.TicketWorking {
			t.Errorf("open turn after restart = %+v", o)
		}
		if len(all) != 4 {
			t.Errorf("restored %d tickets; want 4", len(all))
		}
		// The queued message is delivered by the new rendezvous, once:
		// the member's Next first ends its open turn.
		if err := r2.AddMember("queued", nil); err != nil {
			t.Fatal(err)
		}
		msg, ok, err := r2.Next(ctx, "queued", time.Second)
		if err != nil || !ok || msg.Content != "waits in the FIFO" {
			t.Fatalf("Next after restart = %+v, %v, %v", msg, ok, err)
		}
		if _, ok, _ := r2.Next(ctx, "queued", 0); ok {
			t.Error("a message was delivered twice")
		}
		o, _ := r2.Poll(ctx, "lead", busy.Ticket, 0)
		if o.Kind != fleetstate.OutcomeTurnDone {
			t.Errorf("restored open turn ended by Next = %+v; want turn_done", o)
		}
	})
}

// TestRestoredOpenTurnOfIdlePaneIsTriaged restarts the rendezvous while a
// member with a pane is in a turn; the pane is idle when the new rendezvous
// first looks, so the turn ended during the restart: it is triaged after
// the pickup grace rather than left open, blocking the member's FIFO.
func testRestoredOpenTurnOfIdlePaneIsTriaged(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("worker")
		o, _ := f.r.SendDetached("lead", "worker", "task before the crash")
		if got := recv(lm); got != "task before the crash" {
			t.Fatalf("member got %q", got)
		}
		lm.SetStatus(fleetstate.StatusWorking)
		settle(time.Second)

		f.h.Crash(t, f.r)
		_, r2 := openRendezvous(t, f.h, nil)
		pane := fleetmem.NewMember()
		pane.Print("all done, forgot to reply")
		if err := r2.AddMember("worker", pane); err != nil {
			t.Fatal(err)
		}
		r2.SetReady("worker", true)
		next, _ := r2.SendDetached("lead", "worker", "next task")
		settle(fleetstate.DefaultPickupGrace + time.Second)
		got, err := r2.Poll(context.Background(), "lead", o.Ticket, 0)
		if err != nil || got.Kind != fleetstate.OutcomeTurnDone || !strings.Contains(got.Content, "forgot to reply") {
			t.Fatalf("restored turn = %+v, %v; want turn_done with the tail", got, err)
		}
		if msg := recvAfter(pane, time.Second); msg != "next task" {
			t.Fatalf("the next message after the restored turn: %q", msg)
		}
		if p, _ := r2.Poll(context.Background(), "lead", next.Ticket, 0); p.State != fleetstate.TicketWorking {
			t.Fatalf("next ticket = %+v", p)
		}
	})
}
