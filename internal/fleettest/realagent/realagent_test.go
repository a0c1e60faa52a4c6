package realagent_test

import (
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/fleetstate/fleetstate/internal/fleettest/realagent"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestInstall installs the CLIs from two parallel tests at once, as two
// test binaries may, and checks that both get the same working commands.
func TestInstall(t *testing.T) {
	type paths struct{ claude, codex string }
	var mu sync.Mutex
	var got []paths
	skipped := false
	t.Run("twice", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				defer func() {
					mu.Lock()
					defer mu.Unlock()
					skipped = skipped || t.Skipped()
				}()
				c, x := realagent.Install(t)
				mu.Lock()
				defer mu.Unlock()
				got = append(got, paths{c, x})
			})
		}
	})
	if skipped {
		t.Skip("the CLIs cannot be installed")
	}
	if len(got) != 2 {
		t.Fatalf("%d of 2 installs returned", len(got))
	}
	if got[0] != got[1] {
		t.Fatalf("two installs returned %v and %v", got[0], got[1])
	}
	for _, c := range []struct{ bin, want string }{
		{got[0].claude, "(Claude Code)"},
		{got[0].codex, "codex-cli "},
	} {
		out, err := exec.Command(c.bin, "--version").Output()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s --version = %q, %v; want a line with %q", c.bin, out, err, c.want)
		}
	}
}
