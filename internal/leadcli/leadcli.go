// Package leadcli is the command line of a lead: `fleetstate send`, `poll`,
// `ack`, `answer`, `cancel` and `members`. Each command is a call or two of
// the daemon's MCP tools (fleet_send, fleet_poll, fleet_ack, fleet_cancel,
// fleet_members) through [mcpadapter.Client], made either as the operator,
// with the operator token of the state directory that --dir names (the
// daemon takes it as the lead [mcpadapter.OperatorAgent]), or as a lead,
// with its token in $FLEET_TOKEN and the daemon at --url ($FLEET_URL).
//
// A person reads what a command prints, so a finished outcome that a
// command printed is acknowledged (fleet_ack) right after, unless --keep
// is given: nothing piles up in the fleet's views. A detached send prints
// its ticket and acknowledges nothing.
//
// The commands live in one table ([Commands] lists them for the binary's
// help); a new one is a row of it.
package leadcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/cli"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// Command describes one command of the package for the binary's help.
type Command = cli.Command

// Commands returns the package's commands, in the order the help lists
// them, in a fresh slice.
func Commands() []Command {
	cmds := table()
	out := make([]Command, len(cmds))
	for i, c := range cmds {
		out[i] = c.Command
	}
	return out
}

// Has reports whether name is one of the package's commands.
func Has(name string) bool {
	_, ok := lookup(name)
	return ok
}

// Run runs the command name with its arguments (those after the name):
// it prints to stdout what the command got, and returns an error that
// says what went wrong and what to do. -h or --help prints the command's
// help on stdout and returns [flag.ErrHelp]. stdin is read by a command
// whose text is "-". stderr gets nothing today; it is there for the
// commands to come.
func Run(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c, ok := lookup(name)
	if !ok {
		return fmt.Errorf("leadcli: unknown command %q", name)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &opts{}
	fs.StringVar(&o.dir, "dir", "", "act as the operator of the daemon serving this state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	fs.StringVar(&o.url, "url", "", "act as the lead whose token is in $FLEET_TOKEN, at this daemon (default $FLEET_URL)")
	fs.BoolVar(&o.json, "json", false, "print one JSON document: the tool's structured output")
	if c.keep {
		fs.BoolVar(&o.keep, "keep", false, "do not acknowledge the finished outcome printed: a polled one stays until acked, one a blocking call returned as long as the daemon holds returned outcomes")
	}
	if c.flags != nil {
		c.flags(fs, o)
	}
	pos, err := cli.Interspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		cli.WriteHelp(stdout, &c.Command, fs)
		return flag.ErrHelp
	}
	if err != nil {
		return fmt.Errorf("%s: %v (see fleetstate %s --help)", name, err, name)
	}
	if len(pos) < c.min || len(pos) > c.max {
		return fmt.Errorf("%s: want %s (see fleetstate %s --help)", name, c.args, name)
	}
	r := &runner{name: name, opts: o, stdin: stdin, stdout: stdout}
	if c.check != nil {
		if err := c.check(r, pos); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	bound := callBound
	if c.bound != nil {
		bound = c.bound(o)
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	cl, base, token, err := o.dial(ctx, name)
	if err != nil {
		return err
	}
	defer cl.Close()
	r.c, r.base, r.token = cl, base, token
	if c.ids != "" && len(pos) > 0 {
		if pos[0], err = r.resolve(ctx, c.ids, pos[0]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := c.run(ctx, r, pos); err != nil {
		return r.explain(ctx, err)
	}
	return nil
}

// opts are a command's flags.
type opts struct {
	dir, url   string
	json, keep bool
	wait       bool          // send: block for the outcome
	pollWait   time.Duration // poll: wait for news
	message    string        // deny: why, for the member
	diff       bool          // changes: print the diff
	commit     string        // merge: the commit the branch must be at
	budget     budgetOpts    // budget: the budget to set
}

// command is one row of the table.
type command struct {
	Command
	args     string // the arguments, for the error that counts them
	min, max int    // how many arguments it takes
	keep     bool   // it prints outcomes, acknowledged unless --keep
	flags    func(*flag.FlagSet, *opts)
	// check looks at the arguments before anything is dialled.
	check func(r *runner, args []string) error
	// bound is how long the whole command may take; nil means
	// callBound.
	bound func(*opts) time.Duration
	// ids, if set, is the kind of ID the first argument is (idTicket,
	// idTurn, idRequest): a short form of it, as fleetstate watch shows
	// it, is taken for the whole ID it starts.
	ids string
	run func(ctx context.Context, r *runner, args []string) error
}

func lookup(name string) (command, bool) {
	for _, c := range table() {
		if c.Name == name {
			return c, true
		}
	}
	return command{}, false
}

// Bounds of a command, beyond the tools' own. A blocking send or answer
// returns before the daemon's send timeout (just under 60 s by default,
// --send-timeout of serve), with a ticket when the member is not done;
// waitBound lets a daemon configured longer answer, and keeps a daemon
// that stopped answering from holding the command for ever.
const (
	dialBound = 15 * time.Second
	callBound = 30 * time.Second
	waitBound = 10 * time.Minute
)

// maxText is the most of standard input a text of "-" reads.
const maxText = 1 << 20

// table returns the commands, in the order the help lists them.
func table() []command {
	return append([]command{
		{
			Command: Command{Name: "send", Summary: "send a task to a member, detached (prints its ticket) or --wait for the outcome",
				Usage:   "fleetstate send MEMBER TEXT [--wait] [--keep] [--json] [--dir DIR | --url URL]",
				About:   "Opens a turn of the member with TEXT as its brief (\"-\" reads it from standard input). Without --wait it prints the ticket at once; collect the outcome with fleetstate poll. With --wait it blocks for the outcome of this turn, also while it waits behind another turn of the member, up to the daemon's send timeout (just under 60 s by default), and prints it; if the turn is not done by then, it prints the ticket and exits with status 1, saying how to collect it. A finished outcome it printed is acknowledged unless --keep.",
				Example: `fleetstate send alice "run the tests and report" --wait`},
			args: "MEMBER TEXT", min: 2, max: 2, keep: true,
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.BoolVar(&o.wait, "wait", false, "block for the outcome, up to the daemon's send timeout")
			},
			check: func(r *runner, args []string) error { return r.readText(&args[1]) },
			bound: func(o *opts) time.Duration {
				if o.wait {
					return waitBound
				}
				return callBound
			},
			run: func(ctx context.Context, r *runner, args []string) error {
				if !r.opts.wait {
					o, err := r.c.SendDetached(ctx, args[0], args[1])
					if err != nil {
						return err
					}
					return r.outcome(o)
				}
				o, err := r.c.Send(ctx, args[0], args[1])
				if err == nil && o.Kind == fleetstate.OutcomePending && o.State == fleetstate.TicketQueued && o.Ticket != "" {
					// The member had another turn open, and fleet_send
					// answered at once: this turn's own outcome is
					// waited for, up to the send bound.
					o, err = r.c.Poll(ctx, o.Ticket, fleetstate.DefaultSendTimeout)
				}
				if err := r.settle(ctx, o, err); err != nil {
					return err
				}
				if o.Kind == fleetstate.OutcomePending {
					return fmt.Errorf("the turn is still %s after the send's bound (ticket %s): fleetstate poll %s --wait 60s collects its outcome, fleetstate cancel %s ends it",
						o.State, o.Ticket, o.Ticket, o.Ticket)
				}
				return nil
			},
		},
		{
			Command: Command{Name: "poll", Summary: "show where your tickets stand, or one ticket; acknowledges the finished ones it prints",
				Usage:   "fleetstate poll [TICKET] [--wait D] [--keep] [--json] [--dir DIR | --url URL]",
				About:   "Prints every ticket of yours, oldest first, or the one named: its state (queued, working, question, done) and, once done, its outcome. --wait waits up to D (at most the daemon's bound, 60 s) for news first. A finished outcome it printed is acknowledged unless --keep; a question stays until you answer it.",
				Example: "fleetstate poll tk-01J9Z6 --wait 30s"},
			args: "at most one TICKET", min: 0, max: 1, keep: true, ids: idTicket,
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.DurationVar(&o.pollWait, "wait", 0, "wait up to this long for news (such as 30s)")
			},
			check: func(r *runner, _ []string) error {
				if r.opts.pollWait < 0 {
					return fmt.Errorf("--wait %v is negative", r.opts.pollWait)
				}
				return nil
			},
			bound: func(o *opts) time.Duration { return callBound + min(o.pollWait, waitBound) },
			run: func(ctx context.Context, r *runner, args []string) error {
				if len(args) == 1 {
					o, err := r.c.Poll(ctx, args[0], r.opts.pollWait)
					return r.settle(ctx, o, err)
				}
				all, err := r.c.PollAll(ctx, r.opts.pollWait)
				if err != nil {
					return err
				}
				if all == nil {
					all = []fleetstate.Outcome{}
				}
				if err := r.print(fleetstate.TicketPage{Tickets: all}, FormatTickets(all)); err != nil {
					return err
				}
				for _, o := range all {
					if err := r.ack(ctx, o); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Command: Command{Name: "ack", Summary: "acknowledge a finished ticket: drop it and its held outcome",
				Usage:   "fleetstate ack TICKET [--json] [--dir DIR | --url URL]",
				About:   "Drops a ticket whose turn has ended, with its outcome. A ticket whose turn is still queued or open is refused: fleetstate cancel ends it.",
				Example: "fleetstate ack tk-01J9Z6"},
			args: "TICKET", min: 1, max: 1, ids: idTicket,
			run: func(ctx context.Context, r *runner, args []string) error {
				if err := r.c.Ack(ctx, args[0]); err != nil {
					return err
				}
				return r.print(map[string]bool{"ok": true}, "acknowledged "+args[0]+"\n")
			},
		},
		{
			Command: Command{Name: "answer", Summary: "answer a member's question, by its turn ID, and wait for the turn's next outcome",
				Usage:   "fleetstate answer TURN TEXT [--keep] [--json] [--dir DIR | --url URL]",
				About:   "Answers the question the member asked in turn TURN (poll shows it, with the turn ID) with TEXT (\"-\" reads it from standard input), then waits for the turn's next outcome, up to the daemon's send timeout, and prints it. A finished outcome it printed is acknowledged unless --keep.",
				Example: `fleetstate answer turn-01J9Z6 "yes, drop the old table"`},
			args: "TURN TEXT", min: 2, max: 2, keep: true, ids: idTurn,
			check: func(r *runner, args []string) error { return r.readText(&args[1]) },
			bound: func(*opts) time.Duration { return waitBound },
			run: func(ctx context.Context, r *runner, args []string) error {
				o, err := r.c.Answer(ctx, args[0], args[1])
				return r.settle(ctx, o, err)
			},
		},
		{
			Command: Command{Name: "cancel", Summary: "cancel a ticket's turn: a queued one is never delivered",
				Usage:   "fleetstate cancel TICKET [--keep] [--json] [--dir DIR | --url URL]",
				About:   "Ends the ticket's turn as failed, reason cancelled: a queued message is never delivered, and a member working on it learns it on its next call for the turn. A ticket that already ended keeps its outcome, which is printed. The outcome printed is acknowledged unless --keep.",
				Example: "fleetstate cancel tk-01J9Z6"},
			args: "TICKET", min: 1, max: 1, keep: true, ids: idTicket,
			run: func(ctx context.Context, r *runner, args []string) error {
				o, err := r.c.Cancel(ctx, args[0])
				return r.settle(ctx, o, err)
			},
		},
		{
			Command: Command{Name: "members", Summary: "list the members: ready, status, queued messages, open turn",
				Usage:   "fleetstate members [--json] [--dir DIR | --url URL]",
				About:   "Lists the members a lead can send to, with whether each is ready to take work, its status, how many messages wait in its queue, and its open turn.",
				Example: "fleetstate members --json"},
			args: "no arguments", min: 0, max: 0,
			run: func(ctx context.Context, r *runner, _ []string) error {
				ms, err := r.c.Members(ctx)
				if err != nil {
					return err
				}
				if ms == nil {
					ms = []fleetstate.MemberInfo{}
				}
				return r.print(map[string]any{"members": ms}, FormatMembers(ms, time.Now()))
			},
		},
		{
			Command: Command{Name: "requests", Summary: "list the members' pending permission requests, or show one whole",
				Usage:   "fleetstate requests [ID] [--json] [--dir DIR | --url URL]",
				About:   "Lists the permission requests the members' agents raised and nobody decided yet: each one's ID, member, tool, age, and the command or input, escaped (a newline shows as \\n, an invisible character as \\u202e) and clipped. With ID (or the short form fleetstate watch shows), prints that request whole, escaped. The operator sees them, and a lead where the fleet file lets leads decide; decide with fleetstate approve or deny.",
				Example: "fleetstate requests 3f2a9c1e"},
			args: "at most one ID", min: 0, max: 1, ids: idRequest,
			run: func(ctx context.Context, r *runner, args []string) error {
				ps, err := r.requests(ctx)
				if err != nil {
					return err
				}
				if len(args) == 1 {
					for _, p := range ps {
						if p.ID == args[0] {
							return r.print(p, FormatRequest(p, time.Now()))
						}
					}
					return &mcpadapter.ToolError{Code: fleetstate.CodeUnknownRequest, Message: fmt.Sprintf("no pending request %q", args[0])}
				}
				return r.print(map[string]any{"permissions": ps}, FormatRequests(ps, time.Now()))
			},
		},
		decideCommand("approve", "allow a member's pending permission request",
			"Allows the permission request ID (fleetstate requests lists them): the member's agent goes on with the tool.",
			"fleetstate approve perm-01J9Z6"),
		decideCommand("deny", "deny a member's pending permission request, with a message",
			"Denies the permission request ID (fleetstate requests lists them); --message says why, and the member's agent reads it.",
			`fleetstate deny perm-01J9Z6 --message "not on the shared build folder"`),
		budgetCommand(),
	}, worktreeCommands()...)
}

// decideCommand is approve or deny: fleet_approve of a permission request.
func decideCommand(name, summary, about, example string) command {
	allow := name == "approve"
	usage := "fleetstate " + name + " ID [--json] [--dir DIR | --url URL]"
	if !allow {
		usage = "fleetstate deny ID [--message M] [--json] [--dir DIR | --url URL]"
	}
	return command{
		Command: Command{Name: name, Summary: summary, Usage: usage, About: about, Example: example},
		args:    "ID", min: 1, max: 1, ids: idRequest,
		flags: func(fs *flag.FlagSet, o *opts) {
			if !allow {
				fs.StringVar(&o.message, "message", "", "why it is denied, for the member")
			}
		},
		run: func(ctx context.Context, r *runner, args []string) error {
			a := map[string]any{"id": args[0], "behavior": string(fleetstate.BehaviorDeny)}
			if allow {
				a["behavior"] = string(fleetstate.BehaviorAllow)
			} else if r.opts.message != "" {
				a["message"] = r.opts.message
			}
			if err := r.c.Call(ctx, "fleet_approve", a, nil); err != nil {
				return err
			}
			return r.print(map[string]bool{"ok": true}, map[bool]string{true: "approv", false: "deni"}[allow]+"ed "+args[0]+"\n")
		},
	}
}

// runner is what a command's run uses: the connection, the flags and the
// output.
type runner struct {
	name   string
	opts   *opts
	c      *mcpadapter.Client
	base   string // the daemon's base URL, for its event stream
	token  string
	stdin  io.Reader
	stdout io.Writer
}

// errMayNotDecide is the refusal of a lead the fleet file does not let
// decide permission requests: fleet_members lists none for it.
var errMayNotDecide = &mcpadapter.ToolError{Code: fleetstate.CodeNotPermitted,
	Message: "this lead may not see or decide permission requests: the fleet file does not let leads decide; the operator does (--dir DIR)"}

// requests returns the pending permission requests, or errMayNotDecide.
func (r *runner) requests(ctx context.Context) ([]fleetstate.PermissionRequest, error) {
	var out struct {
		Permissions *[]fleetstate.PermissionRequest `json:"permissions"`
	}
	if err := r.c.Call(ctx, "fleet_members", nil, &out); err != nil {
		return nil, err
	}
	if out.Permissions == nil {
		return nil, errMayNotDecide
	}
	if *out.Permissions == nil {
		return []fleetstate.PermissionRequest{}, nil
	}
	return *out.Permissions, nil
}

// readText replaces a text of "-" with standard input, and refuses an
// empty text.
func (r *runner) readText(text *string) error {
	if *text == "-" {
		data, err := io.ReadAll(io.LimitReader(r.stdin, maxText+1))
		if err != nil {
			return fmt.Errorf("read the text from standard input: %v", err)
		}
		if len(data) > maxText {
			return fmt.Errorf("the text on standard input is over %d bytes", maxText)
		}
		*text = string(data)
	}
	if strings.TrimSpace(*text) == "" {
		return errors.New("the text is empty")
	}
	return nil
}

// settle takes the outcome o of a call that returned err: it returns a
// non-nil err as is, else prints o and then acknowledges it if it is
// finished.
func (r *runner) settle(ctx context.Context, o fleetstate.Outcome, err error) error {
	if err != nil {
		return err
	}
	if err := r.outcome(o); err != nil {
		return err
	}
	return r.ack(ctx, o)
}

// outcome prints o.
func (r *runner) outcome(o fleetstate.Outcome) error {
	return r.print(o, FormatOutcome(o))
}

// print prints v as JSON with --json, else text.
func (r *runner) print(v any, text string) error {
	if r.opts.json {
		return r.printJSON(v)
	}
	fmt.Fprint(r.stdout, text)
	return nil
}

// ack acknowledges o if it is finished and --keep was not given. A ticket
// already gone (acknowledged by another call meanwhile) is no error.
func (r *runner) ack(ctx context.Context, o fleetstate.Outcome) error {
	if r.opts.keep || o.Ticket == "" || !finished(o) {
		return nil
	}
	err := r.c.Ack(ctx, o.Ticket)
	if err == nil || fleetstate.CodeOf(err) == fleetstate.CodeUnknownTicket {
		return nil
	}
	return fmt.Errorf("printed the outcome of %s, but could not acknowledge it: %w", o.Ticket, err)
}

// finished reports whether o ends its turn.
func finished(o fleetstate.Outcome) bool {
	switch o.Kind {
	case fleetstate.OutcomeReply, fleetstate.OutcomeTurnDone, fleetstate.OutcomeFailed:
		return true
	}
	return false
}

func (r *runner) printJSON(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(r.stdout, "%s\n", data)
	return err
}

// explain turns a tool's error into what a person can act on.
func (r *runner) explain(ctx context.Context, err error) error {
	var te *mcpadapter.ToolError
	if !errors.As(err, &te) {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("%s: the daemon did not answer in time; a turn the command started goes on: fleetstate poll shows its ticket", r.name)
		case ctx.Err() != nil:
			return fmt.Errorf("%s: interrupted; a turn the command started goes on: fleetstate poll shows its ticket", r.name)
		}
		return fmt.Errorf("%s: %v", r.name, err)
	}
	// The daemon's message names the library's operation; the command
	// is named already.
	msg := strings.TrimPrefix(te.Message, "fleetstate: ")
	if op, rest, ok := strings.Cut(msg, ": "); ok && !strings.Contains(op, " ") {
		msg = rest
	}
	switch te.Code {
	case fleetstate.CodeUnknownMember:
		return fmt.Errorf("%s: %s: fleetstate members lists the members", r.name, msg)
	case fleetstate.CodeUnknownTicket:
		return fmt.Errorf("%s: %s: fleetstate poll lists your tickets", r.name, msg)
	case fleetstate.CodeUnknownTurn, fleetstate.CodeNoPendingQuestion:
		return fmt.Errorf("%s: %s: fleetstate poll shows the questions waiting, with their turn IDs", r.name, msg)
	case fleetstate.CodeTicketOpen:
		return fmt.Errorf("%s: %s", r.name, strings.Replace(msg, "fleet_cancel", "fleetstate cancel", 1))
	case fleetstate.CodeNotPermitted:
		if te == errMayNotDecide || strings.Contains(msg, "decide permission requests") || strings.Contains(msg, "sets budgets") {
			return fmt.Errorf("%s: %s (%s)", r.name, msg, te.Code)
		}
		return fmt.Errorf("%s: %s: the lead commands need a lead's token in $FLEET_TOKEN, or --dir as the operator", r.name, msg)
	case fleetstate.CodeUnknownRequest:
		return fmt.Errorf("%s: %s: fleetstate requests lists the pending requests", r.name, msg)
	case fleetstate.CodeBudgetExhausted:
		return fmt.Errorf("%s: %s (%s): the operator raises it with fleetstate budget", r.name, msg, te.Code)
	}
	return fmt.Errorf("%s: %s (%s)", r.name, msg, te.Code)
}

// dial connects to the daemon as the operator (--dir) or as a lead
// (--url, $FLEET_URL, with $FLEET_TOKEN), and returns the daemon's base
// URL and the token it took.
func (o *opts) dial(ctx context.Context, name string) (c *mcpadapter.Client, base, token string, err error) {
	token = os.Getenv("FLEET_TOKEN")
	switch {
	case o.dir != "" && o.url != "":
		return nil, "", "", fmt.Errorf("%s: give --dir (the operator) or --url (a lead), not both", name)
	case o.url != "":
		if token == "" {
			return nil, "", "", fmt.Errorf("%s: no token: --url needs a lead's token in $FLEET_TOKEN (fleetstate token add --role lead), or act as the operator with --dir DIR", name)
		}
		c, base, err = o.dialLead(ctx, name, o.url, token)
	case o.dir == "" && token != "" && os.Getenv("FLEET_URL") != "":
		c, base, err = o.dialLead(ctx, name, os.Getenv("FLEET_URL"), token)
	default:
		c, base, token, err = o.dialOperator(ctx, name)
	}
	return c, base, token, err
}

func (o *opts) dialLead(ctx context.Context, name, raw, token string) (*mcpadapter.Client, string, error) {
	url, err := mcpURL(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	c, err := dialBounded(ctx, url, token)
	switch {
	case err == nil:
		return c, strings.TrimSuffix(url, "/mcp"), nil
	case refused(err):
		return nil, "", fmt.Errorf("%s: the daemon at %s refuses the token in $FLEET_TOKEN (unknown or revoked): make one with fleetstate token add --role lead", name, url)
	}
	return nil, "", fmt.Errorf("%s: no daemon answers at %s (%v): start one with fleetstate serve or fleetstate up, or fix --url / $FLEET_URL", name, url, err)
}

func (o *opts) dialOperator(ctx context.Context, name string) (*mcpadapter.Client, string, string, error) {
	d := o.dir
	if d == "" {
		d = fleetstate.DefaultDir()
	}
	if abs, err := filepath.Abs(d); err == nil {
		d = abs
	}
	noDaemon := fmt.Errorf("%s: no daemon serves %s: start fleetstate serve --dir %s (or fleetstate up), or act as a lead with --url and $FLEET_TOKEN", name, d, d)
	// A directory no daemon ever served has no owner file; opening it as a
	// store would create it.
	if _, err := os.Stat(filepath.Join(d, ".fleetstate", "owner")); err != nil {
		return nil, "", "", noDaemon
	}
	store, err := fleetstate.Open(nil, d, nil)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", name, err)
	}
	owner, owned, err := store.FleetOwner()
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", name, err)
	}
	if !owned || owner.Addr == "" {
		return nil, "", "", noDaemon
	}
	token, err := auth.OperatorToken(store)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", name, err)
	}
	url, err := mcpURL(owner.Addr)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: the daemon serving %s gives the address %q: %w", name, d, owner.Addr, err)
	}
	c, err := dialBounded(ctx, url, token)
	switch {
	case err == nil:
		return c, strings.TrimSuffix(url, "/mcp"), token, nil
	case refused(err):
		return nil, "", "", fmt.Errorf("%s: the daemon at %s refuses the operator token of %s: restart it with this version (fleetstate serve --dir %s)", name, url, d, d)
	}
	return nil, "", "", fmt.Errorf("%s: %w (%v)", name, noDaemon, err)
}

func dialBounded(ctx context.Context, url, token string) (*mcpadapter.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, dialBound)
	defer cancel()
	// The connection outlives dctx: mcp-go's streamable HTTP client
	// makes each request with the context of the call.
	return mcpadapter.Dial(dctx, url, token, "fleetstate-cli")
}

// refused reports whether a dial failed on the daemon's 401.
func refused(err error) bool {
	return strings.Contains(err.Error(), "authorization required") || strings.Contains(err.Error(), "401")
}

// mcpURL is the MCP endpoint of a daemon given its base URL or its MCP
// endpoint.
func mcpURL(raw string) (string, error) {
	s := strings.TrimRight(strings.TrimSpace(raw), "/")
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") || len(s) <= len("https://") {
		return "", fmt.Errorf("%q is not a daemon's URL such as http://127.0.0.1:7333", raw)
	}
	return strings.TrimSuffix(s, "/mcp") + "/mcp", nil
}
