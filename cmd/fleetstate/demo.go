package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/mcpadapter"
)

// runDemo starts a daemon on a loopback port with a temporary state
// directory, connects a lead and three members to it as separate MCP
// clients over HTTP, and runs the delegation flows between them, printing
// a transcript.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.Bool("keep", false, "keep the temporary state directory")
	if err := fs.Parse(args); err != nil {
		return err
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
	st, err := openState(dir, log, nil)
	if err != nil {
		return err
	}
	defer st.rv.Close()
	tokens := map[string]string{}
	for name, role := range map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "alice": mcpadapter.RoleMember,
		"bob": mcpadapter.RoleMember, "carol": mcpadapter.RoleMember} {
		tok, err := st.tokens.Add(name, role)
		if err != nil {
			return err
		}
		tokens[name] = tok
		if role == mcpadapter.RoleMember {
			if err := st.rv.AddMember(name, nil); err != nil {
				return err
			}
		}
	}
	srv := st.adapter.NewServer("fleetstate", version)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: st.adapter.HTTPHandler(srv, mcpadapter.HTTPOptions{Tokens: st.tokens}),
		ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
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
	var sess struct{ ID string }
	if err := lead.Call(ctx, "new_session", map[string]any{"name": "demo"}, &sess); err != nil {
		return err
	}
	say("lead", "new session %s", sess.ID)

	// Delegation: one blocking call, answered by the member's reply.
	var o outcome
	say("lead", "fleet_send to alice: %q", "survey the TODOs")
	if err := lead.Call(ctx, "fleet_send", map[string]any{"to": "alice", "content": "survey the TODOs"}, &o); err != nil {
		return err
	}
	say("lead", "got %s from %s: %q", o.Outcome, o.From, o.Content)
	var file struct{ Content string }
	if err := lead.Call(ctx, "get", map[string]any{"id": o.Content[strings.Index(o.Content, "fsm::"):]}, &file); err != nil {
		return err
	}
	say("lead", "read alice's notes: %q", file.Content)

	// Clarification: the member asks, the lead answers by turn ID.
	say("lead", "fleet_send to bob: %q", "build the release")
	if err := lead.Call(ctx, "fleet_send", map[string]any{"to": "bob", "content": "build the release"}, &o); err != nil {
		return err
	}
	say("lead", "got %s from %s: %q (turn %s…)", o.Outcome, o.From, o.Content, o.TurnID[:13])
	if o.Outcome != "question" {
		return fmt.Errorf("bob: got %s; want a question", o.Outcome)
	}
	say("lead", "answers turn %s…: %q", o.TurnID[:13], "release-2")
	if err := lead.Call(ctx, "fleet_send", map[string]any{"turn_id": o.TurnID, "content": "release-2"}, &o); err != nil {
		return err
	}
	say("lead", "got %s from %s: %q", o.Outcome, o.From, o.Content)

	// Detached: a ticket at once, collected later.
	if err := lead.Call(ctx, "fleet_send", map[string]any{"to": "carol", "content": "run the long test suite", "wait": false}, &o); err != nil {
		return err
	}
	ticket := o.Ticket
	say("lead", "fleet_send to carol, detached: %s, ticket %s…", o.Outcome, ticket[:15])
	for o.Outcome == "pending" {
		if err := lead.Call(ctx, "fleet_poll", map[string]any{"ticket": ticket, "wait_s": 10}, &o); err != nil {
			return err
		}
		say("lead", "fleet_poll: %s (%s)", o.Outcome, o.State)
	}
	say("lead", "carol's report: %q", o.Content)
	var ok struct{ OK bool }
	if err := lead.Call(ctx, "fleet_ack", map[string]any{"ticket": ticket}, &ok); err != nil {
		return err
	}
	say("lead", "acked the ticket")

	var members struct {
		Members []struct {
			Name   string
			Ready  bool
			Status string
			Queued int
		}
	}
	if err := lead.Call(ctx, "fleet_members", nil, &members); err != nil {
		return err
	}
	for _, m := range members.Members {
		say("lead", "member %s ready=%v queued=%d", m.Name, m.Ready, m.Queued)
	}
	say("daemon", "done")
	return nil
}

// member plays a member agent: it takes messages with fleet_next and
// answers each in its own way.
func member(ctx context.Context, name string, c *mcpadapter.Client, say func(who, format string, args ...any)) {
	for ctx.Err() == nil {
		var msg struct {
			TurnID  string `json:"turn_id"`
			From    string
			Content string
			Outcome string
		}
		if err := c.Call(ctx, "fleet_next", map[string]any{"wait_s": 1}, &msg); err != nil || msg.Outcome == "none" {
			continue
		}
		say(name, "received %q from %s", msg.Content, msg.From)
		var reply string
		switch name {
		case "alice":
			var put struct{ ID string }
			if err := c.Call(ctx, "put", map[string]any{"agent_name": "alice", "file_name": "notes/todos.md",
				"content": "3 TODOs: parser.go:12, store.go:40, main.go:7"}, &put); err != nil {
				reply = "could not write notes: " + err.Error()
				break
			}
			reply = "found 3 TODOs, notes in " + put.ID
		case "bob":
			var ans struct {
				Answer   string
				TimedOut bool `json:"timed_out"`
			}
			say(name, "fleet_ask: %q", "which branch?")
			if err := c.Call(ctx, "fleet_ask", map[string]any{"question": "which branch?", "default": "main"}, &ans); err != nil {
				reply = "ask failed: " + err.Error()
				break
			}
			say(name, "got the answer %q", ans.Answer)
			reply = "built " + ans.Answer + ", all green"
		default:
			time.Sleep(300 * time.Millisecond) // a long task
			reply = "412 tests, 0 failures"
		}
		say(name, "fleet_reply: %q", reply)
		var ok struct{ OK bool }
		if err := c.Call(ctx, "fleet_reply", map[string]any{"content": reply}, &ok); err != nil {
			say(name, "fleet_reply failed: %v", err)
		}
	}
}

type outcome struct {
	Outcome string
	TurnID  string `json:"turn_id"`
	Ticket  string
	From    string
	Content string
	State   string
	Reason  string
}
