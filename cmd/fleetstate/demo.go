package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// runDemo starts a daemon on a loopback port with a temporary state
// directory, connects a lead and three members to it as separate MCP
// clients over HTTP, and runs the delegation flows between them, printing
// a transcript.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo")
	keep := fs.Bool("keep", false, "keep the temporary state directory")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo: unexpected argument %q", fs.Arg(0))
	}
	dir, err := os.MkdirTemp("", "fleetstate-demo-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(stdout, "state directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The agents' tokens first: the daemon makes every member token's
	// holder a member.
	_, tokenFile, err := openStateDir(dir)
	if err != nil {
		return err
	}
	tokens := map[string]string{}
	for name, role := range map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "alice": mcpadapter.RoleMember,
		"bob": mcpadapter.RoleMember, "carol": mcpadapter.RoleMember} {
		if tokens[name], err = tokenFile.Add(name, role); err != nil {
			return err
		}
	}
	opts, _ := storeOptions() // checked by openStateDir
	d, err := daemon.New(daemon.Config{Dir: dir, SyncWrites: opts != nil && opts.SyncWrites, Logger: log, Version: version})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln) }()
	defer func() { d.Close(); <-served }()
	url := "http://" + ln.Addr().String() + "/mcp"

	var mu sync.Mutex
	say := func(who, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, "%-6s %s\n", who+":", fmt.Sprintf(format, args...))
	}
	say("daemon", "serving MCP at %s", url)

	conns := map[string]*mcpadapter.Client{}
	for name, tok := range tokens {
		c, err := mcpadapter.Dial(ctx, url, tok, "fleetstate-demo-"+name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer c.Close()
		conns[name] = c
	}

	mctx, stopMembers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range []string{"alice", "bob", "carol"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			member(mctx, name, conns[name], say)
		}()
	}
	defer func() { stopMembers(); wg.Wait() }()

	lead := conns["lead"]
	sess, err := lead.NewSession(ctx, "demo")
	if err != nil {
		return err
	}
	say("lead", "new session %s", sess.ID)

	// Delegation: one blocking call, answered by the member's reply.
	say("lead", "fleet_send to alice: %q", "survey the TODOs")
	o, err := lead.Send(ctx, "alice", "survey the TODOs")
	if err != nil {
		return err
	}
	say("lead", "got %s from %s: %q", o.Kind, o.From, o.Content)
	id, err := fleetstate.ParseFileID(o.Content[strings.Index(o.Content, "fsm::"):])
	if err != nil {
		return err
	}
	file, err := lead.Get(ctx, id)
	if err != nil {
		return err
	}
	say("lead", "read alice's notes: %q", file)

	// Clarification: the member asks, the lead answers by turn ID.
	say("lead", "fleet_send to bob: %q", "build the release")
	if o, err = lead.Send(ctx, "bob", "build the release"); err != nil {
		return err
	}
	say("lead", "got %s from %s: %q (turn %s…)", o.Kind, o.From, o.Content, o.TurnID[:13])
	if o.Kind != fleetstate.OutcomeQuestion {
		return fmt.Errorf("bob: got %s; want a question", o.Kind)
	}
	say("lead", "answers turn %s…: %q", o.TurnID[:13], "release-2")
	if o, err = lead.Answer(ctx, o.TurnID, "release-2"); err != nil {
		return err
	}
	say("lead", "got %s from %s: %q", o.Kind, o.From, o.Content)

	// Detached: a ticket at once, collected later.
	if o, err = lead.SendDetached(ctx, "carol", "run the long test suite"); err != nil {
		return err
	}
	ticket := o.Ticket
	say("lead", "fleet_send to carol, detached: %s, ticket %s…", o.Kind, ticket[:15])
	for o.Kind == fleetstate.OutcomePending {
		if o, err = lead.Poll(ctx, ticket, 10*time.Second); err != nil {
			return err
		}
		say("lead", "fleet_poll: %s (%s)", o.Kind, o.State)
	}
	say("lead", "carol's report: %q", o.Content)
	if err := lead.Ack(ctx, ticket); err != nil {
		return err
	}
	say("lead", "acked the ticket")

	members, err := lead.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range members {
		say("lead", "member %s ready=%v queued=%d", m.Name, m.Ready, m.Queued)
	}
	say("daemon", "done")
	return nil
}

// member plays a member agent: it takes messages with fleet_next and
// answers each in its own way.
func member(ctx context.Context, name string, c *mcpadapter.Client, say func(who, format string, args ...any)) {
	for ctx.Err() == nil {
		msg, ok, err := c.Next(ctx, time.Second)
		if err != nil || !ok {
			continue
		}
		say(name, "received %q from %s", msg.Content, msg.From)
		var reply string
		switch name {
		case "alice":
			id, err := c.Put(ctx, "alice", "notes/todos.md", []byte("3 TODOs: parser.go:12, store.go:40, main.go:7"), false)
			if err != nil {
				reply = "could not write notes: " + err.Error()
				break
			}
			reply = "found 3 TODOs, notes in " + id.String()
		case "bob":
			say(name, "fleet_ask: %q", "which branch?")
			answer, _, err := c.Ask(ctx, "which branch?", "main")
			if err != nil {
				reply = "ask failed: " + err.Error()
				break
			}
			say(name, "got the answer %q", answer)
			reply = "built " + answer + ", all green"
		default:
			time.Sleep(300 * time.Millisecond) // a long task
			reply = "412 tests, 0 failures"
		}
		say(name, "fleet_reply: %q", reply)
		if err := c.Reply(ctx, reply); err != nil {
			say(name, "fleet_reply failed: %v", err)
		}
	}
}
