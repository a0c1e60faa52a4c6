// Package realagent is the part of the test kit that installs the real
// coding-agent CLIs, Claude Code and Codex, at the versions the project
// pins, and prepares a user's home for them pointed at a scripted model
// server (package modelserver), so that a test runs what a user runs.
//
// # Versions
//
// [ClaudeCodePackage] and [CodexPackage] name the pinned npm packages,
// in this one place. [Install] installs both with npm into the user's
// cache directory, under fleetstate-agents/ in a folder named by their
// versions, once: later runs, and other test binaries running at the
// same time, find it there (an exclusive lock on a file beside it
// serializes the installs; a folder is renamed into place only once
// complete). Where npm is missing or cannot install them, the test is
// skipped and says why, unless FLEETSTATE_REQUIRE_AGENTS
// ([fleettest.RequireAgents]) is set, as .ci/run sets it; then it fails.
//
// To run the same tests against the newest versions on npm, set
// FLEETSTATE_AGENTS_LATEST=1 ([LatestEnv]): Install then asks npm for
// the latest version of each package and installs those, beside the
// pinned ones. To move the pins, change the two constants, run the tests
// that use the CLIs (go test ./internal/fleettest/... and the packages
// that drive agents in tmux), and refresh their golden files with the
// new screens.
//
// # Homes
//
// [ClaudeHome] and [CodexHome] write the configuration a person who has
// used the CLI before has in their home, pointed at the model server:
// no onboarding, no login, no update check. They grant no folder trust:
// that is what fleetstate writes when it starts a fleet. [Env] builds a
// child's environment without the variables of the machine's own
// agents, so that a CLI run by a test talks only to 127.0.0.1.
//
// # Processes
//
// [Start] runs a CLI in its own process group and, at the test's end,
// kills that group and any process left behind that carries the test's
// home in its environment, such as Codex's app-server daemons, whose
// parent is then 1.
package realagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"golang.org/x/sys/unix"
)

// The npm packages of the CLIs the tests run, pinned to the versions
// whose screens internal/agent knows.
const (
	ClaudeCodePackage = "@anthropic-ai/claude-code@" + agent.ClaudeCodeVersion
	CodexPackage      = "@openai/codex@" + agent.CodexVersion
)

// LatestEnv, set to anything but the empty string, makes [Install]
// install the latest version of each CLI on npm instead of the pinned one.
const LatestEnv = "FLEETSTATE_AGENTS_LATEST"

// Bounds of the installation.
const (
	// installTimeout bounds one npm install of both CLIs, about 800 MB;
	// it takes 13 s with a local registry mirror.
	installTimeout = 10 * time.Minute
	// lockTimeout bounds the wait for another process's install.
	lockTimeout = installTimeout + time.Minute
	// lockPoll is how often a waiting installer tries the lock again.
	lockPoll = 100 * time.Millisecond
	// commandTimeout bounds a --version or npm view.
	commandTimeout = time.Minute
)

// Install returns the paths of the claude and codex commands of the
// pinned versions (or the latest, where [LatestEnv] is set), installing
// them first where the cache does not hold them yet. Where they cannot be
// had it ends tb through [fleettest.Unavailable] with
// [fleettest.RequireAgents].
func Install(tb testing.TB) (claude, codex string) {
	tb.Helper()
	npm := fleettest.NeedCommand(tb, fleettest.RequireAgents, "npm", "the tests install the real coding-agent CLIs with npm")
	pkgs := []string{ClaudeCodePackage, CodexPackage}
	if os.Getenv(LatestEnv) != "" {
		for i, p := range pkgs {
			pkgs[i] = latest(tb, npm, p)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	parent := filepath.Join(cache, "fleetstate-agents")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(parent, "claude-code-"+version(pkgs[0])+"_codex-"+version(pkgs[1]))
	unlock := lock(tb, dir+".lock")
	defer unlock()

	claude = filepath.Join(dir, "node_modules", ".bin", "claude")
	codex = filepath.Join(dir, "node_modules", ".bin", "codex")
	if installed(claude, version(pkgs[0])) == nil && installed(codex, version(pkgs[1])) == nil {
		return claude, codex
	}
	tmp, err := os.MkdirTemp(parent, ".install-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	start := time.Now()
	args := append([]string{"install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save", "--no-update-notifier"}, pkgs...)
	if out, err := exec.CommandContext(ctx, npm, args...).CombinedOutput(); err != nil {
		fleettest.Unavailable(tb, fleettest.RequireAgents, "npm install %s: %v: %s", strings.Join(pkgs, " "), err, tail(out))
	}
	for i, bin := range []string{"claude", "codex"} {
		if err := installed(filepath.Join(tmp, "node_modules", ".bin", bin), version(pkgs[i])); err != nil {
			tb.Fatalf("npm installed %s, but: %v", pkgs[i], err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("installed %s in %s (%v)", strings.Join(pkgs, " "), dir, time.Since(start).Round(time.Second))
	return claude, codex
}

// version returns the version of a package spec name@version.
func version(pkg string) string { return pkg[strings.LastIndex(pkg, "@")+1:] }

// latest returns the spec of the latest version of pkg on npm.
func latest(tb testing.TB, npm, pkg string) string {
	tb.Helper()
	name := pkg[:strings.LastIndex(pkg, "@")]
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, npm, "view", name+"@latest", "version").CombinedOutput()
	v := string(bytes.TrimSpace(out))
	if err != nil || v == "" || strings.ContainsAny(v, " \n") {
		fleettest.Unavailable(tb, fleettest.RequireAgents, "npm view %s@latest version: %v: %s", name, err, tail(out))
	}
	return name + "@" + v
}

// installed reports why the command bin is not the CLI of version v, or
// nil where it is.
func installed(bin, v string) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = Env()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", bin, err)
	}
	if !strings.Contains(string(out), v) {
		return fmt.Errorf("%s --version printed %q, not version %s", bin, bytes.TrimSpace(out), v)
	}
	return nil
}

// lock takes an exclusive lock on the file path, which other processes
// installing the same versions take too, and returns its release. It
// fails tb where another process holds it past lockTimeout.
func lock(tb testing.TB, path string) (unlock func()) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	var lerr error
	if !fleettest.Until(lockTimeout, lockPoll, func() bool {
		lerr = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		return !errors.Is(lerr, unix.EWOULDBLOCK)
	}) {
		f.Close()
		tb.Fatalf("another process has held %s for %v", path, lockTimeout)
	}
	if lerr != nil {
		f.Close()
		tb.Fatalf("flock %s: %v", path, lerr)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
}

// tail returns the last lines of a command's output, for a message.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}
