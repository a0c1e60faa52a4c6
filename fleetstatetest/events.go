package fleetstatetest

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
)

// drain returns the events waiting on s now.
func drain(s *fleetstate.Subscription) []fleetstate.Event {
	var out []fleetstate.Event
	for {
		select {
		case e, ok := <-s.Events():
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

func kinds(es []fleetstate.Event) string {
	s := ""
	for _, e := range es {
		s += string(e.Kind) + " "
	}
	return s
}

// Every step of a delegation with a clarification is published, in order,
// with the turn, the ticket and the contents.
func testEventsOfAFlow(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		sub, snap := f.r.Subscribe(0)
		defer sub.Close()
		if len(snap.Members) != 0 || len(snap.Tickets) != 0 {
			t.Fatalf("snapshot of an empty fleet = %+v", snap)
		}
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "count the files")
		})
		msg := f.next("scout")
		asked := make(chan string, 1)
		go func() {
			a, _, _ := f.r.Ask(context.Background(), "scout", "which folder?", "all")
			asked <- a
		}()
		q := <-sent
		answered := async(func() (fleetstate.Outcome, error) {
			return f.r.Answer(context.Background(), "lead", q.o.TurnID, "src")
		})
		<-asked
		f.r.Reply("scout", "12 files")
		res := <-answered
		f.r.Ack("lead", res.o.Ticket)
		es := drain(sub)
		want := "member_added ready queued delivered asked answered outcome acked "
		if got := kinds(es); got != want {
			t.Fatalf("events %q; want %q", got, want)
		}
		for i, e := range es {
			if e.Seq != es[0].Seq+uint64(i) || e.Time.IsZero() || e.Gap != 0 {
				t.Errorf("event %d: seq %d, time %v, gap %d", i, e.Seq, e.Time, e.Gap)
			}
		}
		byKind := map[fleetstate.EventKind]fleetstate.Event{}
		for _, e := range es {
			byKind[e.Kind] = e
		}
		if e := byKind[fleetstate.EventQueued]; e.Content != "count the files" || e.Lead != "lead" || e.Member != "scout" || e.TurnID != msg.TurnID {
			t.Errorf("queued = %+v", e)
		}
		if e := byKind[fleetstate.EventAsked]; e.Content != "which folder?" {
			t.Errorf("asked = %+v", e)
		}
		if e := byKind[fleetstate.EventAnswered]; e.Content != "src" {
			t.Errorf("answered = %+v", e)
		}
		if e := byKind[fleetstate.EventOutcome]; e.Outcome == nil || e.Outcome.Content != "12 files" || e.Held {
			t.Errorf("outcome = %+v; want the reply, handed to the waiting call", e)
		}
	})
}

// A detached ticket's end is published as held; a cancel, a member's
// status and its removal are published too.
func testEventsOfTicketsAndMembers(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("worker")
		f.pull("scout")
		synctest.Wait() // the worker's first status read is before the subscription
		sub, snap := f.r.Subscribe(0)
		defer sub.Close()
		if len(snap.Members) != 2 {
			t.Fatalf("snapshot members = %+v", snap.Members)
		}
		o, _ := f.r.SendDetached("lead", "worker", "task")
		recv(lm)
		lm.SetStatus(fleetstate.StatusWorking)
		synctest.Wait()
		snap = f.r.Snapshot()
		if len(snap.Tickets) != 1 || snap.Tickets[0].Brief != "task" || snap.Tickets[0].Lead != "lead" {
			t.Fatalf("snapshot tickets = %+v", snap.Tickets)
		}
		for _, m := range snap.Members {
			if m.Name == "worker" && (m.OpenTurn != o.TurnID || m.OpenSince.IsZero() || m.Status != "WORKING") {
				t.Fatalf("snapshot of the working member = %+v", m)
			}
		}
		f.r.Cancel("lead", o.Ticket)
		f.r.RemoveMember("scout")
		got := kinds(drain(sub))
		want := "queued delivered status cancelled outcome member_removed "
		if got != want {
			t.Fatalf("events %q; want %q", got, want)
		}
	})
}

// A subscriber that does not read loses events, counted on the next one it
// gets, and never holds up the rendezvous.
func testSlowSubscriberGetsAGap(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	f.pull("scout")
	sub, _ := f.r.Subscribe(2)
	defer sub.Close()
	for i := range 10 {
		f.send("scout", fmt.Sprint("job ", i))
	}
	es := drain(sub)
	if len(es) != 2 {
		t.Fatalf("%d events buffered; want 2", len(es))
	}
	f.r.SendDetached("lead", "scout", "one more")
	e := <-sub.Events()
	if e.Gap != 8 {
		t.Fatalf("gap %d; want 8 events missed", e.Gap)
	}
	if e.Seq != es[1].Seq+9 {
		t.Fatalf("seq %d after %d; want the gap in the sequence too", e.Seq, es[1].Seq)
	}
}

// Closing the rendezvous closes every subscription; a subscription taken
// after is closed at once.
func testSubscriptionsEndWithTheRendezvous(t *testing.T, s suite) {
	f := s.newFleet(t, nil)
	sub, _ := f.r.Subscribe(0)
	f.r.Close()
	select {
	case _, ok := <-sub.Events():
		if ok {
			t.Fatal("an event after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription stayed open after Close")
	}
	late, _ := f.r.Subscribe(0)
	if _, ok := <-late.Events(); ok {
		t.Fatal("a subscription taken after Close is open")
	}
	sub.Close() // idempotent
	late.Close()
}
