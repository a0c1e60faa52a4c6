// Package cli holds what the commands of the fleetstate binary share for
// their command lines: the description of a command for its help, the
// parsing of flags and arguments in any order, and the help page itself.
// It is a leaf: the binary's list of commands (internal/cmdhelp) and the
// lead commands (internal/leadcli) both stand on it.
package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Command describes one command for the binary's help.
type Command struct {
	Name    string // the command: fleetstate NAME
	Summary string // one line, for the list of commands
	Usage   string // the command line, with its arguments and flags
	About   string // what it does, a paragraph
	Example string // one command line
}

// Interspersed parses args into fs with flags and arguments in any order
// (fleetstate up FILE --dir DIR) and returns the arguments that are not
// flags, in order; after "--" nothing is a flag. Its error is fs.Parse's,
// [flag.ErrHelp] for -h or --help.
func Interspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// WriteHelp writes a command's help page: c's purpose, usage and
// paragraph, the flags of fs ("(none)" without any), and c's example. A
// nil c writes the flags alone.
func WriteHelp(w io.Writer, c *Command, fs *flag.FlagSet) {
	if c != nil {
		fmt.Fprintf(w, "%s\n\nusage: %s\n\n%s\n", c.Summary, c.Usage, Wrap(c.About, 76))
	}
	fmt.Fprintln(w, "\nflags:")
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if c != nil {
		fmt.Fprintf(w, "\nexample:\n  %s\n", c.Example)
	}
}

// Wrap folds text into lines of at most width bytes, at spaces.
func Wrap(text string, width int) string {
	var b strings.Builder
	line := 0
	for _, word := range strings.Fields(text) {
		if line > 0 && line+1+len(word) > width {
			b.WriteByte('\n')
			line = 0
		} else if line > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}
