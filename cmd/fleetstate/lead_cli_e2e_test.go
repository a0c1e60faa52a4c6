package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The lead commands (send, poll, ack, answer, cancel, members) end to end:
// a real `fleetstate serve` on 127.0.0.1, the real binary for each
// command, and members played by mcpadapter clients with their tokens.

// cliFleet is a daemon on a state directory with the members m1 and m2
// and the lead "lead", and the operator's own MCP connection, to check
// from the lead's side what a command did.
type cliFleet struct {
	dir    string
	d      *daemonProc
	tokens map[string]string
	op     *mcpadapter.Client // the operator, as the daemon knows it
}

func newCLIFleet(t *testing.T, serveArgs ...string) *cliFleet {
	t.Helper()
	f := &cliFleet{dir: t.TempDir()}
	f.tokens = addTokens(t, f.dir, map[string]string{"lead": "lead", "m1": "member", "m2": "member"})
	f.d = startDaemon(t, f.dir, serveArgs...)
	f.op = dialOperator(t, f.dir, f.d.url)
	return f
}

// dialOperator connects to the daemon at url, serving the state
// directory dir, with its operator token.
func dialOperator(t *testing.T, dir, url string) *mcpadapter.Client {
	t.Helper()
	store, err := fleetstate.Open(nil, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := auth.OperatorToken(store)
	if err != nil {
		t.Fatal(err)
	}
	return dialAs(t, url, token)
}

// dialAs connects to the daemon's MCP endpoint with token.
func dialAs(t *testing.T, url, token string) *mcpadapter.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := mcpadapter.Dial(ctx, url, token, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cliResult is what one run of the binary printed, and how it exited.
type cliResult struct {
	stdout, stderr string
	code           int
}

// leadCLI runs the binary with args and env (beside an environment
// without any FLEET_ variable), bounded by a minute.
func leadCLI(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLEET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("fleetstate %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs the command as the operator and fails the test unless it exits 0.
func (f *cliFleet) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := leadCLI(t, nil, "", append(args, "--dir", f.dir)...)
	if r.code != 0 {
		t.Fatalf("fleetstate %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// jsonDoc decodes out, which must be exactly one JSON document, into v.
func jsonDoc(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not a JSON document: %v\n%s", err, out)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON document:\n%s", out)
	}
}

// gone checks from the operator's side that ticket was acknowledged.
func (f *cliFleet) gone(t *testing.T, ticket string) {
	t.Helper()
	if o, err := f.op.Poll(t.Context(), ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Errorf("fleet_poll of %s after the command: %+v, %v; want ERR_UNKNOWN_TICKET (acknowledged)", ticket, o, err)
	}
}

func TestCLISendDetachedPollAck(t *testing.T) {
	f := newCLIFleet(t)
	m1 := dialAs(t, f.d.url, f.tokens["m1"])

	// A detached send prints its ticket, and is not acknowledged.
	var sent fleetstate.Outcome
	jsonDoc(t, f.ok(t, "send", "m1", "count the files", "--json"), &sent)
	if sent.Kind != fleetstate.OutcomePending || sent.Ticket == "" || sent.State != fleetstate.TicketQueued || sent.From != "m1" {
		t.Fatalf("send --json: %+v; want a pending, queued outcome of m1 with a ticket", sent)
	}
	if o, err := f.op.Poll(t.Context(), sent.Ticket, 0); err != nil || o.State != fleetstate.TicketQueued {
		t.Fatalf("fleet_poll of the sent ticket: %+v, %v; want queued", o, err)
	}
	var page fleetstate.TicketPage
	jsonDoc(t, f.ok(t, "poll", "--json"), &page)
	if len(page.Tickets) != 1 || page.Tickets[0].Ticket != sent.Ticket {
		t.Fatalf("poll --json: %+v; want the one ticket %s", page, sent.Ticket)
	}

	// The member gets the brief from the operator and replies.
	msg, got, err := m1.Next(t.Context(), 10*time.Second)
	if err != nil || !got || msg.From != mcpadapter.OperatorAgent || msg.Content != "count the files" {
		t.Fatalf("m1's fleet_next: %+v, %v, %v; want the brief from %q", msg, got, err, mcpadapter.OperatorAgent)
	}
	if err := m1.ReplyTurn(t.Context(), msg.TurnID, "42 files"); err != nil {
		t.Fatal(err)
	}

	// poll --keep prints the finished outcome and leaves it held.
	var kept fleetstate.Outcome
	jsonDoc(t, f.ok(t, "poll", sent.Ticket, "--wait", "10s", "--keep", "--json"), &kept)
	if kept.Kind != fleetstate.OutcomeReply || kept.Content != "42 files" || kept.State != fleetstate.TicketDone {
		t.Fatalf("poll TICKET --keep --json: %+v; want m1's reply, done", kept)
	}
	if o, err := f.op.Poll(t.Context(), sent.Ticket, 0); err != nil || o.Kind != fleetstate.OutcomeReply {
		t.Fatalf("fleet_poll after poll --keep: %+v, %v; want the reply still held", o, err)
	}

	// poll without --keep prints it, then acknowledges it.
	out := f.ok(t, "poll", sent.Ticket)
	if !strings.Contains(out, "reply from m1") || !strings.Contains(out, "  42 files") {
		t.Errorf("poll TICKET printed:\n%s\nwant m1's reply", out)
	}
	f.gone(t, sent.Ticket)
	if out := f.ok(t, "poll"); out != "no tickets\n" {
		t.Errorf("poll after the ack printed %q; want no tickets", out)
	}

	// ack drops a finished ticket kept by --keep.
	jsonDoc(t, f.ok(t, "send", "m1", "again", "--json"), &sent)
	msg, _, err = m1.Next(t.Context(), 10*time.Second)
	if err != nil || msg.TurnID == "" {
		t.Fatalf("m1's second fleet_next: %+v, %v", msg, err)
	}
	if err := m1.ReplyTurn(t.Context(), msg.TurnID, "done again"); err != nil {
		t.Fatal(err)
	}
	jsonDoc(t, f.ok(t, "poll", "--wait", "10s", "--keep", "--json"), &page)
	if len(page.Tickets) != 1 || page.Tickets[0].State != fleetstate.TicketDone {
		t.Fatalf("poll --keep --json: %+v; want the one finished ticket", page)
	}
	var ack map[string]any
	jsonDoc(t, f.ok(t, "ack", sent.Ticket, "--json"), &ack)
	if ack["ok"] != true {
		t.Errorf("ack --json: %v; want {ok: true}", ack)
	}
	f.gone(t, sent.Ticket)
}

func TestCLISendWaitGetsReply(t *testing.T) {
	f := newCLIFleet(t)
	m1 := dialAs(t, f.d.url, f.tokens["m1"])
	member := func(reply string) <-chan error {
		done := make(chan error, 1)
		go func() {
			msg, got, err := m1.Next(context.Background(), 20*time.Second)
			if err == nil && !got {
				err = errors.New("no message came")
			}
			if err == nil {
				err = m1.ReplyTurn(context.Background(), msg.TurnID, reply+": "+msg.Content)
			}
			done <- err
		}()
		return done
	}

	done := member("on it")
	var o fleetstate.Outcome
	jsonDoc(t, f.ok(t, "send", "m1", "build it", "--wait", "--json"), &o)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o.Kind != fleetstate.OutcomeReply || o.Content != "on it: build it" || o.From != "m1" || o.Ticket == "" {
		t.Fatalf("send --wait --json: %+v; want m1's reply with its ticket", o)
	}
	f.gone(t, o.Ticket)
	if all, err := f.op.PollAll(t.Context(), 0); err != nil || len(all) != 0 {
		t.Errorf("fleet_poll after send --wait: %+v, %v; want no tickets", all, err)
	}

	// --keep leaves the outcome held; the human form says whose it is.
	done = member("kept")
	out := f.ok(t, "send", "m1", "hold it", "--wait", "--keep")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "reply from m1 (ticket ") || !strings.Contains(out, "\n  kept: hold it\n") {
		t.Errorf("send --wait --keep printed:\n%s", out)
	}
	all, err := f.op.PollAll(t.Context(), 0)
	if err != nil || len(all) != 1 || all[0].Kind != fleetstate.OutcomeReply || all[0].State != fleetstate.TicketDone {
		t.Errorf("fleet_poll after send --wait --keep: %+v, %v; want the reply held", all, err)
	}
}

// TestCLISendWaitOwnTurn: send --wait to a member that has another turn
// open waits for its own turn's outcome, and one whose turn is not done
// within the send's bound prints the ticket and exits 1, saying how to
// collect it.
func TestCLISendWaitOwnTurn(t *testing.T) {
	t.Run("behind another turn", func(t *testing.T) {
		f := newCLIFleet(t)
		m1 := dialAs(t, f.d.url, f.tokens["m1"])
		if _, err := f.op.SendDetached(t.Context(), "m1", "task A"); err != nil {
			t.Fatal(err)
		}
		a, got, err := m1.Next(t.Context(), 10*time.Second)
		if err != nil || !got {
			t.Fatalf("m1's fleet_next: %v, %v; want task A", got, err)
		}
		done := make(chan error, 1)
		go func() {
			// Once task B waits behind A, m1 finishes A, then does B.
			if !fleettest.Until(20*time.Second, 10*time.Millisecond, func() bool {
				all, err := f.op.PollAll(context.Background(), 0)
				return err == nil && len(all) == 2
			}) {
				done <- errors.New("task B never queued")
				return
			}
			if err := m1.ReplyTurn(context.Background(), a.TurnID, "A done"); err != nil {
				done <- err
				return
			}
			b, got, err := m1.Next(context.Background(), 10*time.Second)
			if err == nil && !got {
				err = errors.New("task B never came")
			}
			if err == nil {
				err = m1.ReplyTurn(context.Background(), b.TurnID, "B done: "+b.Content)
			}
			done <- err
		}()
		var o fleetstate.Outcome
		jsonDoc(t, f.ok(t, "send", "m1", "task B", "--wait", "--json"), &o)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if o.Kind != fleetstate.OutcomeReply || o.Content != "B done: task B" {
			t.Fatalf("send --wait behind another turn: %+v; want the reply to task B", o)
		}
		f.gone(t, o.Ticket)
	})
	t.Run("not done within the bound", func(t *testing.T) {
		f := newCLIFleet(t, "--send-timeout", "1s")
		m1 := dialAs(t, f.d.url, f.tokens["m1"])
		taken := make(chan error, 1)
		go func() {
			_, got, err := m1.Next(context.Background(), 20*time.Second)
			if err == nil && !got {
				err = errors.New("no message came")
			}
			taken <- err
		}()
		r := leadCLI(t, nil, "", "send", "m1", "slow work", "--wait", "--dir", f.dir)
		if err := <-taken; err != nil {
			t.Fatal(err)
		}
		if r.code != 1 || !strings.HasPrefix(r.stdout, "pending: ticket ") ||
			!strings.Contains(r.stderr, "the turn is still working after the send's bound") || !strings.Contains(r.stderr, "fleetstate poll ticket-") {
			t.Fatalf("send --wait of a turn not done in time: exit %d\nstdout: %s\nstderr: %s\nwant exit 1, the ticket, and how to collect it", r.code, r.stdout, r.stderr)
		}
	})
}

func TestCLIAnswerQuestionByTurn(t *testing.T) {
	f := newCLIFleet(t)
	m1 := dialAs(t, f.d.url, f.tokens["m1"])
	answered := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		msg, got, err := m1.Next(context.Background(), 20*time.Second)
		if err == nil && !got {
			err = errors.New("no message came")
		}
		if err != nil {
			done <- err
			return
		}
		answer, timedOut, err := m1.AskTurn(context.Background(), msg.TurnID, "which database?", "sqlite")
		if err == nil && timedOut {
			err = errors.New("the question timed out")
		}
		if err != nil {
			done <- err
			return
		}
		answered <- answer
		done <- m1.ReplyTurn(context.Background(), msg.TurnID, "migrated to "+answer)
	}()

	var sent fleetstate.Outcome
	jsonDoc(t, f.ok(t, "send", "m1", "migrate the data", "--json"), &sent)
	var q fleetstate.Outcome
	deadline := time.Now().Add(30 * time.Second)
	for q.Kind != fleetstate.OutcomeQuestion {
		if time.Now().After(deadline) {
			t.Fatalf("no question on %s: last %+v", sent.Ticket, q)
		}
		jsonDoc(t, f.ok(t, "poll", sent.Ticket, "--wait", "5s", "--json"), &q)
	}
	if q.Content != "which database?" || q.TurnID == "" || q.State != fleetstate.TicketQuestion {
		t.Fatalf("poll of the question: %+v", q)
	}
	// The question stays on its ticket: printing it acknowledges nothing.
	if out := f.ok(t, "poll"); !strings.Contains(out, "question from m1") || !strings.Contains(out, "fleetstate answer "+q.TurnID) {
		t.Errorf("poll printed:\n%s\nwant the question with its turn ID", out)
	}

	// The answer's text comes from standard input ("-").
	r := leadCLI(t, nil, "postgres", "answer", q.TurnID, "-", "--json", "--dir", f.dir)
	if r.code != 0 {
		t.Fatalf("answer: exit %d: %s", r.code, r.stderr)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a := <-answered; a != "postgres" {
		t.Errorf("m1's fleet_ask returned %q; want postgres", a)
	}
	var o fleetstate.Outcome
	jsonDoc(t, r.stdout, &o)
	if o.Kind != fleetstate.OutcomeReply || o.Content != "migrated to postgres" || o.Ticket != sent.Ticket {
		t.Fatalf("answer --json: %+v; want m1's reply on ticket %s", o, sent.Ticket)
	}
	f.gone(t, sent.Ticket)
}

func TestCLICancelQueuedTicket(t *testing.T) {
	f := newCLIFleet(t)
	var sent fleetstate.Outcome
	jsonDoc(t, f.ok(t, "send", "m2", "never mind this", "--json"), &sent)
	var o fleetstate.Outcome
	jsonDoc(t, f.ok(t, "cancel", sent.Ticket, "--json"), &o)
	if o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonCancelled || o.Ticket != sent.Ticket {
		t.Fatalf("cancel --json: %+v; want failed, cancelled, on %s", o, sent.Ticket)
	}
	f.gone(t, sent.Ticket)
	// The member, coming now, never gets the cancelled brief.
	m2 := dialAs(t, f.d.url, f.tokens["m2"])
	if msg, got, err := m2.Next(t.Context(), time.Second); err != nil || got {
		t.Errorf("m2's fleet_next after the cancel: %+v, %v, %v; want no message", msg, got, err)
	}

	// The human form; --keep leaves the cancelled outcome held.
	jsonDoc(t, f.ok(t, "send", "m2", "and this", "--json"), &sent)
	out := f.ok(t, "cancel", sent.Ticket, "--keep")
	if !strings.HasPrefix(out, "failed: cancelled, the turn of m2 (ticket "+sent.Ticket) {
		t.Errorf("cancel printed:\n%s", out)
	}
	if p, err := f.op.Poll(t.Context(), sent.Ticket, 0); err != nil || p.Reason != fleetstate.ReasonCancelled {
		t.Errorf("fleet_poll after cancel --keep: %+v, %v; want the cancelled outcome held", p, err)
	}
}

func TestCLIMembers(t *testing.T) {
	f := newCLIFleet(t)
	m1 := dialAs(t, f.d.url, f.tokens["m1"])
	if _, _, err := m1.Next(t.Context(), 0); err != nil { // m1 is ready once it calls
		t.Fatal(err)
	}
	// m1 does a turn and reports what its model used with its reply.
	f.ok(t, "send", "m1", "count your tokens")
	msg, ok, err := m1.Next(t.Context(), 30*time.Second)
	if err != nil || !ok {
		t.Fatalf("m1's next: %v, %v", ok, err)
	}
	if err := m1.ReplyUsage(t.Context(), msg.TurnID, "done", fleetstate.UsageReport{Source: "m1-proc", Total: fleetstate.Usage{Input: 12000, Output: 345}}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Members []fleetstate.MemberInfo `json:"members"`
	}
	jsonDoc(t, f.ok(t, "members", "--json"), &doc)
	byName := map[string]fleetstate.MemberInfo{}
	for _, m := range doc.Members {
		byName[m.Name] = m
	}
	if len(doc.Members) != 2 || !byName["m1"].Ready || byName["m2"].Name != "m2" || byName["m1"].Status == "" ||
		byName["m1"].Usage != (fleetstate.Usage{Input: 12000, Output: 345}) {
		t.Fatalf("members --json: %+v; want m1 (ready, 12000 in and 345 out used) and m2", doc.Members)
	}
	var raw map[string][]map[string]any
	jsonDoc(t, f.ok(t, "members", "--json"), &raw)
	for _, field := range []string{"name", "ready", "status", "queued", "usage"} {
		if _, ok := raw["members"][0][field]; !ok {
			t.Errorf("members --json lacks the field %q: %v", field, raw)
		}
	}
	out := f.ok(t, "members")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "MEMBER") || !strings.Contains(out, "m1 ") || !strings.Contains(out, "m2 ") ||
		!strings.Contains(lines[1]+lines[2], "12,000 in, 345 out") || lines[3] != "fleet: used 12,000 in, 345 out" {
		t.Errorf("members printed:\n%s", out)
	}
}

// TestCLIAsLead runs the commands with a lead's $FLEET_TOKEN and --url
// (and $FLEET_URL): the tickets are that lead's, not the operator's.
func TestCLIAsLead(t *testing.T) {
	f := newCLIFleet(t)
	env := []string{"FLEET_TOKEN=" + f.tokens["lead"]}
	r := leadCLI(t, env, "", "send", "m1", "a lead's task", "--url", f.d.url, "--json")
	if r.code != 0 {
		t.Fatalf("send --url: exit %d: %s", r.code, r.stderr)
	}
	var sent fleetstate.Outcome
	jsonDoc(t, r.stdout, &sent)
	lead := dialAs(t, f.d.url, f.tokens["lead"])
	if o, err := lead.Poll(t.Context(), sent.Ticket, 0); err != nil || o.State != fleetstate.TicketQueued {
		t.Fatalf("the lead's fleet_poll of the CLI's ticket: %+v, %v; want queued", o, err)
	}
	f.gone(t, sent.Ticket) // not the operator's
	// $FLEET_URL, as up sets it for every agent, stands for --url; the
	// daemon's base URL serves as well as its /mcp endpoint.
	env = append(env, "FLEET_URL="+strings.TrimSuffix(f.d.url, "/mcp"))
	// The short form fleetstate watch shows names the ticket.
	short := strings.TrimPrefix(sent.Ticket, "ticket-")[:8]
	r = leadCLI(t, env, "", "cancel", short, "--json")
	if r.code != 0 {
		t.Fatalf("cancel %s with $FLEET_URL: exit %d: %s", short, r.code, r.stderr)
	}
	// A lead the fleet file does not let decide is told so, not that
	// no request waits.
	if r := leadCLI(t, env, "", "requests"); r.code == 0 || !strings.Contains(r.stderr, "may not see or decide permission requests") ||
		!strings.Contains(r.stderr, string(fleetstate.CodeNotPermitted)) {
		t.Errorf("requests as a lead that may not decide: exit %d, %q, %q; want refused with ERR_NOT_PERMITTED", r.code, r.stdout, r.stderr)
	}
	if _, err := lead.Poll(t.Context(), sent.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Errorf("the lead's fleet_poll after cancel: %v; want ERR_UNKNOWN_TICKET (acknowledged)", err)
	}
}

func TestCLIErrors(t *testing.T) {
	f := newCLIFleet(t)
	var sent fleetstate.Outcome
	jsonDoc(t, f.ok(t, "send", "m1", "queued", "--json"), &sent)
	closed := "http://" + fleettest.DeadAddr(t)
	down := t.TempDir() // a directory whose daemon is gone
	addToken(t, down, "m1", "member")
	gone := startDaemon(t, down)
	gone.kill(syscall.SIGKILL)

	dir := []string{"--dir", f.dir}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown member", nil, append([]string{"send", "nobody", "hi"}, dir...), `send: unknown member: "nobody": fleetstate members lists the members`},
		{"unknown ticket poll", nil, append([]string{"poll", "ticket-nope"}, dir...), `poll: unknown ticket: "ticket-nope": fleetstate poll lists your tickets`},
		{"unknown ticket ack", nil, append([]string{"ack", "ticket-nope"}, dir...), `ack: unknown ticket: "ticket-nope"`},
		{"unknown ticket cancel", nil, append([]string{"cancel", "ticket-nope"}, dir...), `cancel: unknown ticket: "ticket-nope" is neither a ticket nor a turn of yours: fleetstate poll lists your tickets`},
		{"ack of an open ticket", nil, append([]string{"ack", sent.Ticket}, dir...), `ack: the ticket's turn has not ended: "` + sent.Ticket + `" is queued; fleetstate cancel ends it`},
		{"answer without a question", nil, append([]string{"answer", "turn-nope", "yes"}, dir...), `answer: unknown turn: "turn-nope": fleetstate poll shows the questions waiting`},
		{"empty text on stdin", nil, append([]string{"answer", "turn-x", "-"}, dir...), "answer: the text is empty"},
		{"empty text", nil, append([]string{"send", "m1", " "}, dir...), "send: the text is empty"},
		{"missing argument", nil, append([]string{"send", "m1"}, dir...), "send: want MEMBER TEXT (see fleetstate send --help)"},
		{"extra argument", nil, append([]string{"members", "m1"}, dir...), "members: want no arguments"},
		{"unknown flag", nil, append([]string{"poll", "--bogus"}, dir...), "poll: flag provided but not defined: -bogus"},
		{"negative wait", nil, append([]string{"poll", "--wait", "-1s"}, dir...), "poll: --wait -1s is negative"},
		{"no token", nil, []string{"members", "--url", f.d.url}, "members: no token: --url needs a lead's token in $FLEET_TOKEN"},
		{"dir and url", nil, []string{"members", "--dir", f.dir, "--url", f.d.url}, "give --dir (the operator) or --url (a lead), not both"},
		{"revoked token", []string{"FLEET_TOKEN=fst_not-a-token"}, []string{"members", "--url", f.d.url}, "refuses the token in $FLEET_TOKEN"},
		{"member token", []string{"FLEET_TOKEN=" + f.tokens["m1"]}, []string{"members", "--url", f.d.url}, "members: not permitted: member m1 may not call fleet_members; only the lead may: the lead commands need a lead's token"},
		{"not a URL", []string{"FLEET_TOKEN=" + f.tokens["lead"]}, []string{"members", "--url", "127.0.0.1:1"}, `is not a daemon's URL`},
		{"daemon down at url", []string{"FLEET_TOKEN=" + f.tokens["lead"]}, []string{"members", "--url", closed}, "members: no daemon answers at " + closed + "/mcp"},
		{"daemon down for dir", nil, []string{"members", "--dir", down}, "members: no daemon serves " + down + ": start fleetstate serve --dir " + down},
		{"never served dir", nil, []string{"members", "--dir", t.TempDir()}, "members: no daemon serves "},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := leadCLI(t, c.env, "", c.args...)
			if r.code == 0 {
				t.Fatalf("fleetstate %s exited 0: %s", strings.Join(c.args, " "), r.stdout)
			}
			if !strings.HasPrefix(r.stderr, "fleetstate: ") || !strings.Contains(r.stderr, c.want) {
				t.Errorf("fleetstate %s said %q; want %q", strings.Join(c.args, " "), r.stderr, c.want)
			}
			if r.stdout != "" {
				t.Errorf("fleetstate %s printed %q on standard output; want nothing", strings.Join(c.args, " "), r.stdout)
			}
		})
	}
	// None of the mistakes changed the queued ticket.
	if o, err := f.op.Poll(t.Context(), sent.Ticket, 0); err != nil || o.State != fleetstate.TicketQueued {
		t.Errorf("the queued ticket after the mistakes: %+v, %v; want queued", o, err)
	}
}

// TestCLIRequestsApproveDeny: a member's agent raises permission requests
// through the real hook; `requests` lists them (the command, not the
// input's JSON; --json the whole request), `approve` allows one (the hook
// prints the allow) and `deny --message` denies the other (the hook
// prints the denial with the message). A decided request is refused.
func TestCLIRequestsApproveDeny(t *testing.T) {
	f := newCLIFleet(t)
	allowed := runHook(t, f.d.url, f.tokens["m1"], "go test ./...", time.Minute)
	denied := runHook(t, f.d.url, f.tokens["m2"], "rm -rf build", time.Minute)

	var list struct {
		Permissions []fleetstate.PermissionRequest `json:"permissions"`
	}
	if !fleettest.Until(15*time.Second, 20*time.Millisecond, func() bool {
		jsonDoc(t, f.ok(t, "requests", "--json"), &list)
		return len(list.Permissions) == 2
	}) {
		t.Fatalf("requests --json = %+v; want the two requests", list.Permissions)
	}
	ids := map[string]string{}
	for _, p := range list.Permissions {
		ids[p.Member] = p.ID
		if p.Tool != "Bash" || p.Cwd != "/src" {
			t.Errorf("request %+v; want Bash in /src", p)
		}
	}
	if out := f.ok(t, "requests"); !strings.Contains(out, "go test ./...") || !strings.Contains(out, "rm -rf build") ||
		!strings.Contains(out, ids["m1"]) || strings.Contains(out, `{"command"`) {
		t.Errorf("requests:\n%s\nwant each request's ID and command", out)
	}

	if out := f.ok(t, "requests", ids["m2"][:12]); !strings.Contains(out, "request "+ids["m2"]) || !strings.Contains(out, "rm -rf build") {
		t.Errorf("requests ID (a short form):\n%s\nwant the request whole", out)
	}
	// The short form fleetstate watch shows: the UUID's first eight digits.
	if out := f.ok(t, "approve", strings.TrimPrefix(ids["m1"], "perm-")[:8]); !strings.Contains(out, "approved "+ids["m1"]) {
		t.Errorf("approve printed %q", out)
	}
	if got := allowed.output(t, 30*time.Second); got != allowOut {
		t.Errorf("the hook after approve printed %q; want %q", got, allowOut)
	}
	var ok struct{ OK bool }
	jsonDoc(t, f.ok(t, "deny", ids["m2"], "--message", "not the shared build folder", "--json"), &ok)
	if !ok.OK {
		t.Errorf("deny --json: ok false")
	}
	if got, want := denied.output(t, 30*time.Second), strings.Replace(denyOut, "%s", "not the shared build folder", 1); got != want {
		t.Errorf("the hook after deny printed %q; want %q", got, want)
	}

	r := leadCLI(t, nil, "", "approve", ids["m1"], "--dir", f.dir)
	if r.code == 0 || !strings.Contains(r.stderr, string(fleetstate.CodeUnknownRequest)) && !strings.Contains(r.stderr, string(fleetstate.CodeRequestDecided)) {
		t.Errorf("approve of a decided request: exit %d, %q; want refused with its code", r.code, r.stderr)
	}
	jsonDoc(t, f.ok(t, "requests", "--json"), &list)
	if len(list.Permissions) != 0 {
		t.Errorf("requests after both were decided = %+v; want none", list.Permissions)
	}
}
