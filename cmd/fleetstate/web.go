package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/dashboard"
)

// runWeb prints a one-time login URL of the dashboard of a running daemon:
// the daemon of the state directory, asked with the operator token kept
// there, or the daemon at --url, asked with a lead's token.
func runWeb(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: fleetstate web [--dir DIR | --url URL]

Prints a one-time URL that logs a browser in to the dashboard of the
daemon serving the fleet: members, tickets, the last events and the
transcript of each turn, live. The URL works once, within 5 minutes; the
login lasts 12 hours or until the daemon stops.

With --dir (or neither flag), the daemon of that state directory is asked
with the operator token it keeps there. With --url, the daemon at that
URL is asked with a lead's token in $FLEET_TOKEN.

Example:
  fleetstate web --dir .ai-fleet-state

Flags:
`)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	url := fs.String("url", "", "the daemon's URL (as serve prints it); needs a lead's token in $FLEET_TOKEN")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("web: unexpected argument %q", fs.Arg(0))
	}
	if *dir != "" && *url != "" {
		return errors.New("web: give --dir or --url, not both")
	}
	var base, token string
	if *url != "" {
		if token = os.Getenv("FLEET_TOKEN"); token == "" {
			return errors.New("web: --url needs a lead's token in $FLEET_TOKEN (or use --dir on the daemon's machine)")
		}
		base = strings.TrimSuffix(strings.TrimRight(*url, "/"), "/mcp")
	} else {
		var err error
		if base, token, err = operatorOf(*dir); err != nil {
			return err
		}
	}
	login, err := loginCode(ctx, base, token)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, base+login)
	fmt.Fprintln(stderr, "fleetstate: open this URL in a browser on this machine; it works once, within 5 minutes")
	return nil
}

// operatorOf returns the base URL of the daemon serving dir's fleet and
// its operator token. It writes nothing: a directory that does not exist
// is an error, not a new store.
func operatorOf(dir string) (base, token string, err error) {
	if dir == "" {
		dir = fleetstate.DefaultDir()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if _, err := os.Stat(dir); err != nil {
		return "", "", fmt.Errorf("web: no state directory %s: start the daemon with fleetstate serve --dir %s, or give --dir", dir, dir)
	}
	store, err := fleetstate.Open(nil, dir, nil)
	if err != nil {
		return "", "", fmt.Errorf("web: %w", err)
	}
	o, owned, err := store.FleetOwner()
	if err != nil {
		return "", "", fmt.Errorf("web: %w", err)
	}
	if !owned {
		return "", "", fmt.Errorf("web: no daemon serves %s: start one with fleetstate serve --dir %s", dir, dir)
	}
	if !strings.HasPrefix(o.Addr, "http") {
		return "", "", fmt.Errorf("web: the fleet of %s is run by %s, which serves no dashboard: stop it and start fleetstate serve --dir %s", dir, o, dir)
	}
	if token, err = auth.OperatorToken(store); err != nil {
		return "", "", fmt.Errorf("web: %w", err)
	}
	return strings.TrimSuffix(o.Addr, "/mcp"), token, nil
}

// loginCode asks the daemon at base for a login code and returns the
// login path with it.
func loginCode(ctx context.Context, base, token string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+dashboard.Path+"code", nil)
	if err != nil {
		return "", fmt.Errorf("web: the URL %s: %v", base, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("web: no daemon at %s: start fleetstate serve (%v)", base, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return "", fmt.Errorf("web: the daemon at %s refused the token: use a lead's token in $FLEET_TOKEN, or --dir on the daemon's machine", base)
	case http.StatusNotFound:
		return "", fmt.Errorf("web: the daemon at %s serves no dashboard: is it fleetstate serve, and as new as this command?", base)
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("web: the daemon at %s answered %s: %s", base, resp.Status, strings.TrimSpace(string(msg)))
	}
	var out struct {
		Login string `json:"login"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&out); err != nil || !strings.HasPrefix(out.Login, dashboard.Path) {
		return "", fmt.Errorf("web: the daemon at %s sent no login code", base)
	}
	return out.Login, nil
}
