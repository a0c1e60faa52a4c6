package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fleetstate/fleetstate/internal/cmdhelp"
)

// The flag parsing of every command, with its -h/--help (internal/cmdhelp).
func newFlagSet(name string) *flag.FlagSet { return cmdhelp.NewFlagSet(name) }
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	return cmdhelp.Parse(fs, args, stdout)
}
func parseInterspersed(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	return cmdhelp.ParseInterspersed(fs, args, stdout)
}

// parseFleetArgs adds --dir to fs, parses args (flags anywhere) and
// returns the one fleet file they name and the state directory; want says
// what is missing when no single file is named.
func parseFleetArgs(fs *flag.FlagSet, args []string, stdout io.Writer, want string) (fleetFile, dir string, err error) {
	dirFlag := fs.String("dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	pos, err := parseInterspersed(fs, args, stdout)
	if err != nil {
		return "", "", err
	}
	if len(pos) != 1 {
		return "", "", fmt.Errorf("%[1]s: %[2]s: fleetstate %[1]s FILE (see fleetstate %[1]s --help)", fs.Name(), want)
	}
	dir, err = stateDirFlag(*dirFlag)
	return pos[0], dir, err
}

// runHelp prints the list of commands, one line each, or, with a
// command's name, that command's help as its --help does.
func runHelp(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 1 {
		return errors.New("help: name one command (fleetstate help COMMAND)")
	}
	if len(args) == 0 {
		cmdhelp.WriteOverview(stdout)
		return nil
	}
	name := args[0]
	if _, ok := cmdhelp.Lookup(name); !ok {
		return cmdhelp.Unknown(name)
	}
	cmd := []string{name, "--help"}
	switch name {
	case "help":
		cmdhelp.WriteCommand(stdout, newFlagSet("help"))
		return nil
	case "token":
		cmd = []string{name, "list", "--help"}
	}
	var buf bytes.Buffer
	err := run(ctx, cmd, strings.NewReader(""), &buf, &buf, nil)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return err
	}
	_, err = stdout.Write(buf.Bytes())
	return err
}

func runVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintf(stdout, "fleetstate %s (protocol server %s %s)\n", cmdhelp.ModuleVersion(), version, cmdhelp.GoVersion())
	return nil
}
