package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/cmdhelp"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/leadcli"
)

// runIn runs the command line args in a fresh working directory without
// $FLEET_STATE_DIRECTORY, and fails the test if anything was written
// there: help, version and mistakes write nothing.
func runIn(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Chdir(t.TempDir())
	t.Setenv("FLEET_STATE_DIRECTORY", "")
	var out bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &out, nil)
	if ents, _ := os.ReadDir("."); len(ents) > 0 {
		t.Errorf("fleetstate %s wrote %s into the working directory", strings.Join(args, " "), ents[0].Name())
	}
	return out.String(), err
}

// dispatched returns the commands that run's switch dispatches, read
// from main.go's source, so that a command added there without a line in
// the list fails TestHelpListsEachCommandOnce.
func dispatched(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if ok && fn.Name.Name != "run" {
			return false
		}
		sw, ok := n.(*ast.SwitchStmt)
		if !ok || sw.Tag == nil || types.ExprString(sw.Tag) != "cmd" {
			return true
		}
		for _, c := range sw.Body.List {
			for _, e := range c.(*ast.CaseClause).List {
				cmds = append(cmds, strings.Trim(e.(*ast.BasicLit).Value, `"`))
			}
		}
		return false
	})
	if len(cmds) < 10 {
		t.Fatalf("found only %v in run's switch", cmds)
	}
	return cmds
}

// listed returns the commands of a "commands:" list, in order.
func listed(out string) []string {
	var cmds []string
	_, list, _ := strings.Cut(out, "commands:\n")
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		cmds = append(cmds, strings.Fields(line)[0])
	}
	return cmds
}

// TestHelpListsEachCommandOnce: --help is a short list, one line for each
// command the binary dispatches; a mistyped command lists the same; -v is
// --version.
func TestHelpListsEachCommandOnce(t *testing.T) {
	want := dispatched(t) // before runIn leaves the package's directory
	for _, c := range leadcli.Commands() {
		want = append(want, c.Name) // dispatched through leadcli.Has
	}
	out, err := runIn(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n > 30 {
		t.Errorf("fleetstate --help is %d lines; want at most 30:\n%s", n, out)
	}
	got := listed(out)
	sort.Strings(want)
	sorted := slices.Sorted(slices.Values(got))
	if !slices.Equal(sorted, want) {
		t.Errorf("fleetstate --help lists %v; want each of run's commands once: %v", got, want)
	}
	for _, args := range [][]string{{"help"}, {"-h"}} {
		if o, err := runIn(t, args...); err != nil || o != out {
			t.Errorf("fleetstate %s: %v; want what --help prints:\n%s", args[0], err, o)
		}
	}
	bogus, err := runIn(t, "bogus")
	if err == nil || !strings.Contains(err.Error(), `unknown command "bogus"`) {
		t.Errorf("fleetstate bogus: %v; want an unknown command", err)
	}
	if l := listed(bogus); !slices.Equal(l, got) {
		t.Errorf("fleetstate bogus lists %v; want the list of --help, %v", l, got)
	}
	v, err := runIn(t, "-v")
	if err != nil || !strings.HasPrefix(v, "fleetstate "+cmdhelp.ModuleVersion()) {
		t.Errorf("fleetstate -v: %q, %v; want the version", v, err)
	}
}

// TestCommandHelpHasEveryFlag: the full help of each command, which
// --help no longer prints, is in fleetstate help CMD.
func TestCommandHelpHasEveryFlag(t *testing.T) {
	var all strings.Builder
	for _, c := range cmdhelp.Commands() {
		out, err := runIn(t, "help", c.Name)
		if err != nil {
			t.Fatalf("fleetstate help %s: %v", c.Name, err)
		}
		if low := strings.ToLower(out); !strings.Contains(low, "usage: fleetstate") || !strings.Contains(low, "example:\n  ") {
			t.Errorf("fleetstate help %s lacks its usage or example:\n%s", c.Name, out)
		}
		all.WriteString(out)
	}
	for _, want := range []string{"-roster", "-send-timeout", "-ask-timeout", "-ready-timeout", "-max-sessions", "-connect", "-addr", "-dir", "-agent", "-role", "-keep", "-url"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no command's help has %q", want)
		}
	}
}

func TestCommandHelp(t *testing.T) {
	for _, cmd := range []string{"up", "down", "mcp", "serve", "token", "status", "demo", "watch"} {
		t.Run(cmd, func(t *testing.T) {
			for _, args := range [][]string{{"help", cmd}, {cmd, "--help"}, {cmd, "-h"}} {
				out, err := runIn(t, args...)
				if err != nil && !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("fleetstate %s: %v", strings.Join(args, " "), err)
				}
				for _, want := range []string{"usage: fleetstate", "flags:", "example:\n  "} {
					if !strings.Contains(out, want) {
						t.Errorf("fleetstate %s lacks %q:\n%s", strings.Join(args, " "), want, out)
					}
				}
			}
		})
	}
	// token's subcommands: their help writes nothing either.
	for _, args := range [][]string{{"token", "add", "--help"}, {"token", "--help"}} {
		if out, err := runIn(t, args...); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "-agent") {
			t.Errorf("fleetstate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		out, err := runIn(t, args...)
		if err != nil || !strings.HasPrefix(out, "fleetstate ") || !strings.Contains(out, cmdhelp.ModuleVersion()) {
			t.Errorf("fleetstate %s: %q, %v; want the module version %q", args[0], out, err, cmdhelp.ModuleVersion())
		}
	}
	// The built binary says the same.
	out, err := exec.Command(binary, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "fleetstate ") {
		t.Errorf("binary --version: %q, %v", out, err)
	}
}

// TestMistakesWriteNothing: a mistyped command, a stray argument, a
// missing flag are errors that say what to do, and create no state
// directory.
func TestMistakesWriteNothing(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sevre"}, `unknown command "sevre": did you mean "serve"?`},
		{[]string{"xyzzy"}, `unknown command "xyzzy"`},
		{[]string{"help", "uo"}, `did you mean "up"?`},
		{[]string{"mcp", "serve"}, `mcp: unexpected argument "serve"`},
		{[]string{"--dri", "x"}, "mcp: flag provided but not defined: -dri (see fleetstate mcp --help)"},
		{[]string{"serve", "--adr", "x"}, "flag provided but not defined: -adr"},
		{[]string{"token"}, "token: want add, revoke or list"},
		{[]string{"token", "ad"}, `unknown subcommand "ad"`},
		{[]string{"token", "add", "--role", "member"}, "token add: --agent is required"},
		{[]string{"token", "add", "--agent", "a"}, "token add: --role is required"},
		{[]string{"token", "add", "--agent", "a", "--role", "boss"}, `--role: "boss" is not lead or member`},
		{[]string{"token", "add", "--agent", "operator", "--role", "lead"}, `token add: --agent: mcpadapter: agent name "operator" is reserved`},
		{[]string{"token", "add", "--agent", "operator", "--role", "member"}, `agent name "operator" is reserved`},
		{[]string{"up"}, "up: name one fleet file"},
		{[]string{"up", "no-such-fleet.json"}, "no-such-fleet.json: no such file"},
		{[]string{"down"}, "down: name the fleet file"},
		{[]string{"down", "fleet.json"}, "down: no fleet to stop: state directory"},
		{[]string{"status", "idle"}, "$FLEET_TOKEN is not set"},
	} {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			t.Setenv("FLEET_TOKEN", "")
			_, err := runIn(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("fleetstate %s: %v; want an error with %q", strings.Join(c.args, " "), err, c.want)
			}
		})
	}
}

// TestStateDirectoryErrorNamesIt: a state directory that cannot be made
// is named, with the reason and the fix.
func TestStateDirectoryErrorNamesIt(t *testing.T) {
	blocker := t.TempDir() + "/file"
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := blocker + "/state"
	var out bytes.Buffer
	err := run(context.Background(), []string{"token", "list", "--dir", dir}, strings.NewReader(""), &out, &out, nil)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), "--dir") {
		t.Errorf("token list on %s: %v; want the directory, why, and --dir", dir, err)
	}
}

// TestConnectChecksIdentity: mcp --connect refuses an --agent or --role
// that contradicts its token, and says when no daemon answers.
func TestConnectChecksIdentity(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "m1": "member"})
	d := startDaemon(t, dir)
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"wrong agent", []string{"FLEET_TOKEN=" + tokens["m1"]}, []string{"--agent", "lead"}, "--agent lead (or $FLEET_AGENT) contradicts the token in $FLEET_TOKEN, which is member m1's"},
		{"wrong role", []string{"FLEET_TOKEN=" + tokens["m1"]}, []string{"--role", "lead"}, "--role lead (or $FLEET_ROLE) contradicts"},
		{"wrong env agent", []string{"FLEET_TOKEN=" + tokens["m1"], "FLEET_AGENT=m2"}, nil, "--agent m2 (or $FLEET_AGENT) contradicts"},
		{"revoked token", []string{"FLEET_TOKEN=fst_nothing"}, nil, "refuses the token in $FLEET_TOKEN"},
		{"no daemon", []string{"FLEET_TOKEN=" + tokens["m1"]}, []string{"--connect", "http://127.0.0.1:1/mcp"}, "no daemon at http://127.0.0.1:1/mcp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"mcp", "--connect", d.url}, c.args...)
			cmd := exec.Command(binary, args...)
			cmd.Env = append(os.Environ(), c.env...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("fleetstate %s: %v\n%s\nwant %q", strings.Join(args, " "), err, out, c.want)
			}
		})
	}
	// The token's own name and role are accepted.
	cs := connectStdio(t, []string{"FLEET_TOKEN=" + tokens["m1"], "FLEET_AGENT=m1", "FLEET_ROLE=member"}, "mcp", "--connect", d.url, "--agent", "m1")
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

// TestSyncWritesEnv: $FLEET_STATE_SYNC_WRITES sets the store's SyncWrites;
// a value that is not a boolean is refused, naming the variable, before
// anything is written.
func TestSyncWritesEnv(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"", false}, {"1", true}, {"true", true}, {"0", false}, {"false", false}} {
		t.Setenv(syncWritesEnv, tc.v)
		opts, err := storeOptions()
		if err != nil || (opts != nil && opts.SyncWrites) != tc.want {
			t.Errorf("%s=%q: options %+v, %v; want SyncWrites %v", syncWritesEnv, tc.v, opts, err, tc.want)
		}
	}
	t.Setenv(syncWritesEnv, "maybe")
	for _, args := range [][]string{{"mcp"}, {"serve", "--addr", "127.0.0.1:0"}} {
		_, err := runIn(t, args...)
		if err == nil || !strings.Contains(err.Error(), syncWritesEnv) {
			t.Errorf("fleetstate %s with %s=maybe: %v; want an error naming the variable", strings.Join(args, " "), syncWritesEnv, err)
		}
	}
}

// TestServeFlagsReachTheDaemon: serve's flags make the daemon's Config:
// run in process with --anonymous and --log-format json, the daemon logs
// where it serves as JSON, anonymous, and stops without an error when
// the command's context ends (SIGTERM's way).
func TestServeFlagsReachTheDaemon(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--dir", dir, "--anonymous", "--log-format", "json"}, strings.NewReader(""), &out, &out, nil)
	}()
	var serving map[string]any
	if !fleettest.Until(30*time.Second, 10*time.Millisecond, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "fleetstate: serving MCP" {
				serving = rec
				return true
			}
		}
		return false
	}) {
		cancel()
		t.Fatalf("no JSON log line of the daemon serving in %q", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve after its context ended: %v; want nil", err)
	}
	if serving["anonymous"] != true || serving["dir"] != dir || !strings.HasPrefix(serving["url"].(string), "http://127.0.0.1:") {
		t.Errorf("serving: %v; want anonymous, on %s, at 127.0.0.1", serving, dir)
	}
}
