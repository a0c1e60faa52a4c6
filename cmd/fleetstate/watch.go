package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/fleetup"
	"github.com/fleetstate/fleetstate/internal/fleetwatch"
)

// errNoDaemon says that no live process owns the state directory.
var errNoDaemon = errors.New("no daemon")

// runWatch runs the terminal view until q, ctrl-c or ctx's end.
func runWatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("watch")
	dir := fs.String("dir", "", "state directory of the daemon to watch (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	rawURL := fs.String("url", "", "the daemon's URL, watched as the lead whose token is in $FLEET_TOKEN")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("watch: unexpected argument %q (see fleetstate watch --help)", fs.Arg(0))
	}
	if *dir != "" && *rawURL != "" {
		return errors.New("watch: give --dir or --url, not both")
	}
	var (
		src     fleetwatch.Source
		explain func(error) error
		refused = "401: the token in $FLEET_TOKEN may not act"
	)
	if *rawURL != "" {
		base, err := watchBase(*rawURL)
		if err != nil {
			return err
		}
		token := os.Getenv("FLEET_TOKEN")
		if token == "" {
			return errors.New("watch: --url needs a lead's token in $FLEET_TOKEN")
		}
		src = func() (string, string, error) { return base, token, nil }
		explain = func(err error) error {
			var se *fleetwatch.StatusError
			switch {
			case errors.As(err, &se) && se.Code == http.StatusUnauthorized:
				return errors.New("401: --url needs a lead's token in $FLEET_TOKEN")
			case unreachable(err):
				return fmt.Errorf("no daemon at %s: start `fleetstate serve`", base)
			}
			return err
		}
	} else {
		d := *dir
		if d == "" {
			d = fleetstate.DefaultDir()
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		refused = "401: the daemon takes no actions with the operator token: act as a lead with FLEET_TOKEN=… fleetstate watch --url URL"
		noDaemon := fmt.Errorf("no daemon serves %s: start `%s`", d, fleetup.StartCommand(d))
		// A directory that no daemon ever served (no owner file in its
		// private folder) has no daemon now, and watching it must not
		// create anything there.
		if _, err := os.Stat(filepath.Join(d, ".fleetstate", "owner")); err != nil {
			return fmt.Errorf("watch: %w", noDaemon)
		}
		store, err := fleetstate.Open(nil, d, nil)
		if err != nil {
			return err
		}
		src = func() (string, string, error) {
			o, owned, err := store.FleetOwner()
			if err != nil {
				return "", "", err
			}
			if !owned || o.Addr == "" {
				return "", "", errNoDaemon
			}
			token, err := auth.OperatorToken(store)
			if err != nil {
				return "", "", err
			}
			base, err := watchBase(o.Addr)
			return base, token, err
		}
		explain = func(err error) error {
			var se *fleetwatch.StatusError
			switch {
			case errors.Is(err, errNoDaemon), unreachable(err):
				return noDaemon
			case errors.As(err, &se) && se.Code == http.StatusUnauthorized:
				return fmt.Errorf("401: the daemon refused the operator token in %s: restart it with `fleetstate serve --dir %s`", d, d)
			}
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := fleetwatch.Dial(ctx, src, fleetwatch.Options{Explain: explain})
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	msgs := make(chan tea.Msg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		stream.Run(ctx, msgs)
	}()
	p := tea.NewProgram(fleetwatch.New("", time.Now(), msgs).WithActions(fleetwatch.MCPActions{Source: src, Refused: refused}),
		tea.WithContext(ctx), tea.WithInput(stdin), tea.WithOutput(stdout))
	_, err = p.Run()
	cancel()
	wg.Wait()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // interrupted or terminated: a normal way out
	}
	return err
}

// watchBase is the base URL of a daemon given its MCP URL or its base.
func watchBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("watch: --url %q is not an http URL such as http://127.0.0.1:7333", raw)
	}
	return strings.TrimSuffix(strings.TrimRight(raw, "/"), "/mcp"), nil
}

// unreachable reports whether err says that nothing answered at the
// daemon's address.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
