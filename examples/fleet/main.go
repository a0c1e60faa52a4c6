// Command fleet shows the fleetstate rendezvous at work: a lead delegates
// to three member agents that run as goroutines and pull their messages.
//
//   - scout replies at once: the lead's blocking send returns its reply;
//   - builder asks a question mid-turn: the lead answers it by turn ID and
//     gets the reply that follows;
//   - auditor works detached: the lead gets a ticket, goes on with the
//     other two, then waits for the ticket, reads the report the auditor
//     left in the store, and acks the ticket.
//
// Usage:
//
//	go run ./examples/fleet [-dir DIR]
//
// Without -dir it uses a fresh temporary directory and removes it after.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
)

func main() {
	dir := flag.String("dir", "", "state directory (default: a temporary one, removed at exit)")
	flag.Parse()
	if err := run(os.Stdout, *dir); err != nil {
		log.Fatal(err)
	}
}

const lead = "lead"

// transcript writes the lines of the lead and of the members, one whole
// line at a time.
type transcript struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *transcript) say(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%-9s %s\n", who+":", fmt.Sprintf(format, args...))
}

// work is what a member does with one message: its reply, or an error to
// end the turn without one.
type work func(ctx context.Context, msg fleetstate.Message) (string, error)

func run(w io.Writer, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "fleetstate-fleet-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	st, err := fleetstate.Open(nil, dir, &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		return err
	}
	sess, err := st.NewSession("fleet example")
	if err != nil {
		return err
	}
	// Bounds well under the defaults: every member here answers in
	// milliseconds, and a stuck example should fail fast.
	r, err := fleetstate.NewRendezvous(st, &fleetstate.RendezvousOptions{
		SendTimeout: 20 * time.Second,
		AskTimeout:  15 * time.Second,
		MaxWait:     20 * time.Second,
	})
	if err != nil {
		return err
	}
	tr := &transcript{w: w}
	tr.say("fleet", "session %q, state in %s", sess.Name, dir)

	// The members run until the rendezvous closes. Close releases their
	// Next calls with ErrClosed; cancel stops a member mid-work.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		r.Close()
		cancel()
		wg.Wait()
		tr.say("fleet", "closed; every member has stopped")
	}()
	members := []struct {
		name string
		work work
	}{
		{"scout", scout()},
		{"builder", builder(tr, r)},
		{"auditor", auditor(tr, st)},
	}
	for _, m := range members {
		if err := r.AddMember(m.name, nil); err != nil {
			return err
		}
		// A pulling member is ready once its connection is up; here, at once.
		if err := r.SetReady(m.name, true); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(ctx, r, tr, m.name, m.work)
		}()
	}

	// 1. Detached: a ticket at once; the auditor works while the lead goes on.
	sent, err := r.SendDetached(lead, "auditor", "audit the error codes and write a report")
	if err != nil {
		return err
	}
	tr.say(lead, "detached to auditor: %s, state %s", sent.Kind, sent.State)

	// 2. Blocking: the send is held open until scout replies.
	tr.say(lead, "send to scout, blocking")
	o, err := r.Send(ctx, lead, "scout", "count the Go files in the repository")
	if err != nil {
		return err
	}
	if o.Kind != fleetstate.OutcomeReply {
		return fmt.Errorf("scout: got %s; want a reply", o.Kind)
	}
	tr.say(lead, "scout replied: %s", o.Content)

	// 3. Clarification: the send returns builder's question; the answer
	// goes to that turn, by its ID, and waits for the turn's next outcome.
	tr.say(lead, "send to builder, blocking")
	o, err = r.Send(ctx, lead, "builder", "tag the release")
	if err != nil {
		return err
	}
	if o.Kind != fleetstate.OutcomeQuestion {
		return fmt.Errorf("builder: got %s; want a question", o.Kind)
	}
	tr.say(lead, "builder asks: %s", o.Content)
	tr.say(lead, "answer builder's turn: v1.4.0")
	o, err = r.Answer(ctx, lead, o.TurnID, "v1.4.0")
	if err != nil {
		return err
	}
	if o.Kind != fleetstate.OutcomeReply {
		return fmt.Errorf("builder after the answer: got %s; want a reply", o.Kind)
	}
	tr.say(lead, "builder replied: %s", o.Content)

	// Back to the detached ticket: wait for it to hold an outcome.
	tr.say(lead, "waiting for the auditor's ticket")
	report, err := collect(ctx, r, sent.Ticket)
	if err != nil {
		return err
	}
	if report.Kind != fleetstate.OutcomeReply {
		return fmt.Errorf("auditor: got %s; want a reply", report.Kind)
	}
	tr.say(lead, "auditor's ticket is %s: %s", report.State, report.Content)
	id, err := fleetstate.ParseFileID(report.Content)
	if err != nil {
		return err
	}
	data, err := st.Get(id)
	if err != nil {
		return err
	}
	tr.say(lead, "read %s/%s: %q", id.Agent(), id.Name(), data)
	if err := r.Ack(lead, sent.Ticket); err != nil {
		return err
	}
	left, err := r.PollAll(ctx, lead, 0)
	if err != nil {
		return err
	}
	tr.say(lead, "acked the ticket; %d tickets left", len(left))
	return nil
}

// serve is a member's loop: take the next message, do the work, reply.
func serve(ctx context.Context, r *fleetstate.Rendezvous, tr *transcript, name string, do work) {
	for {
		msg, ok, err := r.Next(ctx, name, 10*time.Second)
		if err != nil {
			return // the rendezvous closed, or ctx ended
		}
		if !ok {
			continue
		}
		tr.say(name, "got %q from %s", msg.Content, msg.From)
		reply, err := do(ctx, msg)
		if err != nil {
			// The next Next ends the turn as turn_done.
			tr.say(name, "no reply: %v", err)
			continue
		}
		tr.say(name, "reply: %s", reply)
		if err := r.Reply(name, reply); err != nil {
			tr.say(name, "reply failed: %v", err)
		}
	}
}

// scout knows the answer at once.
func scout() work {
	return func(context.Context, fleetstate.Message) (string, error) {
		return "12 Go files", nil
	}
}

// builder cannot tag without a version, so it asks; its default is what
// it uses if the lead does not answer within the ask window.
func builder(tr *transcript, r *fleetstate.Rendezvous) work {
	return func(ctx context.Context, msg fleetstate.Message) (string, error) {
		tr.say("builder", "asks: which version?")
		version, timedOut, err := r.Ask(ctx, "builder", "which version?", "v0.0.0-dev")
		if err != nil {
			return "", err
		}
		if timedOut {
			tr.say("builder", "no answer in time; using %s", version)
		} else {
			tr.say("builder", "answer: %s", version)
		}
		return "tagged " + version, nil
	}
}

// auditor takes a while, writes its report to the store and replies with
// the report's file ID.
func auditor(tr *transcript, st *fleetstate.Store) work {
	return func(ctx context.Context, msg fleetstate.Message) (string, error) {
		select {
		case <-time.After(50 * time.Millisecond): // auditing
		case <-ctx.Done():
			return "", ctx.Err()
		}
		id, err := st.Put("auditor", "reports/error-codes.md", []byte("every code is documented\n"), true)
		if err != nil {
			return "", err
		}
		tr.say("auditor", "wrote %s/%s", id.Agent(), id.Name())
		return id.String(), nil
	}
}

// collect waits until the ticket holds an outcome, polling with a wait so
// that the call returns as soon as one of the lead's tickets changes.
func collect(ctx context.Context, r *fleetstate.Rendezvous, ticket string) (fleetstate.Outcome, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		all, err := r.PollAll(ctx, lead, 20*time.Second)
		if err != nil {
			return fleetstate.Outcome{}, err
		}
		for _, o := range all {
			if o.Ticket == ticket && o.Kind != fleetstate.OutcomePending {
				return o, nil
			}
		}
	}
	return fleetstate.Outcome{}, errors.New("the auditor's ticket did not finish in time")
}
