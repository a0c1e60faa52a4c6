package fleetnats_test

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/natstest"
)

// Bounds of the rendezvous suites on JetStream.
const (
	// rendezvousSuitesTimeout bounds the child go test: building the root
	// package's tests (about a minute on 2 cores, less when cached) and
	// running the suites.
	rendezvousSuitesTimeout = 10 * time.Minute
	// rendezvousChecks is the number of runs of the state machine on
	// JetStream, as many as on files (rapid's default): on an embedded
	// server each run, which makes and deletes a fleet's streams, takes
	// tens of milliseconds.
	rendezvousChecks = 100
)

// rendezvousSuites are the root package's files of the rendezvous's flow
// and failure suites: every test in them runs on JetStream here, the same
// tests that run on a state directory, or says why it is only for files.
var rendezvousSuites = []string{
	"rendezvous_test.go",
	"rendezvous_owner_test.go",
	"rendezvous_port_test.go",
	"rendezvous_disconnect_test.go",
	"rendezvous_delegate_test.go",
	"rendezvous_rapid_test.go",
	"rendezvous_held_test.go",
	"events_test.go",
}

// TestRendezvousSuitesNATS runs the root package's rendezvous suites,
// the rapid state machine included, on JetStream: on a server started
// here, with FLEETSTATE_TEST_BACKEND=nats and FLEETSTATE_TEST_NATS_URL, in
// a child go test, so that the root package's test binary never links the
// server. Each test's fleet is a fresh one on the server (see the root's
// rendezvous_home_test.go).
func TestRendezvousSuitesNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the root package's tests")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to run the suites with: %v", err)
	}
	names := suiteTests(t)
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), rendezvousSuitesTimeout)
	defer cancel()
	args := []string{"test", "-count=1", "-v",
		"-timeout", rendezvousSuitesTimeout.String(),
		"-run", "^(" + strings.Join(names, "|") + ")$",
	}
	if raceEnabled {
		args = append(args, "-race")
	}
	// The package before the rapid flags: go test takes the first flag it
	// does not know, and all after it, as the test binary's. No fail
	// file: it would be replayed by the default run, on files; a failure
	// prints its seed.
	args = append(args, "github.com/fleetstate/fleetstate",
		"-rapid.checks="+strconv.Itoa(rendezvousChecks), "-rapid.nofailfile")
	cmd := exec.CommandContext(ctx, goBin, args...)
	// GOTOOLCHAIN, GOFLAGS and the caches come with the environment.
	cmd.Env = append(os.Environ(),
		"FLEETSTATE_TEST_BACKEND=nats",
		"FLEETSTATE_TEST_NATS_URL="+srv.URL())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the rendezvous suites on JetStream failed: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
	// The suites ran, on JetStream: every test passed or was skipped as
	// one only for files, and the state machine ran its checks.
	if !bytes.Contains(out, []byte("rendezvous suites on JetStream at "+srv.URL())) {
		t.Errorf("the suites did not run on JetStream:\n%s", out)
	}
	for _, name := range names {
		pass := regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `)
		skip := regexp.MustCompile(`(?m)^=== RUN   ` + name + `\n +\S+_test\.go:\d+: file backend only: .*\n--- SKIP: ` + name + ` `)
		if !pass.Match(out) && !skip.Match(out) {
			t.Errorf("%s neither passed nor was skipped as a test only for files:\n%s", name, out)
		}
	}
	if !bytes.Contains(out, []byte("[rapid] OK, passed "+strconv.Itoa(rendezvousChecks)+" tests")) {
		t.Errorf("the state machine did not run its %d checks:\n%s", rendezvousChecks, out)
	}
}

// suiteTests returns the names of the tests in the root's suite files.
func suiteTests(t *testing.T) []string {
	t.Helper()
	var names []string
	fset := token.NewFileSet()
	for _, file := range rendezvousSuites {
		f, err := parser.ParseFile(fset, filepath.Join("..", file), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("reading the suite %s: %v", file, err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				names = append(names, fn.Name.Name)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no tests in the rendezvous suites")
	}
	return names
}
