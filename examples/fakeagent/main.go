// Command fakeagent behaves like a coding-agent CLI in a terminal pane, for
// fleetstate's tests and demos: it shows a prompt, reads a submitted
// message (bracketed paste included), reports its status through the
// fleetstate hook command, works, and answers through the fleetstate MCP
// daemon. What it does is chosen by a tag in the message:
//
//	(no tag)    work briefly, then fleet_reply with a digest of the message and
//	            how many messages were submitted to the agent so far
//	[ask]       fleet_ask the lead which branch to use, then reply with it
//	[exhaust]   print a spent-credit error and stop without replying
//	[echo]      stop at once without printing anything (the pane shows only the brief)
//	[long]      print a 400-line report and stop without replying
//	[slow]      print progress for a few seconds and stop without replying
//	[hang]      work forever
//	[die]       exit, closing the pane
//
// Usage:
//
//	FLEET_TOKEN=… fakeagent --agent NAME --url http://127.0.0.1:7333/mcp --fleetstate PATH [--hooks=false] [--lead]
//
// In a pane that fleetstate up started, FLEET_AGENT, FLEET_URL and
// FLEET_ROLE give --agent, --url and --lead their defaults.
//
// With --hooks=false it reports no status and only draws a screen that
// patterns can read: "(esc to interrupt)" while working, a "> " prompt when
// idle. With --lead it only shows what is delivered to it (nudges).
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/mcpadapter"
)

func main() {
	// The defaults come from the environment fleetstate up gives a pane.
	agent := flag.String("agent", os.Getenv("FLEET_AGENT"), "the agent's name (default $FLEET_AGENT)")
	url := flag.String("url", envOr("FLEET_URL", "http://127.0.0.1:7333/mcp"), "the daemon's MCP endpoint (default $FLEET_URL)")
	bin := flag.String("fleetstate", "fleetstate", "the fleetstate binary, for the hook command")
	hooks := flag.Bool("hooks", true, "report status through the hook command")
	lead := flag.Bool("lead", os.Getenv("FLEET_ROLE") == "lead", "act as the lead's pane: show deliveries, reply to nothing (default: $FLEET_ROLE is lead)")
	flag.Parse()
	a := &fake{name: *agent, url: *url, bin: *bin, hooks: *hooks, token: os.Getenv("FLEET_TOKEN")}
	if err := a.run(*lead); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		time.Sleep(time.Hour) // keep the pane, and the error, on screen
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

type fake struct {
	name, url, bin, token string
	hooks                 bool
	mcp                   *mcpadapter.Client
	received              int // messages submitted to this agent so far
}

func (a *fake) run(lead bool) error {
	// Read keys one by one (no line buffering, so long pastes are not cut
	// at the terminal's line limit), draw the input ourselves as a TUI
	// does, and ask for bracketed paste.
	if err := stty("-icanon", "-echo", "min", "1"); err != nil {
		return err
	}
	fmt.Print("\x1b[?2004h")
	ctx := context.Background()
	if !lead {
		if err := a.connect(ctx); err != nil {
			return err
		}
	}
	a.hook("SessionStart")
	in := bufio.NewReader(os.Stdin)
	for {
		fmt.Print("\n> ")
		msg, err := readMessage(in)
		if err != nil {
			return err
		}
		a.hook("UserPromptSubmit")
		if lead {
			fmt.Printf("\n[lead pane] got: %s\n", msg)
			a.hook("Stop")
			continue
		}
		a.received++
		a.handle(ctx, msg)
	}
}

// readMessage reads one submitted message: keys up to an Enter outside a
// bracketed paste. A paste may hold newlines; they do not submit.
func readMessage(in *bufio.Reader) (string, error) {
	const start, end = "\x1b[200~", "\x1b[201~"
	var b strings.Builder
	pasting, inEsc := false, false
	for {
		r, _, err := in.ReadRune()
		if err != nil {
			return "", err
		}
		switch {
		case r == 0x15 && !pasting: // C-u: kill the line, as line editors do
			b.Reset()
			continue
		case r < 0x20 && r != '\n' && r != '\r' && r != '\t' && r != 0x1b:
			continue // other editing keys (C-e, …) move nothing here
		}
		b.WriteRune(r)
		switch {
		case r == 0x1b:
			inEsc = true // an escape sequence (the paste brackets) is not drawn
		case inEsc:
			inEsc = r == '[' || ('0' <= r && r <= '9') || r == ';'
		case r >= 0x20 || r == '\n' || r == '\t':
			fmt.Print(string(r)) // draw what was typed or pasted
		}
		s := b.String()
		switch {
		case strings.HasSuffix(s, start):
			pasting = true
		case strings.HasSuffix(s, end):
			pasting = false
		case (r == '\n' || r == '\r') && !pasting:
			s = strings.TrimRight(s, "\r\n")
			s = strings.ReplaceAll(strings.ReplaceAll(s, start, ""), end, "")
			if strings.TrimSpace(s) == "" {
				b.Reset()
				continue
			}
			return strings.ReplaceAll(s, "\r\n", "\n"), nil
		}
	}
}

func (a *fake) handle(ctx context.Context, msg string) {
	working := func() {
		if !a.hooks {
			fmt.Println("\n⠋ Working… (esc to interrupt)")
		}
	}
	done := func() { a.hook("Stop") }
	switch {
	case strings.Contains(msg, "[die]"):
		fmt.Println("\nfatal: the agent crashed")
		os.Exit(3)
	case strings.Contains(msg, "[hang]"):
		working()
		select {}
	case strings.Contains(msg, "[echo]"):
		done()
	case strings.Contains(msg, "[exhaust]"):
		fmt.Println("\nAPI Error: 400 Your credit balance is too low to access the Anthropic API.")
		done()
	case strings.Contains(msg, "[long]"):
		working()
		for i := 1; i <= 400; i++ {
			fmt.Printf("report line %d: finding %d is real\n", i, i)
		}
		done()
	case strings.Contains(msg, "[slow]"):
		working()
		for i := 1; i <= 6; i++ {
			fmt.Printf("step %d of 6\n", i)
			time.Sleep(500 * time.Millisecond)
		}
		fmt.Println("finished the slow work without replying")
		done()
	case strings.Contains(msg, "[ask]"):
		working()
		answer, _, err := a.mcp.Ask(ctx, "which branch should I use?", "main")
		if err != nil {
			fmt.Println("ask failed:", err)
		}
		fmt.Println("the lead answered:", answer)
		a.reply(ctx, "built on "+answer)
		done()
	default:
		working()
		time.Sleep(200 * time.Millisecond)
		sum := sha256.Sum256([]byte(msg))
		a.reply(ctx, fmt.Sprintf("%s received %d bytes in %d lines, sha256 %s (message #%d)", a.name, len(msg),
			strings.Count(msg, "\n")+1, hex.EncodeToString(sum[:8]), a.received))
		done()
	}
}

func (a *fake) reply(ctx context.Context, text string) {
	if err := a.mcp.Reply(ctx, text); err != nil {
		fmt.Println("reply failed:", err)
		return
	}
	fmt.Println("replied:", text)
}

// hook runs the fleetstate status command as a coding agent's lifecycle
// hook would: the event as JSON on standard input.
func (a *fake) hook(event string) {
	if !a.hooks {
		return
	}
	cmd := exec.Command(a.bin, "status", "--agent", a.name, "--url", a.url)
	cmd.Env = append(os.Environ(), "FLEET_TOKEN="+a.token)
	cmd.Stdin = strings.NewReader(`{"hook_event_name":"` + event + `"}`)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Printf("hook %s failed: %v %s\n", event, err, out)
	}
}

func (a *fake) connect(ctx context.Context) error {
	c, err := mcpadapter.Dial(ctx, a.url, a.token, "fakeagent-"+a.name)
	if err != nil {
		return err
	}
	a.mcp = c
	// The first call mounts the agent: the daemon marks it ready.
	_, _ = a.mcp.CurrentSession(ctx)
	return nil
}

func stty(args ...string) error {
	cmd := exec.Command("stty", args...)
	cmd.Stdin = os.Stdin
	cmd.Stderr = io.Discard
	return cmd.Run()
}
