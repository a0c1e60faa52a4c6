package fleettest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The environment variables that turn a skip into a failure. .ci/run sets
// them all, so that in CI a test that needs tmux, a tmpfs, npm, Chromium
// or the real coding-agent CLIs runs and never skips; on a developer's
// machine without them the test skips and says why.
const (
	RequireTmux        = "FLEETSTATE_REQUIRE_TMUX"
	RequireTmpfs       = "FLEETSTATE_REQUIRE_TMPFS"
	RequireConformance = "FLEETSTATE_REQUIRE_CONFORMANCE"
	RequireChromium    = "FLEETSTATE_REQUIRE_CHROMIUM"
	RequireAgents      = "FLEETSTATE_REQUIRE_AGENTS"
)

// Unavailable ends tb because something it needs from the machine is
// missing: a failure if the environment variable env is set (to anything
// but the empty string), a skip otherwise. The message says why, and for
// a failure, which variable made it one.
func Unavailable(tb testing.TB, env, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(env) != "" {
		tb.Fatalf("%s, and %s is set (as .ci/run sets it): the test must run", msg, env)
	}
	tb.Skip(msg + "; skipped (set " + env + "=1 to make this a failure)")
}

// NeedCommand returns the path of the command name, and ends tb through
// [Unavailable] with env if it is not installed.
func NeedCommand(tb testing.TB, env, name, why string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Unavailable(tb, env, "%s is not installed: %s", name, why)
	}
	return path
}

// TmuxSocket returns the path of a private tmux socket, in a new directory
// short enough for a socket path, for `tmux -S`. The test's cleanup kills
// the server on it, if one started, and removes the directory. Where tmux
// is missing it ends tb through [Unavailable] with [RequireTmux].
func TmuxSocket(tb testing.TB) string {
	tb.Helper()
	NeedCommand(tb, RequireTmux, "tmux", "the test needs real tmux panes")
	dir, err := os.MkdirTemp("", "fleettmux-")
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	tb.Cleanup(func() {
		// The server is killed even where the test never started one:
		// kill-server then fails with "no server running", harmlessly.
		_ = exec.Command("tmux", "-S", sock, "kill-server").Run()
		_ = os.RemoveAll(dir)
	})
	return sock
}

// MountTmpfs mounts a tmpfs of size bytes on a new directory and returns
// it; the test's cleanup unmounts it. Where mounting is not possible (not
// root, no mount command, a container without the capability) it ends tb
// through [Unavailable] with [RequireTmpfs]: CI machines of this project
// run as root and can mount.
func MountTmpfs(tb testing.TB, size int) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		Unavailable(tb, RequireTmpfs, "a real full file system needs root to mount a small tmpfs")
	}
	dir := tb.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		Unavailable(tb, RequireTmpfs, "cannot mount a tmpfs of %d bytes on %s: %v: %s", size, dir, err, bytes.TrimSpace(out))
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
