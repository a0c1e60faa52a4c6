// Command peer compares fleetstate with the reference MCP filesystem server,
// @modelcontextprotocol/server-filesystem, driven by the same client (the
// official MCP Go SDK over stdio) doing the same work: write a file, then
// read it back, at 1 KiB and 64 KiB, one call at a time and 8 in flight.
//
// Run it from the repository root:
//
//	go run ./bench/peer
//
// It builds fleetstate (`fleetstate mcp` on a temporary state directory),
// installs the pinned peer with npm into the user's cache directory once,
// and prints a table of operations per second and their ratio. Without
// Node.js and npm it says so and exits without measuring.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The peer, pinned.
const (
	peerPkg     = "@modelcontextprotocol/server-filesystem"
	peerVersion = "2026.8.31"
)

// floorEnv makes the program a minimal MCP server instead (see serveFloor).
const floorEnv = "FLEETSTATE_PEER_FLOOR"

func main() {
	if os.Getenv(floorEnv) != "" {
		if err := serveFloor(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "peer floor:", err)
			os.Exit(1)
		}
		return
	}
	duration := flag.Duration("duration", 2*time.Second, "how long each measurement runs")
	rounds := flag.Int("rounds", 3, "measurements of each server and case, alternated; the median is reported")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the client to this file")
	sizes := flag.String("sizes", "1,64", "content sizes in KiB, comma-separated")
	inflight := flag.String("inflight", "1,8", "calls in flight, comma-separated")
	flag.Parse()
	sizeList, err1 := intList(*sizes)
	inflightList, err2 := intList(*inflight)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(2)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := run(*duration, *rounds, sizeList, inflightList); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(duration time.Duration, rounds int, sizes, inflights []int) error {
	node, nodeErr := exec.LookPath("node")
	npm, npmErr := exec.LookPath("npm")
	if nodeErr != nil || npmErr != nil {
		fmt.Println("peer: SKIPPED: Node.js and npm are needed to run " + peerPkg + "; install them (for example apt-get install nodejs npm) and run again.")
		return nil
	}
	if major := nodeMajor(node); major < 18 {
		fmt.Printf("peer: SKIPPED: %s needs Node.js 18 or later; %s is version %d.\n", peerPkg, node, major)
		return nil
	}
	peerJS, err := installPeer(npm)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "fleetstate-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "fleetstate")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetstate/fleetstate/cmd/fleetstate").CombinedOutput(); err != nil {
		return fmt.Errorf("build fleetstate: %v\n%s", err, out)
	}
	ctx := context.Background()

	fleetDir := filepath.Join(tmp, "fleet")
	fleet, err := connect(ctx, exec.Command(bin, "mcp", "--dir", fleetDir))
	if err != nil {
		return fmt.Errorf("start fleetstate: %w", err)
	}
	defer fleet.Close()
	if _, err := callText(ctx, fleet, "new_session", map[string]any{"name": "bench"}); err != nil {
		return err
	}
	peerDir := filepath.Join(tmp, "peer")
	if err := os.MkdirAll(peerDir, 0o700); err != nil {
		return err
	}
	peer, err := connect(ctx, exec.Command(node, peerJS, peerDir))
	if err != nil {
		return fmt.Errorf("start %s: %w", peerPkg, err)
	}
	defer peer.Close()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	floorCmd := exec.Command(self)
	floorCmd.Env = append(os.Environ(), floorEnv+"=1")
	floor, err := connect(ctx, floorCmd)
	if err != nil {
		return fmt.Errorf("start the floor server: %w", err)
	}
	defer floor.Close()

	fleetOp := func(ctx context.Context, cs *mcp.ClientSession, worker int, content string) error {
		text, err := callText(ctx, cs, "put", map[string]any{
			"agent_name": "bench", "file_name": fmt.Sprintf("w%d.txt", worker), "content": content, "overwrite": true})
		if err != nil {
			return err
		}
		id, err := jsonField(text, "id")
		if err != nil {
			return err
		}
		text, err = callText(ctx, cs, "get", map[string]any{"id": id})
		if err != nil {
			return err
		}
		got, err := jsonField(text, "content")
		if err != nil {
			return err
		}
		if got != content {
			return fmt.Errorf("read back %d bytes; wrote %d", len(got), len(content))
		}
		return nil
	}
	servers := []server{
		{name: "fleetstate", cs: fleet, writeRead: fleetOp},
		{name: "peer", cs: peer, writeRead: func(ctx context.Context, cs *mcp.ClientSession, worker int, content string) error {
			path := filepath.Join(peerDir, fmt.Sprintf("w%d.txt", worker))
			if _, err := callText(ctx, cs, "write_file", map[string]any{"path": path, "content": content}); err != nil {
				return err
			}
			got, err := callText(ctx, cs, "read_text_file", map[string]any{"path": path})
			if err != nil {
				return err
			}
			if got != content {
				return fmt.Errorf("peer: read back %d bytes; wrote %d", len(got), len(content))
			}
			return nil
		}},
		{name: "floor", cs: floor, writeRead: fleetOp},
	}

	fmt.Printf("write-then-read over stdio, client: official MCP Go SDK; %s@%s on %s; %d rounds of %v each, median\n\n",
		peerPkg, peerVersion, nodeVersion(node), rounds, duration)
	fmt.Println("| case | fleetstate ops/s | peer ops/s | ratio | floor ops/s | floor / peer |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, kib := range sizes {
		size := kib << 10
		content := strings.Repeat("fleetstate peer benchmark.\n", size/27+1)[:size]
		for _, inflight := range inflights {
			rates := make([][]float64, len(servers))
			for range rounds {
				for i, s := range servers {
					r, err := measure(ctx, s, content, inflight, duration)
					if err != nil {
						return fmt.Errorf("%s, %d KiB, %d in flight: %w", s.name, size>>10, inflight, err)
					}
					rates[i] = append(rates[i], r)
				}
			}
			f, p, fl := median(rates[0]), median(rates[1]), median(rates[2])
			fmt.Printf("| %d KiB, %d in flight | %.0f | %.0f | %.2f× | %.0f | %.2f× |\n", size>>10, inflight, f, p, f/p, fl, fl/p)
		}
	}
	return nil
}

// server is one MCP server under test and its write-then-read operation.
type server struct {
	name      string
	cs        *mcp.ClientSession
	writeRead func(ctx context.Context, cs *mcp.ClientSession, worker int, content string) error
}

// measure runs write-then-read with inflight workers for d, after a short
// warm-up, and returns operations per second.
func measure(ctx context.Context, s server, content string, inflight int, d time.Duration) (float64, error) {
	for w := range inflight {
		if err := s.writeRead(ctx, s.cs, w, content); err != nil {
			return 0, err
		}
	}
	var ops atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := s.writeRead(ctx, s.cs, w, content); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(ops.Load()) / time.Since(start).Seconds(), nil
}

func connect(ctx context.Context, cmd *exec.Cmd) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "fleetstate-peer-bench", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
}

// callText calls a tool and returns the text of its first content.
func callText(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if len(res.Content) == 0 {
		return "", fmt.Errorf("%s: no content", name)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("%s: content is %T, not text", name, res.Content[0])
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %s", name, text.Text)
	}
	return text.Text, nil
}

func jsonField(text, key string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return "", err
	}
	v, ok := m[key].(string)
	if !ok {
		return "", fmt.Errorf("result %.100q has no string %q", text, key)
	}
	return v, nil
}

// installPeer installs the pinned peer into the user's cache directory
// unless it is there already, and returns the path of its entry point.
func installPeer(npm string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "fleetstate-peer", "server-filesystem-"+peerVersion)
	js := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	if _, err := os.Stat(js); err == nil {
		return js, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "peer: installing %s@%s into %s\n", peerPkg, peerVersion, root)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", root, "--no-audit", "--no-fund", "--no-save", peerPkg+"@"+peerVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %v\n%s", peerPkg, peerVersion, err, out)
	}
	if _, err := os.Stat(js); err != nil {
		return "", errors.New("npm installed " + peerPkg + " but " + js + " is missing")
	}
	return js, nil
}

func nodeVersion(node string) string {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "node (version unknown)"
	}
	return "node " + strings.TrimSpace(string(out))
}

var majorRE = regexp.MustCompile(`^v(\d+)\.`)

func nodeMajor(node string) int {
	m := majorRE.FindStringSubmatch(strings.TrimPrefix(nodeVersion(node), "node "))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a list of positive numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
