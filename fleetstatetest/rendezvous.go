package fleetstatetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetmem"
)

// fleet is a rendezvous with a lead named "lead", in the test's home.
type fleet struct {
	t  *testing.T
	h  Home
	st *fleetstate.Store
	r  *fleetstate.Rendezvous
}

func (s suite) newFleet(t *testing.T, opts *fleetstate.RendezvousOptions) *fleet {
	t.Helper()
	h := s.newHome(t)
	st, r := openRendezvous(t, h, opts)
	return &fleet{t: t, h: h, st: st, r: r}
}

// inFleet runs test in a bubble of fake time ([synctest.Test]) with a
// fleet of its own, opened with opts.
func (s suite) inFleet(t *testing.T, opts *fleetstate.RendezvousOptions, test func(t *testing.T, f *fleet)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		test(t, s.newFleet(t, opts))
	})
}

// pull registers a member that pulls its messages.
func (f *fleet) pull(name string) {
	f.t.Helper()
	if err := f.r.AddMember(name, nil); err != nil {
		f.t.Fatal(err)
	}
	if err := f.r.SetReady(name, true); err != nil {
		f.t.Fatal(err)
	}
}

// local registers a ready member behind a fleetmem.Member port.
func (f *fleet) local(name string) *fleetmem.Member {
	f.t.Helper()
	lm := fleetmem.NewMember()
	if err := f.r.AddMember(name, lm); err != nil {
		f.t.Fatal(err)
	}
	if err := f.r.SetReady(name, true); err != nil {
		f.t.Fatal(err)
	}
	return lm
}

// next takes the member's next message, failing the test if none comes.
func (f *fleet) next(member string) fleetstate.Message {
	f.t.Helper()
	msg, ok, err := f.r.Next(context.Background(), member, time.Minute)
	if err != nil || !ok {
		f.t.Fatalf("Next(%s) = %v, %v; want a message", member, ok, err)
	}
	return msg
}

func wantKind(t *testing.T, o fleetstate.Outcome, kind fleetstate.OutcomeKind) {
	t.Helper()
	if o.Kind != kind {
		t.Fatalf("outcome = %+v; want kind %s", o, kind)
	}
}

func wantCode(t *testing.T, err error, code fleetstate.Code) {
	t.Helper()
	if got := fleetstate.CodeOf(err); got != code {
		t.Fatalf("error = %v (code %q); want code %s", err, got, code)
	}
}

// async runs fn in a goroutine and returns a channel with its outcome.
func async(fn func() (fleetstate.Outcome, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		o, err := fn()
		ch <- result{o, err}
	}()
	return ch
}

type result struct {
	o   fleetstate.Outcome
	err error
}

func testSendBlocksUntilReplyWithoutPolling(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		start := time.Now()
		got := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "count the files")
		})
		msg := f.next("scout")
		if msg.Content != "count the files" || msg.From != "lead" || msg.TurnID == "" {
			t.Fatalf("member got %+v", msg)
		}
		if err := f.r.Reply("scout", "42 files"); err != nil {
			t.Fatal(err)
		}
		res := <-got
		if res.err != nil {
			t.Fatal(res.err)
		}
		wantKind(t, res.o, fleetstate.OutcomeReply)
		if res.o.Content != "42 files" || res.o.TurnID != msg.TurnID || res.o.From != "scout" {
			t.Errorf("outcome = %+v", res.o)
		}
		if res.o.Ticket == "" {
			t.Errorf("a reply handed to the blocked send carries no ticket; want the ticket that holds it")
		}
		// In the bubble, time moves only when every goroutine waits on
		// a timer: no time passed means nobody polled or slept.
		if d := time.Since(start); d != 0 {
			t.Errorf("round trip took %v of fake time; want 0 (no polling)", d)
		}
	})
}

// The outcome a blocking send returned stays held on its ticket until the
// lead's next call: a lead whose connection broke as it travelled polls it;
// a lead that calls again has shown that it got it.
func testOutcomeOfBlockingSendHeldUntilLeadsNextCall(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.pull("other")
		got := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "count the files")
		})
		f.next("scout")
		if err := f.r.Reply("scout", "42 files"); err != nil {
			t.Fatal(err)
		}
		res := <-got
		for range 2 { // polls show it and do not release it
			all, err := f.r.PollAll(context.Background(), "lead", 0)
			if err != nil || len(all) != 1 || all[0].Ticket != res.o.Ticket || all[0].Content != "42 files" || all[0].State != fleetstate.TicketDone {
				t.Fatalf("PollAll after the send returned = %+v, %v; want its reply held on ticket %s", all, err, res.o.Ticket)
			}
		}
		f.send("other", "next job")
		if _, err := f.r.Poll(context.Background(), "lead", res.o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("Poll after the lead's next call = %v; want %s: the outcome is released", err, fleetstate.CodeUnknownTicket)
		}
	})
}

// An acked outcome of a blocking send is gone at once.
func testOutcomeOfBlockingSendCanBeAcked(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		got := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "job")
		})
		f.next("scout")
		if err := f.r.Reply("scout", "done"); err != nil {
			t.Fatal(err)
		}
		res := <-got
		if err := f.r.Ack("lead", res.o.Ticket); err != nil {
			t.Fatal(err)
		}
		if all, _ := f.r.PollAll(context.Background(), "lead", 0); len(all) != 0 {
			t.Fatalf("PollAll after the ack = %+v; want nothing", all)
		}
	})
}

func testClarificationByTurnID(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		ctx := context.Background()
		sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "scout", "fix the build") })
		msg := f.next("scout")

		type asked struct {
			text     string
			timedOut bool
			err      error
		}
		answered := make(chan asked, 1)
		go func() {
			a, to, err := f.r.Ask(ctx, "scout", "which branch?", "main")
			answered <- asked{a, to, err}
		}()
		res := <-sent
		if res.err != nil {
			t.Fatal(res.err)
		}
		wantKind(t, res.o, fleetstate.OutcomeQuestion)
		if res.o.TurnID != msg.TurnID || res.o.Content != "which branch?" || res.o.Ticket == "" {
			t.Fatalf("question outcome = %+v", res.o)
		}

		// Answering by member name opens a new turn and does not answer.
		byName, err := f.r.Send(ctx, "lead", "scout", "release")
		if err != nil {
			t.Fatal(err)
		}
		wantKind(t, byName, fleetstate.OutcomePending)
		if byName.State != fleetstate.TicketQueued {
			t.Errorf("send to a busy member: state %q; want queued", byName.State)
		}
		select {
		case a := <-answered:
			t.Fatalf("a send by member name answered the question: %+v", a)
		default:
		}

		_, err = f.r.Answer(ctx, "lead", "turn-unknown", "x")
		wantCode(t, err, fleetstate.CodeUnknownTurn)
		_, err = f.r.Answer(ctx, "other-lead", res.o.TurnID, "x")
		wantCode(t, err, fleetstate.CodeNotPermitted)

		final := async(func() (fleetstate.Outcome, error) { return f.r.Answer(ctx, "lead", res.o.TurnID, "release-2") })
		a := <-answered
		if a.err != nil || a.text != "release-2" || a.timedOut {
			t.Fatalf("Ask = %+v; want the answer release-2", a)
		}
		_, err = f.r.Answer(ctx, "lead", res.o.TurnID, "again")
		wantCode(t, err, fleetstate.CodeNoPendingQuestion)

		if err := f.r.Reply("scout", "built on release-2"); err != nil {
			t.Fatal(err)
		}
		out := <-final
		if out.err != nil {
			t.Fatal(out.err)
		}
		wantKind(t, out.o, fleetstate.OutcomeReply)
		if out.o.Content != "built on release-2" || out.o.TurnID != msg.TurnID {
			t.Errorf("outcome after answer = %+v", out.o)
		}
		_, err = f.r.Answer(ctx, "lead", res.o.TurnID, "late")
		wantCode(t, err, fleetstate.CodeUnknownTurn)

		// The message sent by name is delivered as a turn of its own.
		if m := f.next("scout"); m.Content != "release" {
			t.Errorf("next message = %+v; want release", m)
		}
	})
}

func testAskWindowReturnsDefault(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{AskTimeout: 55 * time.Second}, func(t *testing.T, f *fleet) {
		f.pull("scout")
		ctx := context.Background()
		sent := f.working("scout", "task")
		start := time.Now()
		text, timedOut, err := f.r.Ask(ctx, "scout", "tabs or spaces?", "spaces")
		if err != nil || text != "spaces" || !timedOut {
			t.Fatalf("Ask = %q, %v, %v; want the default after the window", text, timedOut, err)
		}
		if d := time.Since(start); d != 55*time.Second {
			t.Errorf("ask window = %v; want 55s", d)
		}
		o, err := f.r.Poll(ctx, "lead", sent.Ticket, 0)
		if err != nil {
			t.Fatal(err)
		}
		if o.Kind != fleetstate.OutcomePending || o.State != fleetstate.TicketWorking {
			t.Errorf("ticket after the window = %+v; want pending/working", o)
		}
		_, err = f.r.Answer(ctx, "lead", sent.TurnID, "tabs")
		wantCode(t, err, fleetstate.CodeNoPendingQuestion)
	})
}

func testDetachedTicketPollAck(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		ctx := context.Background()
		o := f.send("scout", "survey the repo")
		wantKind(t, o, fleetstate.OutcomePending)
		if o.Ticket == "" || o.State != fleetstate.TicketQueued {
			t.Fatalf("detached send = %+v; want a queued ticket", o)
		}
		if err := f.r.Ack("lead", o.Ticket); fleetstate.CodeOf(err) != fleetstate.CodeTicketOpen {
			t.Errorf("ack of an open ticket: %v; want %s", err, fleetstate.CodeTicketOpen)
		}

		// A poll that waits returns when the ticket changes.
		polled := async(func() (fleetstate.Outcome, error) { return f.r.Poll(ctx, "lead", o.Ticket, 30*time.Second) })
		f.next("scout")
		go func() { _, _, _ = f.r.Ask(ctx, "scout", "deep or shallow?", "shallow") }()
		synctest.Wait()
		p := <-polled
		if p.err != nil {
			t.Fatal(p.err)
		}
		if p.o.Kind != fleetstate.OutcomeQuestion || p.o.Content != "deep or shallow?" || p.o.State != fleetstate.TicketQuestion {
			t.Fatalf("poll = %+v; want the question held on the ticket", p.o)
		}
		answered := async(func() (fleetstate.Outcome, error) { return f.r.Answer(ctx, "lead", p.o.TurnID, "deep") })
		synctest.Wait()
		if err := f.r.Reply("scout", "3 packages"); err != nil {
			t.Fatal(err)
		}
		if a := <-answered; a.o.Kind != fleetstate.OutcomeReply {
			t.Fatalf("answer's outcome = %+v", a.o)
		}

		// The reply went to the answering call; a second detached turn
		// whose reply nobody waits for is held until acked.
		o2, _ := f.r.SendDetached("lead", "scout", "second")
		f.next("scout")
		if err := f.r.Reply("scout", "done twice"); err != nil {
			t.Fatal(err)
		}
		for range 3 { // never acked: stays pollable
			got, err := f.r.Poll(ctx, "lead", o2.Ticket, 0)
			if err != nil || got.Kind != fleetstate.OutcomeReply || got.Content != "done twice" || got.State != fleetstate.TicketDone {
				t.Fatalf("poll = %+v, %v; want the held reply", got, err)
			}
		}
		all, err := f.r.PollAll(ctx, "lead", 0)
		if err != nil || len(all) != 1 || all[0].Ticket != o2.Ticket {
			t.Fatalf("PollAll = %+v, %v; want the one held ticket", all, err)
		}
		if _, err := f.r.Poll(ctx, "intruder", o2.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Errorf("another lead polled the ticket: %v", err)
		}
		if err := f.r.Ack("lead", o2.Ticket); err != nil {
			t.Fatal(err)
		}
		_, err = f.r.Poll(ctx, "lead", o2.Ticket, 0)
		wantCode(t, err, fleetstate.CodeUnknownTicket)
		wantCode(t, f.r.Ack("lead", o2.Ticket), fleetstate.CodeUnknownTicket)
	})
}

func testPollAllWaitsForAnyChange(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("a")
		f.pull("b")
		ctx := context.Background()
		f.r.SendDetached("lead", "a", "one")
		tb, _ := f.r.SendDetached("lead", "b", "two")
		start := time.Now()
		got := make(chan []fleetstate.Outcome, 1)
		go func() {
			out, _ := f.r.PollAll(ctx, "lead", 50*time.Second)
			got <- out
		}()
		f.next("b")
		time.Sleep(10 * time.Second)
		f.r.Reply("b", "two done")
		out := <-got
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("PollAll returned after %v; want 10s, when b replied", d)
		}
		if len(out) != 2 || out[1].Ticket != tb.Ticket || out[1].Kind != fleetstate.OutcomeReply {
			t.Errorf("PollAll = %+v", out)
		}
		// With nothing changing, the wait is bounded.
		start = time.Now()
		f.r.Ack("lead", tb.Ticket)
		out, err := f.r.PollAll(ctx, "lead", 20*time.Second)
		if err != nil || len(out) != 1 || time.Since(start) != 20*time.Second {
			t.Errorf("idle PollAll = %+v, %v after %v; want one pending ticket after 20s", out, err, time.Since(start))
		}
	})
}

func testSendBoundReturnsPendingAndReplyLandsOnTicket(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("slow")
		ctx := context.Background()
		start := time.Now()
		sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "slow", "big job") })
		f.next("slow")
		res := <-sent
		if d := time.Since(start); d != fleetstate.DefaultSendTimeout {
			t.Errorf("send returned after %v; want %v", d, fleetstate.DefaultSendTimeout)
		}
		if res.err != nil || res.o.Kind != fleetstate.OutcomePending || res.o.State != fleetstate.TicketWorking || res.o.Ticket == "" {
			t.Fatalf("send = %+v, %v; want pending with a ticket", res.o, res.err)
		}
		if err := f.r.Reply("slow", "finally"); err != nil {
			t.Fatal(err)
		}
		got, err := f.r.Poll(ctx, "lead", res.o.Ticket, 0)
		if err != nil || got.Kind != fleetstate.OutcomeReply || got.Content != "finally" {
			t.Errorf("poll = %+v, %v; want the late reply", got, err)
		}
	})
}

func testCancelledSendLosesNothing(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		ctx, cancel := context.WithCancel(context.Background())
		sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "scout", "job") })
		f.next("scout")
		cancel()
		res := <-sent
		if !errors.Is(res.err, context.Canceled) || res.err != context.Canceled {
			t.Fatalf("err = %v; want context.Canceled unwrapped", res.err)
		}
		if res.o.Kind != fleetstate.OutcomePending || res.o.Ticket == "" {
			t.Fatalf("outcome = %+v; want pending with a ticket", res.o)
		}
		f.r.Reply("scout", "kept")
		got, err := f.r.Poll(context.Background(), "lead", res.o.Ticket, 0)
		if err != nil || got.Content != "kept" {
			t.Errorf("poll = %+v, %v; want the reply on the ticket", got, err)
		}
	})
}

// TestCancelVersusReply races the lead's cancellation against the member's
// reply: whichever wins, the reply reaches the lead exactly once, either as
// the send's result or on the ticket.
func testCancelVersusReply(t *testing.T, s suite) {
	for i := range 300 {
		f := s.newFleet(t, nil)
		f.pull("scout")
		ctx, cancel := context.WithCancel(context.Background())
		sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "scout", "job") })
		f.next("scout")
		go cancel()
		if err := f.r.Reply("scout", "the answer"); err != nil {
			t.Fatal(err)
		}
		res := <-sent
		all, err := f.r.PollAll(context.Background(), "lead", 0)
		if err != nil {
			t.Fatal(err)
		}
		// Whichever won, the reply is held on the ticket; only a send
		// that returned it to a caller still there lets the lead's next
		// call release it.
		if len(all) != 1 || all[0].Kind != fleetstate.OutcomeReply || all[0].Content != "the answer" || res.o.Ticket != all[0].Ticket {
			t.Fatalf("round %d: send = %+v, %v; tickets = %+v; want the reply held on the send's ticket", i, res.o, res.err, all)
		}
		if res.err != nil && res.err != context.Canceled {
			t.Fatalf("round %d: send error %v", i, res.err)
		}
		f.pull("other")
		f.send("other", "next")
		_, err = f.r.Poll(context.Background(), "lead", all[0].Ticket, 0)
		if released := fleetstate.CodeOf(err) == fleetstate.CodeUnknownTicket; released != (res.err == nil) {
			t.Fatalf("round %d: send error %v; after the lead's next call the ticket is released: %v (poll: %v)", i, res.err, released, err)
		}
		f.r.Close()
	}
}

func testCloseReleasesBlockedCalls(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.pull("idle")
		ctx := context.Background()
		sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "scout", "job") })
		f.next("scout")
		asked := make(chan error, 1)
		go func() {
			_, _, err := f.r.Ask(ctx, "scout", "?", "")
			asked <- err
		}()
		next := make(chan error, 1)
		go func() {
			_, _, err := f.r.Next(ctx, "idle", time.Minute)
			next <- err
		}()
		<-sent // the question
		synctest.Wait()
		f.r.Close()
		f.r.Close() // idempotent
		wantCode(t, <-asked, fleetstate.CodeClosed)
		wantCode(t, <-next, fleetstate.CodeClosed)
		_, err := f.r.Send(ctx, "lead", "scout", "after close")
		wantCode(t, err, fleetstate.CodeClosed)
	})
}

func testBadArguments(t *testing.T, s suite) {
	s.inFleet(t, &fleetstate.RendezvousOptions{}, func(t *testing.T, f *fleet) {
		f.pull("scout")
		ctx := context.Background()
		_, err := f.r.Send(ctx, "lead", "nobody", "x")
		wantCode(t, err, fleetstate.CodeUnknownMember)
		_, err = f.r.Send(ctx, "lead", "scout", "")
		wantCode(t, err, fleetstate.CodeInvalidArgument)
		_, err = f.r.Send(ctx, "le::ad", "scout", "x")
		wantCode(t, err, fleetstate.CodeInvalidAgentName)
		_, err = f.r.SendDetached("lead", "scout", strings.Repeat("x", fleetstate.DefaultMaxContentSize+1))
		wantCode(t, err, fleetstate.CodeContentTooLarge)
		wantCode(t, f.r.Reply("scout", "nothing open"), fleetstate.CodeNoOpenTurn)
		_, _, err = f.r.Ask(ctx, "scout", "?", "")
		wantCode(t, err, fleetstate.CodeNoOpenTurn)
		wantCode(t, f.r.AddMember("../x", nil), fleetstate.CodeInvalidAgentName)
		if all, _ := f.r.PollAll(ctx, "lead", 0); len(all) != 0 {
			t.Errorf("failed sends left tickets: %+v", all)
		}
	})
}

func testNextEndsOpenTurnAsTurnDone(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		ctx := context.Background()
		sent := async(func() (fleetstate.Outcome, error) { return f.r.Send(ctx, "lead", "scout", "one") })
		f.next("scout")
		if _, ok, _ := f.r.Next(ctx, "scout", 0); ok {
			t.Fatal("Next returned a message from an empty queue")
		}
		res := <-sent
		wantKind(t, res.o, fleetstate.OutcomeTurnDone)
	})
}

// A removed member's queued and open turns end at once with a named
// reason; it is no longer listed and takes no more sends.
func testRemoveMemberEndsItsTurns(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	open := f.working("scout", "first")
	queued := f.send("scout", "second")
	if err := f.r.RemoveMember("scout"); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []string{open.Ticket, queued.Ticket} {
		o, err := f.r.Poll(context.Background(), "lead", tk, 0)
		if err != nil {
			t.Fatal(err)
		}
		if o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonMemberRemoved {
			t.Fatalf("ticket %s = %+v; want failed, member_removed", tk, o)
		}
	}
	if got := f.r.Members(); len(got) != 0 {
		t.Fatalf("Members() = %+v; want none", got)
	}
	_, err := f.r.SendDetached("lead", "scout", "third")
	wantCode(t, err, fleetstate.CodeUnknownMember)
	wantCode(t, f.r.Reply("scout", "late"), fleetstate.CodeUnknownMember)
}

// openRendezvous opens a rendezvous in h, failing the test if it cannot.
func openRendezvous(t TB, h Home, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous) {
	t.Helper()
	st, r, err := h.Open(t, opts)
	if err != nil {
		t.Fatalf("opening a rendezvous: %v", err)
	}
	return st, r
}
