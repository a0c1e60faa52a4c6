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
//
// mcp (the default) speaks MCP over standard input and output on the state
// directory, as fleet-state-mgr does; with --connect it forwards every tool
// to a daemon instead, authenticated by $FLEET_TOKEN. serve runs the daemon:
// streamable HTTP at /mcp, where a lead and its members, each with its own
// bearer token, meet in one rendezvous; with --roster it also reaches agents
// in tmux panes. status reports an agent's status from its hooks (with
// $FLEET_TOKEN; without a status argument it reads the hook's JSON event on
// standard input). Logs go to standard error.
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
)

// version is the server version reported to MCP clients.
const version = "0.1.0"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, log)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetstate:", strings.TrimPrefix(err.Error(), "fleetstate: "))
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	cmd := "mcp"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "mcp":
		return runMCP(ctx, args, stdin, stdout, stderr, log)
	case "serve":
		return runServe(ctx, args, stderr, log)
	case "token":
		return runToken(args, stdout, stderr)
	case "status":
		return runStatus(ctx, args, stdin, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "web":
		return runWeb(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

const usage = `usage:
  fleetstate [mcp] [--dir DIR] [--agent NAME --role lead|member] [--connect URL]
  fleetstate serve [--addr 127.0.0.1:7333] [--dir DIR] [--anonymous]
  fleetstate token add --agent NAME --role lead|member [--dir DIR]
  fleetstate token revoke --agent NAME [--dir DIR]
  fleetstate token list [--dir DIR]
  fleetstate status [--agent NAME] [--url URL] [idle|working|blocked]   (hook JSON on stdin without a status)
  fleetstate demo
`
