// Package cmdhelp is the help of the fleetstate command: the list of its
// commands, each command's help page, the parsing of its flags with
// -h/--help, the error of a mistyped command, and the binary's version.
//
// It is internal: the fleetstate command is its only user. It keeps what
// the command prints about itself in one place, apart from the wiring.
package cmdhelp

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/fleetstate/fleetstate/internal/cli"
	"github.com/fleetstate/fleetstate/internal/leadcli"
)

// Command is one command's help.
type Command = cli.Command

// Commands returns the commands in the order the list shows them. Every
// command the binary dispatches has one entry here: the lead commands
// (send, poll, ...) come from package leadcli, after watch and web.
func Commands() []Command {
	cmds := own()
	at := len(cmds) - 3 // before demo, version and help
	var lead []Command
	lead = append(lead, leadcli.Commands()...)
	return append(cmds[:at:at], append(lead, cmds[at:]...)...)
}

// cmd is a Command, its fields in order.
func cmd(name, summary, usage, about, example string) Command {
	return Command{Name: name, Summary: summary, Usage: usage, About: about, Example: example}
}

func own() []Command {
	return []Command{
		cmd("up", "bring a fleet up from its fleet file: daemon, tokens, tmux panes, agent configuration",
			"fleetstate up FILE [--dir DIR] [--addr HOST:PORT]",
			"Starts the daemon in the background (or uses the one serving the state directory), makes the missing tokens, writes each agent's MCP configuration and status hooks (Claude Code: .mcp.json and .claude/settings.json in its workdir; Codex: config.toml in a CODEX_HOME of its own), makes the git work tree of each member with \"worktree\" (or finds it made), and starts each agent's command in a tmux window of its own on the fleet's private tmux socket, with FLEET_AGENT, FLEET_ROLE, FLEET_TOKEN and FLEET_URL in its environment. It returns once the fleet runs. Running it again on a running fleet changes nothing; a fleet file with a mistake is refused, naming the field, before anything starts.",
			"fleetstate up fleet.json --dir .ai-fleet-state"),
		cmd("down", "stop a fleet brought up by up: its agents, its tmux session and its daemon",
			"fleetstate down FILE [--dir DIR] [--worktrees]",
			"Stops the agents' panes (SIGTERM, a bounded wait, then SIGKILL), the tmux session, and the daemon if fleetstate up started it. The state directory, with its tokens, files and tickets, stays, and so do the members' work trees and branches; --worktrees removes the work trees that hold nothing uncommitted, and keeps the branches.",
			"fleetstate down fleet.json --dir .ai-fleet-state"),
		cmd("mcp", "serve MCP over standard input and output (the default command)",
			"fleetstate [mcp] [--dir DIR] [--agent NAME --role lead|member] [--connect URL[,URL...]] [--nats URL[,URL...] [--fleet NAME]]",
			"Speaks MCP over standard input and output on the state directory. With --connect it forwards every tool to a daemon instead, authenticated by $FLEET_TOKEN (several URLs of one fleet's daemons: it fails over between them); --agent and --role, if given, must be the token's. With --nats it serves the store of a fleet kept in NATS JetStream, whose fleet tools its daemons serve. On a state directory, $FLEET_STATE_SYNC_WRITES=1 flushes each put to stable storage before it returns (it then survives a power failure; an fsync per put).",
			"FLEET_TOKEN=fst_… fleetstate mcp --connect http://127.0.0.1:7333/mcp"),
		cmd("serve", "run the daemon: MCP over HTTP with a bearer token per agent",
			"fleetstate serve [--addr 127.0.0.1:7333] [--dir DIR | --nats URL[,URL...] | --nats-node [--nats-addr HOST:PORT] [--nats-cluster HOST:PORT --nats-routes URL,...]] [--fleet NAME] [--advertise URL] [--roster FILE] [--anonymous]",
			"Serves streamable HTTP at /mcp, where a lead and its members, each with its own token, meet in one rendezvous; with --roster it also reaches the agents of a fleet file in their tmux panes. With --nats the fleet's whole state lives in NATS JetStream and any number of daemons with the same --nats and --fleet serve it: one owns the rendezvous, the others forward to it (at the URL it --advertise-s) and take over when it dies. With --nats-node the daemon runs its own NATS server, as fleetstate nats does (flags --nats-addr, --nats-store-dir, --nats-cluster, --nats-routes, ...), and reaches it in process, without a TCP hop per write; other daemons and token --nats reach it at --nats-addr. On a state directory, $FLEET_STATE_SYNC_WRITES=1 flushes each put to stable storage before it returns. Logs go to standard error.",
			"fleetstate serve --addr 127.0.0.1:7333 --roster fleet.json"),
		cmd("token", "add, revoke or list the bearer tokens of the daemon's agents",
			"fleetstate token add|revoke|list [--agent NAME] [--role lead|member] [--dir DIR | --nats URL[,URL...] [--fleet NAME]]",
			"add prints a new token for an agent (shown once: only its hash is kept); revoke removes every token of an agent, ending its connections; list prints the agents that hold tokens.",
			"fleetstate token add --agent alice --role member"),
		cmd("nats", "run a NATS server with JetStream, for a fleet kept in NATS (serve --nats)",
			"fleetstate nats [--addr 127.0.0.1:4222] [--store-dir DIR] [--cluster HOST:PORT --routes nats-route://HOST:PORT,...]",
			"Runs the NATS server, embedded in this binary, for convenience: one for a fleet on one machine, or one per machine, each naming the others' cluster addresses in --routes, for a replicated fleet. It is NATS doing the storage and the replication; a nats-server installed on its own serves as well.",
			"fleetstate nats --addr 127.0.0.1:4222 --store-dir /var/lib/fleet-nats"),
		cmd("status", "report an agent's status to the daemon, from its hooks",
			"fleetstate status [--agent NAME] [--url URL] [idle|working|blocked]",
			"Reports the status given, or, without one, the status the hook event on standard input stands for (Claude Code's hooks pass one). Needs the agent's token in $FLEET_TOKEN.",
			`echo '{"hook_event_name":"Stop"}' | FLEET_TOKEN=fst_… fleetstate status`),
		cmd("hook", "the agents' PermissionRequest hook: ask the fleet, print its decision",
			"fleetstate hook permission [--timeout 2m]",
			"Reads a Claude Code or Codex permission request on standard input, raises it in the fleet at $FLEET_URL as the agent of $FLEET_TOKEN, and waits for the operator, a lead the fleet file allows, or a rule to decide; prints the decision in the shape the agent reads. Undecided within --timeout, or without a daemon, it prints nothing and exits 0, so the agent asks as usual: nothing is allowed by default. fleetstate up writes it into each agent's hooks.",
			`echo '{"tool_name":"Bash","tool_input":{"command":"make"}}' | FLEET_URL=http://127.0.0.1:7333 FLEET_TOKEN=fst_… fleetstate hook permission`),
		cmd("watch", "a live terminal view of the fleet that acts: answer, cancel, send, decide, merge",
			"fleetstate watch [--dir DIR | --url URL]",
			"Follows the daemon's event stream: members with status, readiness, queue length and the open turn's age; tickets with their state; the questions waiting for an answer; the recent events, from before it connected too. For the selected member with a work tree of its own it shows its branch, the commits it is ahead of and behind your branch, the files it changed with lines added and deleted, and what it has not committed, read again when the member's turn ends or a merge is done. Keys: up/down or j/k move, tab changes section, a answers the selected question, c cancels the selected ticket, s sends a task (detached) to a member, enter or v shows the selected permission request whole and y or n allows or denies it, m merges the selected member's branch into your checkout after y (refused with nothing changed, it says why: the files in conflict, the end of the check's output), w reads its work tree again, q quits. When the daemon goes, the members are marked stale until it is back. With --dir it finds the daemon from the state directory and uses its operator token; with --url it needs a lead's token in $FLEET_TOKEN. Its actions are calls of that lead or of the operator, as the daemon allows.",
			"fleetstate watch --dir .ai-fleet-state"),
		cmd("web", "print a one-time login URL for the daemon's dashboard",
			"fleetstate web [--dir DIR | --url URL]",
			"Asks the daemon for a one-time login code and prints the URL that opens the dashboard in a browser: the same live view as watch, with the transcript of each turn.",
			"fleetstate web --dir .ai-fleet-state"),
		cmd("demo", "run a daemon, a lead and three members over MCP and print every flow",
			"fleetstate demo [--keep]",
			"Starts a daemon on a loopback port with a temporary state directory (files on disk, no NATS), connects a lead and three members to it as separate MCP clients, and prints the transcript: a delegation with a shared file, a question answered by turn ID, and a detached task collected by its ticket.",
			"fleetstate demo"),
		cmd("version", "print the version", "fleetstate version (or fleetstate -v, --version)", "Prints the module version of this binary, from its build information.", "fleetstate version"),
		cmd("help", "show help for a command", "fleetstate help [COMMAND]", "Lists the commands, one line each, or shows one command's purpose, flags and an example.", "fleetstate help up"),
	}
}

// Lookup returns the help of the command name.
func Lookup(name string) (Command, bool) {
	for _, c := range Commands() {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// WriteList writes the list of commands, one line each, under a
// "commands:" heading: what --help and a mistyped command show.
func WriteList(w io.Writer) {
	fmt.Fprint(w, "commands:\n")
	for _, c := range Commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.Name, c.Summary)
	}
}

// WriteOverview writes what fleetstate --help prints: what the binary is,
// the list of commands, and where each command's own help is.
func WriteOverview(w io.Writer) {
	fmt.Fprint(w, "usage: fleetstate COMMAND [flags]: a shared store and a rendezvous for a fleet of AI agents, as an MCP server\n\n")
	WriteList(w)
	fmt.Fprint(w, "\nWithout a command, fleetstate runs mcp. fleetstate help CMD shows a command's flags.\n")
}

// NewFlagSet returns the flag set of a command, quiet: [Parse] prints help
// and errors itself.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args into fs. On -h or --help it prints the command's help
// on stdout and returns [flag.ErrHelp] (the command then does nothing, and
// the binary exits 0); a mistake is an error that names it and where the
// help is.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	return explain(fs, fs.Parse(args), stdout)
}

// explain turns the error of parsing fs: help printed on -h, or a mistake
// named with where the help is.
func explain(fs *flag.FlagSet, err error, stdout io.Writer) error {
	if errors.Is(err, flag.ErrHelp) {
		WriteCommand(stdout, fs)
		return flag.ErrHelp
	}
	if err != nil {
		return fmt.Errorf("%s: %v (see fleetstate %s --help)", fs.Name(), err, strings.Fields(fs.Name())[0])
	}
	return nil
}

// ParseInterspersed is [Parse] for commands whose arguments may come
// before their flags (fleetstate up FILE --dir DIR): it returns the
// arguments that are not flags, in order.
func ParseInterspersed(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	pos, err := cli.Interspersed(fs, args)
	return pos, explain(fs, err, stdout)
}

// WriteCommand writes a command's purpose, usage, flags (those of fs, or
// "(none)" for one without flags) and example.
func WriteCommand(w io.Writer, fs *flag.FlagSet) {
	if c, ok := Lookup(strings.Fields(fs.Name())[0]); ok {
		cli.WriteHelp(w, &c, fs)
		return
	}
	cli.WriteHelp(w, nil, fs)
}

// Unknown is the error of a mistyped command, with the nearest command's
// name when one is close.
func Unknown(name string) error {
	best, dist := "", 3
	for _, c := range Commands() {
		if d := editDistance(name, c.Name); d < dist {
			best, dist = c.Name, d
		}
	}
	if best != "" {
		return fmt.Errorf("unknown command %q: did you mean %q? (fleetstate --help lists the commands)", name, best)
	}
	return fmt.Errorf("unknown command %q (fleetstate --help lists the commands)", name)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ModuleVersion returns the module version of this binary from its build
// information: a release tag when installed with go install
// MODULE@VERSION, a pseudo-version when built from a clone with its VCS
// stamp, else "(devel)".
func ModuleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	if v == "(devel)" {
		// A build in a clone without a tag: the commit says which.
		rev, dirty := "", ""
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 12:
				rev = s.Value[:12]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
		if rev != "" {
			v += " " + rev + dirty
		}
	}
	return v
}

// GoVersion returns the Go version that built this binary, or "".
func GoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return ""
}
