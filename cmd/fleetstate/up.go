package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/fleetup"
)

// stateDirFlag resolves the state directory of --dir: the flag, else
// $FLEET_STATE_DIRECTORY, else .ai-fleet-state here; made absolute.
func stateDirFlag(dir string) (string, error) {
	if dir == "" {
		dir = fleetstate.DefaultDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state directory %s: %v", dir, err)
	}
	return abs, nil
}

// openStateDir opens the store of dir, creating it; an error names the
// directory, why, and what to do.
func openStateDir(dir string) (*fleetstate.Store, *auth.Tokens, error) {
	opts, err := storeOptions()
	if err != nil {
		return nil, nil, err
	}
	store, err := fleetstate.Open(nil, dir, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("state directory %s could not be opened or created: %v; choose another with --dir or $FLEET_STATE_DIRECTORY", dir, errors.Unwrap(err))
	}
	tokens, err := auth.OpenTokens(store)
	return store, tokens, err
}

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("up")
	addr := fs.String("addr", "", "address of the daemon up starts (default: the last one it used, else 127.0.0.1 on a free port)")
	bin := fs.String("fleetstate", "", "the fleetstate binary the daemon, the MCP proxies and the hooks run (default: this one)")
	notify := fs.String("notify", "", "the daemon's --notify command (default: the fleet file's notify)")
	fleetFile, dir, err := parseFleetArgs(fs, args, stdout, "name one fleet file")
	if err != nil {
		return err
	}
	// Everything is checked before anything starts or is written.
	ro, err := daemon.LoadRoster(fleetFile, dir)
	if err != nil {
		return err
	}
	ro.Notify = cmp.Or(*notify, ro.Notify)
	file, _ := filepath.Abs(fleetFile)
	fileSum := ""
	if data, err := os.ReadFile(file); err == nil {
		sum := sha256.Sum256(data)
		fileSum = hex.EncodeToString(sum[:])
	}
	if *bin == "" {
		if *bin, err = os.Executable(); err != nil {
			return fmt.Errorf("up: cannot find this binary (%v): name it with --fleetstate PATH", err)
		}
	}
	if err := fleetup.CheckCommands(ro); err != nil {
		return err
	}

	store, tokens, err := openStateDir(dir)
	if err != nil {
		return err
	}
	// The daemon, the tokens, each agent's environment and configuration,
	// and the panes; a failure leaves no process of this run behind.
	up, err := fleetup.Up(ctx, fleetup.UpConfig{Store: store, Tokens: tokens, Roster: ro, Bin: *bin, Addr: *addr, File: file, FileSum: fileSum, Stderr: stderr})
	if err != nil {
		return err
	}
	url, envPaths, wrote, started := up.URL, up.EnvPaths, up.Wrote, up.Started

	n := 0
	for _, a := range ro.Agents {
		if a.Command != nil {
			n++
		}
	}
	owner, _, _ := store.FleetOwner()
	fmt.Fprintf(stdout, "fleet up: %d agents, %d in tmux panes; daemon pid %d at %s (log %s)\n", len(ro.Agents), n, owner.PID, url, store.PrivatePath(fleetup.DaemonLog))
	if len(started) > 0 {
		fmt.Fprintf(stdout, "started:   %s\n", strings.Join(started, ", "))
	} else if n > 0 {
		fmt.Fprintf(stdout, "started:   nothing; every pane was running already\n")
	}
	for _, f := range wrote {
		fmt.Fprintf(stdout, "wrote:     %s\n", f)
	}
	for _, a := range ro.Agents {
		if a.Command == nil && a.Tmux == "" {
			fmt.Fprintf(stdout, "%s:   no command: run it where you like with its environment: . %s\n", a.Name, envPaths[a.Name])
		}
	}
	if n > 0 {
		fmt.Fprintf(stdout, "attach:    tmux -S %s attach -t %s\n", ro.TmuxSocket, ro.TmuxSession)
	}
	fmt.Fprintf(stdout, "dashboard: %s/dashboard/ (log in with the one-time URL of: fleetstate web --dir %s)\n", strings.TrimSuffix(url, "/mcp"), dir)
	fmt.Fprintf(stdout, "watch:     fleetstate watch --dir %s\n", dir)
	fmt.Fprintf(stdout, "stop:      fleetstate down %s --dir %s\n", fleetFile, dir)
	return nil
}

func runDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("down")
	trees := fs.Bool("worktrees", false, "also remove the members' work trees that hold nothing uncommitted (their branches stay)")
	fleetFile, dir, err := parseFleetArgs(fs, args, stdout, "name the fleet file")
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("down: no fleet to stop: state directory %s: %v", dir, errors.Unwrap(err))
	}
	store, _, err := openStateDir(dir)
	if err != nil {
		return err
	}
	rec, ok := fleetup.ReadRecord(store)
	if !ok {
		// Never brought up here: the file says where its panes would be.
		ro, err := daemon.LoadRoster(fleetFile, dir)
		if err != nil {
			return err
		}
		rec = fleetup.Record{Socket: ro.TmuxSocket, Session: ro.TmuxSession}
	}

	// The agents, then the daemon.
	stopped, err := fleetup.StopPanes(ctx, store, rec)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stopped %d agent(s) and the tmux session %s\n", stopped, rec.Session)

	// The daemon, if it is the one up started.
	if err := fleetup.StopDaemon(store, rec, stdout, stderr); err != nil {
		return err
	}
	rec.PID = 0
	if err := fleetup.WriteRecord(store, rec); err != nil {
		return fmt.Errorf("down: %s: %v", store.PrivatePath(fleetup.RecordFile), err)
	}
	if *trees {
		ro, err := daemon.LoadRoster(fleetFile, dir)
		if err != nil {
			return err
		}
		ro.RemoveWorktrees(ctx, func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) })
	}
	fmt.Fprintf(stdout, "the state directory %s stays; fleetstate up %s brings the fleet back\n", dir, fleetFile)
	return nil
}
