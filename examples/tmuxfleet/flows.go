package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
)

// runAll runs every flow of the rendezvous once, in the order of the
// protocol's description, and fails on the first that does not behave.
func (f *fleet) runAll(ctx context.Context) error {
	steps := []struct {
		title string
		run   func(context.Context) error
	}{
		{"§1.1 delegation", f.delegation},
		{"§1.2 clarification by turn id", f.clarification},
		{"§1.3 detached, with a nudge to the lead's pane", f.detached},
		{"§1.4 turn done without a reply", f.turnDone},
		{"§2 status gating: busy member", f.busyMember},
		{"§2 status gating: member never mounted", f.neverMounted},
		{"§2 status gating: UNKNOWN status", f.unknownStatus},
		{"multi-line and large messages", f.largeMessages},
		{"a draft left in the input line", f.draftCleared},
		{"a pane that dies mid-turn", f.paneDies},
	}
	for _, s := range steps {
		fmt.Fprintf(f.w, "\n== %s\n", s.title)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.title, err)
		}
	}
	fmt.Fprintln(f.w, "\nevery flow behaved")
	return nil
}

func want(cond bool, format string, args ...any) error {
	if cond {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

func (f *fleet) delegation(ctx context.Context) error {
	brief := "summarise the repository layout"
	f.say("lead", "fleet_send to alice: %q (blocks)", brief)
	o, err := f.lead.Send(ctx, "alice", brief)
	if err != nil {
		return err
	}
	f.say("lead", "%s from %s: %q", show(o), o.From, o.Content)
	return want(o.Kind == fleetstate.OutcomeReply && strings.Contains(o.Content, digest(brief)), "got %+v", o)
}

func (f *fleet) clarification(ctx context.Context) error {
	f.say("lead", "fleet_send to bob: %q", "[ask] build the release")
	o, err := f.lead.Send(ctx, "bob", "[ask] build the release")
	if err != nil {
		return err
	}
	f.say("lead", "%s from %s: %q, turn %s", show(o), o.From, o.Content, o.TurnID)
	if err := want(o.Kind == fleetstate.OutcomeQuestion && o.TurnID != "", "got %+v; want a question", o); err != nil {
		return err
	}
	f.say("lead", "answers by turn id: %q", "release-2")
	o, err = f.lead.Answer(ctx, o.TurnID, "release-2")
	if err != nil {
		return err
	}
	f.say("lead", "%s from %s: %q", show(o), o.From, o.Content)
	return want(o.Kind == fleetstate.OutcomeReply && o.Content == "built on release-2", "got %+v", o)
}

func (f *fleet) detached(ctx context.Context) error {
	brief := "audit the test suite"
	o, err := f.lead.SendDetached(ctx, "carol", brief)
	if err != nil {
		return err
	}
	f.say("lead", "fleet_send to carol (screen-pattern status), wait:false: %s, ticket %s", show(o), o.Ticket)
	ticket := o.Ticket
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(f.pane(ctx, "lead"), ticket) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the lead's pane was never nudged:\n%s", f.pane(ctx, "lead"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.say("lead", "its pane was nudged: %q", nudgeLine(f.pane(ctx, "lead"), ticket))
	if o, err = f.lead.Poll(ctx, ticket, 0); err != nil {
		return err
	}
	f.say("lead", "fleet_poll: %s: %q", show(o), o.Content)
	if err := want(o.Kind == fleetstate.OutcomeReply && strings.Contains(o.Content, digest(brief)), "got %+v", o); err != nil {
		return err
	}
	if err := f.lead.Ack(ctx, ticket); err != nil {
		return err
	}
	f.say("lead", "fleet_ack: the ticket is gone")
	return nil
}

func nudgeLine(pane, ticket string) string {
	for _, l := range strings.Split(pane, "\n") {
		if strings.Contains(l, ticket) {
			return short(strings.TrimSpace(l), 90)
		}
	}
	return ""
}

func (f *fleet) turnDone(ctx context.Context) error {
	cases := []struct {
		brief string
		check func(fleetstate.Outcome) bool
	}{
		{"[exhaust] refactor the parser", func(o fleetstate.Outcome) bool {
			return o.Kind == fleetstate.OutcomeFailed && o.Reason == "backend_exhausted"
		}},
		{"[echo] audit the authentication module for token handling bugs and write the findings down", func(o fleetstate.Outcome) bool {
			return o.Kind == fleetstate.OutcomeFailed && o.Reason == "echoed_brief" && !strings.Contains(o.Content, "authentication module")
		}},
		{"[long] write the full report", func(o fleetstate.Outcome) bool {
			return o.Kind == fleetstate.OutcomeTurnDone && o.Partial && strings.Contains(o.Content, "report line 400")
		}},
		{"[slow] migrate the database", func(o fleetstate.Outcome) bool {
			return o.Kind == fleetstate.OutcomeTurnDone && !o.Partial && strings.Contains(o.Content, "finished the slow work")
		}},
	}
	for _, c := range cases {
		f.say("lead", "fleet_send to alice: %q", c.brief)
		o, err := f.lead.Send(ctx, "alice", c.brief)
		if err != nil {
			return err
		}
		f.say("lead", "%s: %q", show(o), short(o.Content, 70))
		if !c.check(o) {
			return fmt.Errorf("%q: got %+v", c.brief, o)
		}
	}
	return nil
}

func (f *fleet) busyMember(ctx context.Context) error {
	first, err := f.lead.SendDetached(ctx, "bob", "[slow] first job")
	if err != nil {
		return err
	}
	f.say("lead", "fleet_send to bob, detached: %q → %s", "[slow] first job", show(first))
	second, err := f.lead.Send(ctx, "bob", "second job")
	if err != nil {
		return err
	}
	f.say("lead", "fleet_send to busy bob: %q → %s at once", "second job", show(second))
	if err := want(second.Kind == fleetstate.OutcomePending && second.State == "queued", "second send got %+v; want pending/queued", second); err != nil {
		return err
	}
	var o fleetstate.Outcome
	for o.Kind != fleetstate.OutcomeReply {
		if o, err = f.lead.Poll(ctx, second.Ticket, 20*time.Second); err != nil {
			return err
		}
		f.say("lead", "fleet_poll second: %s", show(o))
	}
	if err := want(strings.Contains(o.Content, digest("second job")), "second job reply %+v", o); err != nil {
		return err
	}
	p, err := f.lead.Poll(ctx, first.Ticket, 0)
	if err != nil {
		return err
	}
	f.say("lead", "first job: %s: %q", show(p), short(p.Content, 60))
	_ = f.lead.Ack(ctx, first.Ticket)
	_ = f.lead.Ack(ctx, second.Ticket)
	return want(p.Kind == fleetstate.OutcomeTurnDone, "first job %+v", p)
}

func (f *fleet) neverMounted(ctx context.Context) error {
	f.say("lead", "fleet_send to ghost (in the roster, never started)")
	o, err := f.lead.Send(ctx, "ghost", "hello?")
	if err != nil {
		return err
	}
	f.say("lead", "%s", show(o))
	return want(o.Kind == fleetstate.OutcomeFailed && o.Reason == "member_not_ready", "got %+v", o)
}

func (f *fleet) unknownStatus(ctx context.Context) error {
	o, err := f.lead.SendDetached(ctx, "mute", "are you there")
	if err != nil {
		return err
	}
	f.say("lead", "fleet_send to mute (no hooks, no patterns: UNKNOWN), detached: %s", show(o))
	time.Sleep(3 * time.Second)
	p, err := f.lead.Poll(ctx, o.Ticket, 0)
	if err != nil {
		return err
	}
	f.say("lead", "3 s later: %s; mute's pane got nothing", show(p))
	if strings.Contains(f.pane(ctx, "mute"), "are you there") {
		return fmt.Errorf("a message was written to an UNKNOWN pane")
	}
	return want(p.State == "queued", "got %+v; want still queued", p)
}

func (f *fleet) largeMessages(ctx context.Context) error {
	multi := "line one\nline two\n\nline four, after a blank line"
	var b strings.Builder
	for i := 0; b.Len() < 60_000; i++ {
		fmt.Fprintf(&b, "row %05d: %s\n", i, strings.Repeat("x", 60))
	}
	large := b.String() + "the end"
	// A message submitted twice would be counted twice by the agent: the
	// numbers of the replies to consecutive messages must be consecutive.
	last := -1
	for _, msg := range []string{multi, large, "a short one after"} {
		o, err := f.lead.Send(ctx, "alice", msg)
		if err != nil {
			return err
		}
		f.say("lead", "sent %d bytes in %d lines: %q", len(msg), strings.Count(msg, "\n")+1, o.Content)
		wantReply := fmt.Sprintf("received %d bytes in %d lines, sha256 %s (message #", len(msg), strings.Count(msg, "\n")+1, digest(msg))
		if err := want(o.Kind == fleetstate.OutcomeReply && strings.Contains(o.Content, wantReply), "got %+v; want %q", o, wantReply); err != nil {
			return err
		}
		var n int
		if _, err := fmt.Sscanf(o.Content[strings.LastIndex(o.Content, "#"):], "#%d)", &n); err != nil {
			return fmt.Errorf("no message number in %q", o.Content)
		}
		if last >= 0 && n != last+1 {
			return fmt.Errorf("the reply is to message #%d after #%d: a message was submitted more than once", n, last)
		}
		last = n
	}
	return nil
}

func (f *fleet) paneDies(ctx context.Context) error {
	f.say("lead", "fleet_send to dora: %q", "[die] work on this")
	o, err := f.lead.Send(ctx, "dora", "[die] work on this")
	if err != nil {
		return err
	}
	f.say("lead", "%s: %q", show(o), short(o.Content, 70))
	return want(o.Kind == fleetstate.OutcomeFailed && o.Reason == "member_gone", "got %+v", o)
}

func (f *fleet) draftCleared(ctx context.Context) error {
	if _, err := f.tm.Run(ctx, "", "send-keys", "-t", "fleet:alice", "-l", "half-typed draft"); err != nil {
		return err
	}
	f.say("lead", "alice's input line holds a draft: %q", "half-typed draft")
	msg := "the real message"
	o, err := f.lead.Send(ctx, "alice", msg)
	if err != nil {
		return err
	}
	f.say("lead", "%s: %q", show(o), o.Content)
	return want(o.Kind == fleetstate.OutcomeReply && strings.Contains(o.Content, digest(msg)), "got %+v; want the message without the draft", o)
}
