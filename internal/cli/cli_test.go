package cli

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseFlagsAnywhere(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		wait bool
	}{
		{[]string{"m1", "do it", "--wait"}, []string{"m1", "do it"}, true},
		{[]string{"--wait", "m1", "do it"}, []string{"m1", "do it"}, true},
		{[]string{"m1", "--wait", "do it"}, []string{"m1", "do it"}, true},
		{[]string{"m1", "--", "--wait"}, []string{"m1", "--wait"}, false},
		{[]string{"--", "-x", "-y"}, []string{"-x", "-y"}, false},
	} {
		fs := flag.NewFlagSet("send", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		wait := fs.Bool("wait", false, "")
		pos, err := Interspersed(fs, c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *wait != c.wait {
			t.Errorf("Interspersed(%q) = %q, wait %v, %v; want %q, wait %v", c.args, pos, *wait, err, c.pos, c.wait)
		}
	}
}
