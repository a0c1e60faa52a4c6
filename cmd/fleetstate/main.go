// Command fleetstate serves the fleetstate store and rendezvous as an MCP
// server.
//
// Usage:
//
//	fleetstate [mcp] [--dir DIR] [--agent NAME --role lead|member] [--connect URL]
//	fleetstate serve [--addr 127.0.0.1:7333] [--dir DIR] [--anonymous]
//	fleetstate token add --agent NAME --role lead|member [--dir DIR]
//	fleetstate token revoke --agent NAME [--dir DIR]
//	fleetstate token list [--dir DIR]
//	fleetstate status [--agent NAME] [--url URL] [idle|working|blocked]
//	fleetstate demo
//	fleetstate up FILE [--dir DIR] [--addr HOST:PORT]
//	fleetstate down FILE [--dir DIR]
//	fleetstate version
//	fleetstate help [COMMAND]
//
// mcp (the default) speaks MCP over standard input and output on the state
// directory, as fleet-state-mgr does; with --connect it forwards every tool
// to a daemon instead, authenticated by $FLEET_TOKEN. serve runs the daemon:
// streamable HTTP at /mcp, where a lead and its members, each with its own
// bearer token, meet in one rendezvous; with --roster it also reaches agents
// in tmux panes. status reports an agent's status from its hooks (with
// $FLEET_TOKEN; without a status argument it reads the hook's JSON event on
// standard input). up brings a whole fleet up from a fleet file (the
// roster with each agent's command): the daemon, tokens, tmux panes and
// each agent's MCP configuration; down stops it. Logs go to standard error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fleetstate/fleetstate/internal/cmdhelp"
	"github.com/fleetstate/fleetstate/internal/hookcmd"
	"github.com/fleetstate/fleetstate/internal/leadcli"
)

// version is the server version reported to MCP clients.
const version = "0.1.0"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, log)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // the help asked for is printed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetstate:", strings.TrimPrefix(err.Error(), "fleetstate: "))
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	cmd := "mcp"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			return runHelp(ctx, args[1:], stdout)
		case "-v", "-version", "--version":
			return runVersion(args[1:], stdout)
		}
	}
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "mcp":
		return runMCP(ctx, args, stdin, stdout, stderr, log)
	case "serve":
		return runServe(ctx, args, stdout, stderr, log)
	case "token":
		return runToken(args, stdout, stderr)
	case "nats":
		return runNATS(ctx, args, stdout, stderr, log)
	case "status":
		return runStatus(ctx, args, stdin, stdout, stderr)
	case "hook":
		return hookcmd.Run(ctx, args, hookcmd.Env{URL: os.Getenv("FLEET_URL"), Token: os.Getenv("FLEET_TOKEN")}, stdin, stdout, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "up":
		return runUp(ctx, args, stdout, stderr)
	case "down":
		return runDown(ctx, args, stdout, stderr)
	case "version":
		return runVersion(args, stdout)
	case "watch":
		return runWatch(ctx, args, stdin, stdout, stderr)
	case "web":
		return runWeb(ctx, args, stdout, stderr)
	case "help":
		return runHelp(ctx, args, stdout)
	}
	if leadcli.Has(cmd) { // send, poll, ack, answer, cancel, members
		return leadcli.Run(ctx, cmd, args, stdin, stdout, stderr)
	}
	cmdhelp.WriteList(stderr) // every command here has its line in cmdhelp.Commands
	return cmdhelp.Unknown(cmd)
}
