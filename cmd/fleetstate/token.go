package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

func runToken(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("token: want add, revoke or list")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	agent := fs.String("agent", "", "the agent's name")
	role := fs.String("role", "", "lead or member")
	if err := fs.Parse(args); err != nil {
		return err
	}
	store, err := fleetstate.Open(nil, *dir, nil)
	if err != nil {
		return err
	}
	tokens, err := mcpadapter.OpenTokens(store)
	if err != nil {
		return err
	}
	switch sub {
	case "add":
		r, err := mcpadapter.ParseRole(*role)
		if err != nil {
			return err
		}
		token, err := tokens.Add(*agent, r)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, token)
		fmt.Fprintf(stderr, "fleetstate: token for %s %s added; it is shown only this once\n", r, *agent)
		return nil
	case "revoke":
		n, err := tokens.Revoke(*agent)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "fleetstate: revoked %d token(s) of %s\n", n, *agent)
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
