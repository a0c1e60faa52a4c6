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
