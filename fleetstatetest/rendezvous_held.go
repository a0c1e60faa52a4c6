package fleetstatetest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
)

// Outcomes held for a re-poll (RendezvousOptions.HoldReturned) and the
// held log: see the header of rendezvous_journal.go.

// heldRoundTrip is a blocking round trip from lead to member, a pulling
// member: its reply, returned by Send, is then held on the ticket.
func heldRoundTrip(t *testing.T, rv *fleetstate.Rendezvous, member, brief string) fleetstate.Outcome {
	t.Helper()
	sent := async(func() (fleetstate.Outcome, error) {
		return rv.Send(context.Background(), "lead", member, brief)
	})
	msg, ok, err := rv.Next(context.Background(), member, time.Minute)
	if err != nil || !ok || msg.Content != brief {
		t.Fatalf("Next(%s) = %+v, %v, %v; want %q", member, msg, ok, err, brief)
	}
	if err := rv.Reply(member, "re: "+brief); err != nil {
		t.Fatalf("Reply: %v", err)
	}
	res := <-sent
	if res.err != nil || res.o.Kind != fleetstate.OutcomeReply || res.o.Content != "re: "+brief {
		t.Fatalf("Send(%s) = %+v, %v; want the reply", brief, res.o, res.err)
	}
	return res.o
}

// wantHeld fails unless the ticket of o holds its reply for lead.
func wantHeld(t *testing.T, rv *fleetstate.Rendezvous, o fleetstate.Outcome, why string) {
	t.Helper()
	p, err := rv.Poll(context.Background(), "lead", o.Ticket, 0)
	if err != nil || p.State != fleetstate.TicketDone || p.Content != o.Content || p.TurnID != o.TurnID {
		t.Fatalf("%s: Poll = %+v, %v; want the held reply %q", why, p, err, o.Content)
	}
}

// wantGone fails unless the ticket of o is unknown.
func wantGone(t *testing.T, rv *fleetstate.Rendezvous, o fleetstate.Outcome, why string) {
	t.Helper()
	if p, err := rv.Poll(context.Background(), "lead", o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("%s: Poll = %+v, %v; want %s", why, p, err, fleetstate.CodeUnknownTicket)
	}
}

// TestHeldAcrossRestarts: an outcome held for a re-poll survives a crash
// held as before, returned, until its hold's end (not until acked, which a
// lead without a session never does: such outcomes would pile up restart
// after restart); one whose hold ended, or that was acked, never comes
// back, also when acked after a restart; the slot it left reused by the
// next turn restores that turn too; and one whose hold ended while no
// rendezvous ran is held for the rejoin window after the restart, the
// time its lead has to reconnect, and then forgotten.
func testHeldAcrossRestarts(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		const hold = time.Minute
		opts := &fleetstate.RendezvousOptions{HoldReturned: hold}
		f := s.newFleet(t, opts)
		f.pull("scout")
		a := heldRoundTrip(t, f.r, "scout", "a")
		settle(hold / 2)
		b := heldRoundTrip(t, f.r, "scout", "b") // in the slot a left
		f.restart(opts, "scout")
		wantHeld(t, f.r, a, "a after a restart")
		wantHeld(t, f.r, b, "b after a restart")
		if p, _ := f.r.Poll(context.Background(), "lead", a.Ticket, 0); !p.Returned {
			t.Errorf("a after a restart = %+v; want it returned, as before the restart", p)
		}
		settle(hold/2 + time.Second) // a's hold ends, b's does not
		wantGone(t, f.r, a, "a past its hold after a restart")
		wantHeld(t, f.r, b, "b within its hold after a restart")

		if err := f.r.Ack("lead", b.Ticket); err != nil {
			t.Fatal(err)
		}
		if err := f.r.SetReady("scout", true); err != nil {
			t.Fatal(err)
		}
		c := heldRoundTrip(t, f.r, "scout", "c")
		settle(hold) // c's hold ends
		wantGone(t, f.r, c, "c past its hold")
		d := heldRoundTrip(t, f.r, "scout", "d")
		f.restart(opts, "scout")
		wantGone(t, f.r, a, "a past its hold, after another restart")
		wantGone(t, f.r, b, "b acked, after a restart")
		wantGone(t, f.r, c, "c past its hold, after a restart")
		wantHeld(t, f.r, d, "d after a restart")
		f.restart(opts, "scout")
		wantHeld(t, f.r, d, "d after two restarts")

		// Acked while its slot, in the pool, still ends with its record.
		e := heldRoundTrip(t, f.r, "scout", "e")
		if err := f.r.Ack("lead", e.Ticket); err != nil {
			t.Fatal(err)
		}
		f.restart(opts, "scout")
		wantGone(t, f.r, e, "e acked, after a restart")
		wantHeld(t, f.r, d, "d after three restarts")

		// Down for longer than the hold: what was held is there for the
		// rejoin window after the restart, then gone, and stays gone.
		if err := f.r.SetReady("scout", true); err != nil {
			t.Fatal(err)
		}
		g := heldRoundTrip(t, f.r, "scout", "g")
		f.h.Crash(t, f.r)
		settle(2 * hold)
		f.st, f.r = openRendezvous(t, f.h, opts)
		wantHeld(t, f.r, g, "g after a restart that came after its hold's end")
		settle(fleetstate.DefaultRejoinTimeout - time.Second)
		wantHeld(t, f.r, g, "g within the rejoin window")
		settle(2 * time.Second)
		wantGone(t, f.r, g, "g past the rejoin window")
		wantGone(t, f.r, d, "d past its hold")
		f.restart(opts)
		wantGone(t, f.r, g, "g past the rejoin window, after a restart")
		wantGone(t, f.r, d, "d past its hold, after a restart")
	})
}

// TestGivenUpCallerOutcomeOutlivesHold: with HoldReturned, a reply handed
// to a blocked call whose caller had given up meanwhile (it is not
// returned, see TestGivenUpCallerLeavesOutcomeOnTicket) is held until
// acked, also across a restart long after the hold would have ended: it
// was never returned, so no hold's end applies to it.
func testGivenUpCallerOutcomeOutlivesHold(t *testing.T, s suite) {
	const hold = time.Minute
	for i := range 20 {
		synctest.Test(t, func(t *testing.T) {
			opts := &fleetstate.RendezvousOptions{HoldReturned: hold}
			f := s.newFleet(t, opts)
			f.pull("scout")
			if res := givenUpSend(t, f); res.err != context.Canceled {
				t.Fatalf("round %d: send = %+v, %v; want context.Canceled", i, res.o, res.err)
			}
			synctest.Wait()
			f.restart(opts, "scout")
			settle(2*hold + fleetstate.DefaultRejoinTimeout)
			f.restart(opts, "scout")
			all, err := f.r.PollAll(context.Background(), "lead", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 1 || all[0].Content != "the answer" || all[0].Returned {
				t.Fatalf("round %d: tickets after restarts past the hold %+v; want the reply held, not returned", i, all)
			}
			f.r.Close()
		})
	}
}
