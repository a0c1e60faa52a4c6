package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

func runToken(args []string, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := newFlagSet("token " + sub)
	dir := fs.String("dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	agent := fs.String("agent", "", "the agent's name (add, revoke)")
	role := fs.String("role", "", "lead or member (add)")
	var nf natsFlags
	nf.add(fs, false)
	// Everything is checked before the state directory is opened, which
	// creates it: a mistake writes nothing.
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch sub {
	case "add", "revoke", "list":
	case "":
		return errors.New("token: want add, revoke or list (see fleetstate token --help)")
	default:
		return fmt.Errorf("token: unknown subcommand %q: want add, revoke or list", sub)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("token %s: unexpected argument %q", sub, fs.Arg(0))
	}
	var r mcpadapter.Role
	if sub == "add" || sub == "revoke" {
		if *agent == "" {
			return fmt.Errorf("token %s: --agent is required", sub)
		}
		if err := fleetstate.ValidateAgentName(*agent); err != nil {
			return fmt.Errorf("token %s: --agent: %v", sub, err)
		}
		if sub == "add" && *agent == mcpadapter.OperatorAgent {
			return fmt.Errorf("token add: --agent: %w", mcpadapter.ErrReservedAgent)
		}
	}
	if sub == "add" {
		if *role == "" {
			return errors.New("token add: --role is required: lead or member")
		}
		var err error
		if r, err = mcpadapter.ParseRole(*role); err != nil {
			return fmt.Errorf("token add: --role: %q is not lead or member", *role)
		}
	}
	var tokens *auth.Tokens
	if nf.URL != "" {
		if *dir != "" {
			return fmt.Errorf("token %s: --dir and --nats: a fleet on NATS keeps its tokens there; give one or the other", sub)
		}
		if err := nf.check(false); err != nil {
			return err
		}
		t, closeTokens, err := nf.OpenTokens(context.Background())
		if err != nil {
			return err
		}
		defer closeTokens()
		tokens = t
	} else {
		d, err := stateDirFlag(*dir)
		if err != nil {
			return err
		}
		if _, tokens, err = openStateDir(d); err != nil {
			return err
		}
	}
	return tokenCommand(sub, tokens, *agent, r, stdout, stderr)
}

// tokenCommand runs the token subcommand sub on tokens.
func tokenCommand(sub string, tokens *auth.Tokens, agent string, r mcpadapter.Role, stdout, stderr io.Writer) error {
	switch sub {
	case "add":
		token, err := tokens.Add(agent, r)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, token)
		fmt.Fprintf(stderr, "fleetstate: token for %s %s added; it is shown only this once\n", r, agent)
		return nil
	case "revoke":
		n, err := tokens.Revoke(agent)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "fleetstate: revoked %d token(s) of %s\n", n, agent)
		return nil
	case "list":
		for _, r := range []mcpadapter.Role{mcpadapter.RoleLead, mcpadapter.RoleMember} {
			for _, a := range tokens.Agents(r) {
				fmt.Fprintf(stdout, "%s\t%s\n", a, r)
			}
		}
		return nil
	}
	return fmt.Errorf("token: unknown subcommand %q", sub)
}
