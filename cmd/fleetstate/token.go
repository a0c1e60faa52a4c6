package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/spf13/afero"
)

// tokenConfig is the key of the tokens in the fleet's configuration.
const tokenConfig = "tokens"

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
	if nf.URL != "" {
		if *dir != "" {
			return fmt.Errorf("token %s: --dir and --nats: a fleet on NATS keeps its tokens there; give one or the other", sub)
		}
		if err := nf.check(false); err != nil {
			return err
		}
		// The command may run more than once (see natsTokens): what it
		// prints is kept, and printed from its last run only.
		var out, errOut bytes.Buffer
		err := natsTokens(&nf.NATSConfig, sub != "list", func(tokens *mcpadapter.Tokens) error {
			out.Reset()
			errOut.Reset()
			return tokenCommand(sub, tokens, *agent, r, &out, &errOut)
		})
		if err != nil {
			return err
		}
		_, _ = stdout.Write(out.Bytes())
		_, _ = stderr.Write(errOut.Bytes())
		return nil
	}
	d, err := stateDirFlag(*dir)
	if err != nil {
		return err
	}
	_, tokens, err := openStateDir(d)
	if err != nil {
		return err
	}
	return tokenCommand(sub, tokens, *agent, r, stdout, stderr)
}

// tokenCommand runs the token subcommand sub on tokens.
func tokenCommand(sub string, tokens *mcpadapter.Tokens, agent string, r mcpadapter.Role, stdout, stderr io.Writer) error {
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

// natsTokens runs fn on the tokens of the fleet on NATS. With write, what
// fn changed is written back in one compare-and-swap: fn runs again if
// another process changed the tokens meanwhile.
func natsTokens(n *daemon.NATSConfig, write bool, fn func(*mcpadapter.Tokens) error) error {
	ctx := context.Background()
	f, err := n.Connect(ctx, slog.New(slog.DiscardHandler), "fleetstate token")
	if err != nil {
		return err
	}
	defer f.Close()
	if !write {
		data, err := f.ReadConfig(ctx, tokenConfig)
		if err != nil {
			return err
		}
		_, err = tokensOf(data, fn)
		return err
	}
	return f.UpdateConfig(ctx, tokenConfig, func(old []byte) ([]byte, error) {
		return tokensOf(old, fn)
	})
}

// tokensOf runs fn on the token file data and returns the file after it.
func tokensOf(old []byte, fn func(*mcpadapter.Tokens) error) ([]byte, error) {
	// The token file's code works on a store: one in memory, for this run.
	store, err := fleetstate.Open(afero.NewMemMapFs(), "/fleet", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		return nil, err
	}
	path := mcpadapter.TokenPath(store)
	if old != nil {
		if err := afero.WriteFile(store.Fs(), path, old, 0o600); err != nil {
			return nil, err
		}
	}
	tokens, err := mcpadapter.OpenTokens(store)
	if err != nil {
		return nil, err
	}
	if err := fn(tokens); err != nil {
		return nil, err
	}
	data, err := afero.ReadFile(store.Fs(), path)
	if errors.Is(err, os.ErrNotExist) {
		return old, nil
	}
	return data, err
}
