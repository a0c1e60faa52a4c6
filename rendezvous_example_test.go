package fleetstate_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// rvExampleFleet returns a rendezvous on an in-memory store with the
// named members registered as ready pulling members.
func rvExampleFleet(members ...string) *fleetstate.Rendezvous {
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		log.Fatal(err)
	}
	r, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range members {
		if err := r.AddMember(name, nil); err != nil {
			log.Fatal(err)
		}
		if err := r.SetReady(name, true); err != nil {
			log.Fatal(err)
		}
	}
	return r
}

// The blocking flow: the lead's Send is held open until the member
// replies. The member is a goroutine that pulls its message with Next.
func ExampleRendezvous_Send() {
	r := rvExampleFleet("scout")
	defer r.Close()
	ctx := context.Background()

	done := make(chan struct{})
	go func() { // the member
		defer close(done)
		msg, ok, err := r.Next(ctx, "scout", time.Minute)
		if err != nil || !ok {
			return
		}
		fmt.Printf("scout got %q from %s\n", msg.Content, msg.From)
		if err := r.Reply("scout", "3 TODOs in session.go"); err != nil {
			log.Print(err)
		}
	}()

	o, err := r.Send(ctx, "lead", "scout", "count the TODOs in session.go")
	if err != nil {
		log.Fatal(err)
	}
	<-done
	fmt.Printf("%s from %s: %s\n", o.Kind, o.From, o.Content)
	fmt.Println("held on a ticket until the lead's next call:", o.Ticket != "")
	// Output:
	// scout got "count the TODOs in session.go" from lead
	// reply from scout: 3 TODOs in session.go
	// held on a ticket until the lead's next call: true
}

// The clarification flow: the member asks mid-turn, the lead's Send
// returns the question with its turn ID, and the lead answers that turn.
// The member's Ask returns the answer, its turn goes on, and the lead's
// Answer returns the turn's next outcome.
func ExampleRendezvous_Answer() {
	r := rvExampleFleet("builder")
	defer r.Close()
	ctx := context.Background()

	done := make(chan struct{})
	go func() { // the member
		defer close(done)
		if _, ok, err := r.Next(ctx, "builder", time.Minute); err != nil || !ok {
			return
		}
		// A question always carries a default, used if no answer comes
		// within the ask window.
		version, timedOut, err := r.Ask(ctx, "builder", "which version?", "v0.0.1")
		if err != nil || timedOut {
			return
		}
		if err := r.Reply("builder", "tagged "+version); err != nil {
			log.Print(err)
		}
	}()

	o, err := r.Send(ctx, "lead", "builder", "tag the release")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s\n", o.Kind, o.Content)

	// Answer by turn ID: a Send to "builder" would open a new turn instead.
	turn := o.TurnID
	o, err = r.Answer(ctx, "lead", turn, "v1.4.0")
	if err != nil {
		log.Fatal(err)
	}
	<-done
	fmt.Printf("%s: %s\n", o.Kind, o.Content)

	// The turn is over: it cannot be answered again.
	_, err = r.Answer(ctx, "lead", turn, "v1.4.1")
	fmt.Println(fleetstate.CodeOf(err))
	// Output:
	// question: which version?
	// reply: tagged v1.4.0
	// ERR_UNKNOWN_TURN
}

// The detached flow: the lead gets a ticket at once and goes on with its
// own work; the member's reply is held on the ticket until the lead acks
// it.
func ExampleRendezvous_SendDetached() {
	r := rvExampleFleet("auditor")
	defer r.Close()
	ctx := context.Background()

	o, err := r.SendDetached("lead", "auditor", "audit the error codes")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.Kind, o.State)
	ticket := o.Ticket

	done := make(chan struct{})
	go func() { // the member
		defer close(done)
		if _, ok, err := r.Next(ctx, "auditor", time.Minute); err != nil || !ok {
			return
		}
		if err := r.Reply("auditor", "every code is documented"); err != nil {
			log.Print(err)
		}
	}()

	// Poll with a wait returns as soon as the ticket holds an outcome.
	o, err = r.Poll(ctx, "lead", ticket, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	<-done
	fmt.Printf("%s (%s): %s\n", o.Kind, o.State, o.Content)

	// The outcome stays on the ticket until it is acked.
	again, _ := r.Poll(ctx, "lead", ticket, 0)
	fmt.Println("still held:", again.Content == o.Content)
	if err := r.Ack("lead", ticket); err != nil {
		log.Fatal(err)
	}
	_, err = r.Poll(ctx, "lead", ticket, 0)
	fmt.Println(fleetstate.CodeOf(err))
	// Output:
	// pending queued
	// reply (done): every code is documented
	// still held: true
	// ERR_UNKNOWN_TICKET
}

// A member's agent asks whether it may run a command; the operator, who
// watches the fleet's events, allows it. A rule of a PermissionPolicy
// would have decided without asking.
func ExampleRendezvous_RequestPermission() {
	r := rvExampleFleet("scout")
	defer r.Close()
	sub, _ := r.Subscribe(0)
	defer sub.Close()

	go func() { // the operator's view
		for e := range sub.Events() {
			if e.Kind == fleetstate.EventPermissionRequested {
				fmt.Printf("%s asks to use %s: %s\n", e.Member, e.Permission.Tool, e.Permission.Input)
				if err := r.DecidePermission("operator", e.Permission.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow}); err != nil {
					log.Print(err)
				}
				return
			}
		}
	}()

	d, decided, err := r.RequestPermission(context.Background(), "scout", fleetstate.PermissionRequest{
		Tool: "Bash", Input: `{"command":"go test ./..."}`, Timeout: time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(decided, d.Behavior, "by", d.By)
	// Output:
	// scout asks to use Bash: {"command":"go test ./..."}
	// true allow by operator
}
