// Command peer compares fleetstate with the reference MCP filesystem server,
// @modelcontextprotocol/server-filesystem, and with a floor server that does
// nothing but answer (see serveFloor), each driven by the same clients over
// stdio doing the same work: write a file, then read it back and check it,
// at 1 KiB and 64 KiB, one call at a time and 8 in flight, each write
// either a create (a new name, fleetstate's put with overwrite false) or an
// overwrite (the worker's one name, put with overwrite true).
//
// There are two clients, the official MCP SDKs for Go and for TypeScript;
// -client picks them. Run it from the repository root:
//
//	go run ./bench/peer
//	go run ./bench/peer -client=ts -rounds 3 -duration 2s
//	go run ./bench/peer -client=ts -base ../main   # this tree against another
//
// It builds fleetstate (`fleetstate mcp` on a temporary state directory),
// installs the pinned peer and the pinned TypeScript SDK with npm into the
// user's cache directory once, and prints, for each client, a table of
// operations per second and their ratios, and one of per-call latencies.
// Every measurement of every client and server is repeated -rounds times,
// alternated, and the median is reported. Without Node.js and npm it says
// so and exits without measuring.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/bench/internal/fleetbin"
)

// The peer, pinned.
const (
	peerPkg     = "@modelcontextprotocol/server-filesystem"
	peerVersion = "2026.8.31"
)

// floorEnv makes the program a minimal MCP server instead (see serveFloor).
const floorEnv = "FLEETSTATE_PEER_FLOOR"

// The servers, in the order they are measured and printed. base is
// fleetstate built from another tree (-base), measured only when named.
var serverNames = []string{"fleetstate", "base", "peer", "floor"}

func main() {
	if os.Getenv(floorEnv) != "" {
		if err := serveFloor(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "peer floor:", err)
			os.Exit(1)
		}
		return
	}
	duration := flag.Duration("duration", 2*time.Second, "how long each measurement runs")
	rounds := flag.Int("rounds", 3, "measurements of each client, server and case, alternated; the median is reported")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the harness (and the Go client) to this file")
	sizes := flag.String("sizes", "1,64", "content sizes in KiB, comma-separated")
	inflight := flag.String("inflight", "1,8", "calls in flight, comma-separated")
	writes := flag.String("write", "create,overwrite", "writes, comma-separated: create (a new file each time), overwrite (each worker's one file)")
	clients := flag.String("client", "go,ts", "clients, comma-separated: go (the MCP Go SDK), ts (the MCP TypeScript SDK)")
	servers := flag.String("server", "fleetstate,peer,floor", "servers, comma-separated: "+strings.Join(serverNames, ", ")+"; -base adds base")
	baseDir := flag.String("base", "", "a directory holding another tree of this module (a git worktree, say): its fleetstate is measured too, as server base, alternated with the others")
	flag.Parse()
	if *baseDir != "" && !strings.Contains(*servers, "base") {
		*servers += ",base"
	}
	sizeList, err1 := intList(*sizes)
	inflightList, err2 := intList(*inflight)
	clientList, err3 := nameList(*clients, []string{"go", "ts"})
	serverList, err4 := nameList(*servers, serverNames)
	writeList, err6 := nameList(*writes, writeNames)
	var err5 error
	if slices.Contains(serverList, "base") && *baseDir == "" {
		err5 = errors.New("server base needs -base DIR")
	}
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
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
	if err := run(*duration, *rounds, sizeList, inflightList, writeList, clientList, serverList, *baseDir); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// The writes, in the order they are measured and printed: a create writes
// a file of a new name, an overwrite replaces the worker's one file.
var writeNames = []string{"create", "overwrite"}

// serverSpec says how to start one server and which tools do the work.
type serverSpec struct {
	name string
	cmd  []string
	env  []string // added to the environment, KEY=VALUE
	// peerTools: write_file and read_text_file on files in dir; otherwise
	// fleetstate's put and get.
	peerTools bool
	dir       string
	// session: call new_session before the work (fleetstate's put needs
	// the agent's session).
	session bool
}

// result is one measurement: throughput and the latency of each call.
type result struct {
	OpsPerSec float64 `json:"opsPerSec"`
	Write     latency `json:"write"`
	Read      latency `json:"read"`
}

type latency struct {
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
}

// runner measures one server through one client; it holds the connection
// (and the server process) open across measurements.
type runner interface {
	// measure runs the work for d; overwrite picks the write (see
	// writeNames).
	measure(ctx context.Context, size, inflight int, overwrite bool, d time.Duration) (result, error)
	Close() error
}

// client is one of the clients the harness drives the servers with.
type client struct {
	name  string // the flag's spelling
	title string
	start func(ctx context.Context, s serverSpec) (runner, error)
}

func run(duration time.Duration, rounds int, sizes, inflights []int, writes, clientNames, serverList []string, baseDir string) error {
	node, nodeErr := exec.LookPath("node")
	npm, npmErr := exec.LookPath("npm")
	if nodeErr != nil || npmErr != nil {
		fmt.Println("peer: SKIPPED: Node.js and npm are needed to run " + peerPkg + " and the TypeScript client; install them (for example apt-get install nodejs npm) and run again.")
		return nil
	}
	if major := nodeMajor(node); major < 18 {
		fmt.Printf("peer: SKIPPED: %s and the TypeScript SDK need Node.js 18 or later; %s is version %d.\n", peerPkg, node, major)
		return nil
	}
	peerJS, err := npmInstall(npm, "server-filesystem-"+peerVersion, peerPkg, peerVersion, "dist/index.js")
	if err != nil {
		return err
	}
	var clients []client
	for _, name := range clientNames {
		switch name {
		case "go":
			clients = append(clients, client{name: "go", title: "official MCP Go SDK " + goSDKVersion(), start: startGo})
		case "ts":
			driver, err := installTSDriver(npm)
			if err != nil {
				return err
			}
			clients = append(clients, client{name: "ts", title: "official MCP TypeScript SDK " + tsSDKVersion + " on " + nodeVersion(node),
				start: func(ctx context.Context, s serverSpec) (runner, error) { return startTS(ctx, node, driver, s) }})
		}
	}

	tmp, bin, baseBin, err := fleetbin.Build("fleetstate-peer-", baseDir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// Each client has servers of its own, on directories of their own.
	specs := func(c string) map[string]serverSpec {
		peerDir := filepath.Join(tmp, "peer-"+c)
		return map[string]serverSpec{
			"fleetstate": {name: "fleetstate", cmd: []string{bin, "mcp", "--dir", filepath.Join(tmp, "fleet-"+c)}, session: true},
			"base":       {name: "base", cmd: []string{baseBin, "mcp", "--dir", filepath.Join(tmp, "base-"+c)}, session: true},
			"peer":       {name: "peer", cmd: []string{node, peerJS, peerDir}, peerTools: true, dir: peerDir},
			"floor":      {name: "floor", cmd: []string{self}, env: []string{floorEnv + "=1"}},
		}
	}
	ctx := context.Background()
	runners := make([][]runner, len(clients)) // [client][server]
	defer func() {
		for _, rs := range runners {
			for _, r := range rs {
				r.Close()
			}
		}
	}()
	for i, c := range clients {
		all := specs(c.name)
		for _, name := range serverList {
			s := all[name]
			if s.dir != "" {
				if err := os.MkdirAll(s.dir, 0o700); err != nil {
					return err
				}
			}
			r, err := c.start(ctx, s)
			if err != nil {
				return fmt.Errorf("%s client: start %s: %w", c.name, name, err)
			}
			runners[i] = append(runners[i], r)
		}
	}

	type key struct {
		client, kib, inflight int
		write                 string
	}
	results := map[key][][]result{} // [server][round]
	for _, kib := range sizes {
		for _, inflight := range inflights {
			for _, write := range writes {
				for range rounds {
					for i, c := range clients {
						k := key{i, kib, inflight, write}
						if results[k] == nil {
							results[k] = make([][]result, len(serverList))
						}
						for j, r := range runners[i] {
							res, err := r.measure(ctx, kib<<10, inflight, write == "overwrite", duration)
							if err != nil {
								return fmt.Errorf("%s client, %s, %d KiB, %d in flight, %s: %w", c.name, serverList[j], kib, inflight, write, err)
							}
							results[k][j] = append(results[k][j], res)
						}
					}
				}
			}
		}
	}

	col := func(name string) int { return slices.Index(serverList, name) }
	for i, c := range clients {
		fmt.Printf("write-then-read over stdio, client: %s; fleetstate and floor built with %s; %s@%s on %s; %d rounds of %v each, clients and servers alternated, median; "+
			"create: a new file each time (put with overwrite false), overwrite: each worker's one file (put with overwrite true)\n\n",
			c.title, runtime.Version(), peerPkg, peerVersion, nodeVersion(node), rounds, duration)
		fmt.Print("| case |")
		for _, s := range serverList {
			fmt.Printf(" %s ops/s |", s)
		}
		extra := 3
		fmt.Print(" fleetstate / peer | floor / peer | fleetstate / floor |")
		if col("base") >= 0 {
			extra += 2
			fmt.Print(" base / floor | fleetstate / base |")
		}
		fmt.Println()
		fmt.Println("| --- |" + strings.Repeat(" ---: |", len(serverList)+extra))
		for _, kib := range sizes {
			for _, inflight := range inflights {
				for _, write := range writes {
					rs := results[key{i, kib, inflight, write}]
					ops := make([]float64, len(serverList))
					fmt.Printf("| %d KiB, %d in flight, %s |", kib, inflight, write)
					for j := range serverList {
						ops[j] = median(rs[j], func(r result) float64 { return r.OpsPerSec })
						fmt.Printf(" %.0f |", ops[j])
					}
					ratio := func(a, b string) string {
						x, y := col(a), col(b)
						if x < 0 || y < 0 {
							return "–"
						}
						return fmt.Sprintf("%.2f×", ops[x]/ops[y])
					}
					fmt.Printf(" %s | %s | %s |", ratio("fleetstate", "peer"), ratio("floor", "peer"), ratio("fleetstate", "floor"))
					if col("base") >= 0 {
						fmt.Printf(" %s | %s |", ratio("base", "floor"), ratio("fleetstate", "base"))
					}
					fmt.Println()
				}
			}
		}
		fmt.Println()
		fmt.Println("Per-call latency in ms, median of the rounds' values: write (put, write_file) and read (get, read_text_file), p50 / p99.")
		fmt.Println()
		fmt.Println("| case | server | write p50 | write p99 | read p50 | read p99 |")
		fmt.Println("| --- | --- | ---: | ---: | ---: | ---: |")
		for _, kib := range sizes {
			for _, inflight := range inflights {
				for _, write := range writes {
					rs := results[key{i, kib, inflight, write}]
					for j, s := range serverList {
						fmt.Printf("| %d KiB, %d in flight, %s | %s | %.2f | %.2f | %.2f | %.2f |\n", kib, inflight, write, s,
							median(rs[j], func(r result) float64 { return r.Write.P50Ms }),
							median(rs[j], func(r result) float64 { return r.Write.P99Ms }),
							median(rs[j], func(r result) float64 { return r.Read.P50Ms }),
							median(rs[j], func(r result) float64 { return r.Read.P99Ms }))
					}
				}
			}
		}
		fmt.Println()
	}
	return nil
}

// fileName is the name worker's seq-th operation writes: a new one for each
// create, the worker's one file for each overwrite. The TypeScript driver
// names them the same.
func fileName(worker, seq int, overwrite bool) string {
	if overwrite {
		return fmt.Sprintf("w%d.txt", worker)
	}
	return fmt.Sprintf("w%d-%d.txt", worker, seq)
}

// content returns size bytes for worker's seq-th operation. Each operation
// writes different bytes, so a server that kept an old file or ignored the
// write fails the check of the read. The TypeScript driver makes the same.
func content(size, worker, seq int) string {
	const base = "fleetstate peer benchmark.\n"
	s := fmt.Sprintf("%d.%d ", worker, seq)
	return (s + strings.Repeat(base, size/len(base)+1))[:size]
}

// npmInstall installs pkg@version into the user's cache directory, under
// dir, unless it is there already, and returns the path of its file entry.
func npmInstall(npm, dir, pkg, version, entry string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "fleetstate-peer", dir)
	js := filepath.Join(root, "node_modules", filepath.FromSlash(pkg), filepath.FromSlash(entry))
	if _, err := os.Stat(js); err == nil {
		return js, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "peer: installing %s@%s into %s\n", pkg, version, root)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", root, "--no-audit", "--no-fund", "--no-save", pkg+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %v\n%s", pkg, version, err, out)
	}
	if _, err := os.Stat(js); err != nil {
		return "", errors.New("npm installed " + pkg + " but " + js + " is missing")
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

// nameList parses a comma-separated list of names from known, keeping the
// order of known.
func nameList(s string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("%q: %q is not one of %s", s, f, strings.Join(known, ", "))
		}
	}
	for _, k := range known {
		if slices.Contains(strings.Split(strings.ReplaceAll(s, " ", ""), ","), k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func median(rs []result, f func(result) float64) float64 {
	s := make([]float64, len(rs))
	for i, r := range rs {
		s[i] = f(r)
	}
	slices.Sort(s)
	return s[len(s)/2]
}
