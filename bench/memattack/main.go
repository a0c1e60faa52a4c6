// Command memattack measures the peak memory (VmHWM, Linux) of a
// `fleetstate serve` process under attacks a token holder can make,
// beside an idle daemon's:
//
//	idle       the daemon started, nothing asked of it
//	bodies     one member token, -bodies concurrent put requests of
//	           -body-mib MiB each (over the content limit), each with its
//	           Content-Length
//	chunked    the same, sent in chunks, with no length announced
//	snapshots  a lead queues -tickets tickets of -ticket-mib MiB, then
//	           opens -connects event streams at once and reads their
//	           snapshots
//	streams    a lead opens -streams event streams that read, then sends
//	           one brief of -brief-mib MiB of "<"
//	stalled    a lead opens -stalled event streams that never read, then
//	           sends one brief of -content-mib MiB of "<"
//	reply      two event streams read while the member replies
//	           -content-mib MiB of "<" to a brief
//	cancelled  one event stream stops reading; the lead sends -briefs
//	           briefs of -content-mib MiB, cancelling and acknowledging
//	           each
//	permits    the member raises -requests permission requests of
//	           -input-mib MiB (less 1 KiB), each allowed by a rule of the fleet file,
//	           each with an hour's window
//
// Each attack runs on a daemon of its own, on a fresh state directory, and
// the peak is taken from the attack's start (the setup's is reset through
// /proc/PID/clear_refs); the resident set at that start, and at the end,
// are printed too, and the largest live heap a collection found during
// the attack (from the daemon's GODEBUG=gctrace=1): what the attack made
// the daemon keep, apart from garbage not yet collected. -attacks picks some. With
// -bin it measures that binary (one built from another commit, say);
// otherwise it builds this tree's.
//
//	go run ./bench/memattack
//	go run ./bench/memattack -bin ../before/fleetstate -attacks streams,stalled
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/mcpadapter"
)

func main() {
	bin := flag.String("bin", "", "the fleetstate binary to measure; empty builds this tree's")
	bodies := flag.Int("bodies", 12, "concurrent oversized requests of the bodies attack")
	bodyMiB := flag.Int("body-mib", 60, "size of each request of the bodies attack, MiB")
	tickets := flag.Int("tickets", 200, "tickets of the snapshots attack")
	ticketMiB := flag.Int("ticket-mib", 1, "brief of each ticket, MiB")
	connects := flag.Int("connects", 5, "event streams opened at once by the snapshots attack")
	attacks := flag.String("attacks", strings.Join(allAttacks, ","), "the attacks to run, comma-separated")
	flag.IntVar(&cfg.streams, "streams", 1000, "reading event streams of the streams attack")
	flag.IntVar(&cfg.briefMiB, "brief-mib", 1, "brief of the streams attack, MiB")
	flag.IntVar(&cfg.stalled, "stalled", 5, "event streams that never read, of the stalled attack")
	flag.IntVar(&cfg.contentMiB, "content-mib", 16, "brief or reply of the stalled, reply and cancelled attacks, MiB (at most the content limit)")
	flag.IntVar(&cfg.briefs, "briefs", 40, "briefs of the cancelled attack")
	flag.IntVar(&cfg.requests, "requests", 400, "permission requests of the permits attack")
	flag.IntVar(&cfg.inputMiB, "input-mib", 1, "input of each permission request, MiB")
	flag.Parse()
	if err := run(*bin, strings.Split(*attacks, ","), *bodies, *bodyMiB<<20, *tickets, *ticketMiB<<20, *connects); err != nil {
		fmt.Fprintln(os.Stderr, "memattack:", err)
		os.Exit(1)
	}
}

// allAttacks are the attacks, in the order they run.
var allAttacks = []string{"idle", "bodies", "chunked", "snapshots", "streams", "stalled", "reply", "cancelled", "permits"}

// cfg holds the flags of the attacks on event streams and permissions.
var cfg struct {
	streams, briefMiB, stalled, contentMiB, briefs, requests, inputMiB int
}

func run(bin string, attacks []string, bodies, bodySize, tickets, ticketSize, connects int) error {
	tmp, err := os.MkdirTemp("", "memattack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "fleetstate")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetstate/fleetstate/cmd/fleetstate").CombinedOutput(); err != nil {
			return fmt.Errorf("build: %v\n%s", err, out)
		}
	}
	fmt.Printf("%-10s %9s %9s %9s %9s  %s\n", "attack", "start MiB", "peak MiB", "end MiB", "live MiB", "what")
	for _, name := range attacks {
		if !slices.Contains(allAttacks, name) {
			return fmt.Errorf("no attack %q; the attacks are %v", name, allAttacks)
		}
		d, err := startDaemon(bin, filepath.Join(tmp, name), name == "permits")
		if err != nil {
			return err
		}
		var what string
		switch name {
		case "idle":
			time.Sleep(2 * time.Second)
			what = "started, nothing asked"
		case "bodies", "chunked":
			what, err = d.bodies(bodies, bodySize, name == "chunked")
		case "snapshots":
			what, err = d.snapshots(tickets, ticketSize, connects)
		case "streams":
			what, err = d.streams(cfg.streams, cfg.briefMiB<<20, true)
		case "stalled":
			what, err = d.streams(cfg.stalled, cfg.contentMiB<<20, false)
		case "reply":
			what, err = d.reply(cfg.contentMiB << 20)
		case "cancelled":
			what, err = d.cancelled(cfg.briefs, cfg.contentMiB<<20)
		case "permits":
			what, err = d.permits(cfg.requests, cfg.inputMiB<<20)
		}
		peak, perr := hwm(d.cmd.Process.Pid)
		end, eerr := status(d.cmd.Process.Pid, "VmRSS:")
		d.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if perr != nil || eerr != nil {
			return errors.Join(perr, eerr)
		}
		fmt.Printf("%-10s %9.0f %9.0f %9.0f %9d  %s\n", name, float64(d.start)/(1<<20), float64(peak)/(1<<20), float64(end)/(1<<20), d.gc.max(), what)
	}
	return nil
}

// daemon is a running `fleetstate serve`.
type daemon struct {
	dir    string // the state directory
	cmd    *exec.Cmd
	url    string // of MCP
	base   string
	tokens map[string]string
	start  int64 // the resident set when the peak was last reset
	gc     gcTrace
}

// gcTrace reads the daemon's GODEBUG=gctrace=1 lines and keeps the
// largest live heap, in MB, that a collection found since the last reset.
type gcTrace struct {
	mu      sync.Mutex
	partial []byte
	live    int // guarded by mu
}

var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

func (g *gcTrace) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.partial = append(g.partial, p...)
	for {
		i := bytes.IndexByte(g.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if m := gcLine.FindSubmatch(g.partial[:i]); m != nil {
			n, _ := strconv.Atoi(string(m[3]))
			g.live = max(g.live, n)
		}
		g.partial = g.partial[i+1:]
	}
}

func (g *gcTrace) max() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.live
}

func (g *gcTrace) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live = 0
}

// startDaemon starts serve on a state directory dir with a lead and a
// member, scout, and waits until it answers. With rules, its fleet file
// allows every Read.
func startDaemon(bin, dir string, rules bool) (*daemon, error) {
	d := &daemon{dir: dir, tokens: map[string]string{}}
	for agent, role := range map[string]string{"lead": "lead", "scout": "member"} {
		out, err := exec.Command(bin, "token", "add", "--dir", dir, "--agent", agent, "--role", role).Output()
		if err != nil {
			return nil, fmt.Errorf("token add %s: %v", agent, err)
		}
		d.tokens[agent] = strings.TrimSpace(string(out))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	d.cmd = exec.Command(bin, "serve", "--dir", dir, "--addr", addr)
	d.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	d.cmd.Stderr = &d.gc
	if rules {
		roster := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".fleet.json")
		if err := os.WriteFile(roster, []byte(`{"approvals":{"allow":["Read(*)"]},"agents":[]}`), 0o600); err != nil {
			return nil, err
		}
		d.cmd.Args = append(d.cmd.Args, "--roster", roster)
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.base = "http://" + addr
	d.url = d.base + "/mcp"
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return d, d.resetHWM()
		}
	}
	d.stop()
	return nil, fmt.Errorf("serve on %s: not answering after 30s", addr)
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
}

// bodies sends n put requests of size bytes at once with the member's
// token, in chunks if chunked, and returns what they were answered.
func (d *daemon) bodies(n, size int, chunked bool) (string, error) {
	head := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"put","arguments":{"agent_name":"scout","file_name":"big","content":"`
	tail := `"}}}`
	body := make([]byte, 0, size)
	body = append(body, head...)
	body = append(body, bytes.Repeat([]byte("x"), size-len(head)-len(tail))...)
	body = append(body, tail...)
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var r io.Reader = bytes.NewReader(body)
			if chunked {
				r = io.MultiReader(r) // of no length the client knows
			}
			req, _ := http.NewRequest(http.MethodPost, d.url, r)
			for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "put", "Authorization": "Bearer " + d.tokens["scout"]} {
				req.Header.Set(k, v)
			}
			what := ""
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				what = "connection closed while sending"
			} else {
				data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
				resp.Body.Close()
				what = resp.Status
				if bytes.Contains(data, []byte("ERR_CONTENT_TOO_LARGE")) {
					what += " ERR_CONTENT_TOO_LARGE"
				}
			}
			mu.Lock()
			answers[what]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d requests of %d MiB: %v", n, size>>20, answers), nil
}

// snapshots queues n tickets of size bytes for scout, resets the peak,
// then opens connects event streams at once and reads their snapshots.
func (d *daemon) snapshots(n, size, connects int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lead, err := mcpadapter.Dial(ctx, d.url, d.tokens["lead"], "memattack")
	if err != nil {
		return "", err
	}
	defer lead.Close()
	for i := range n {
		if _, err := lead.SendDetached(ctx, "scout", strings.Repeat(string(rune('a'+i%26)), size)); err != nil {
			return "", err
		}
	}
	if err := d.resetHWM(); err != nil {
		return "", err
	}
	lens := make([]int, connects)
	err = d.openStreams(ctx, connects, func(i int, resp *http.Response) error {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<30)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				lens[i] = len(line)
				return nil
			}
		}
		return fmt.Errorf("no snapshot: %v", sc.Err())
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d tickets of %d MiB, %d connects at once: snapshot of %.1f MiB each", n, size>>20, connects, float64(lens[0])/(1<<20)), nil
}

// hwm returns the peak resident set of process pid, in bytes.
func hwm(pid int) (int64, error) { return status(pid, "VmHWM:") }

// status returns the field key, in kB, of /proc/PID/status, in bytes.
func status(pid int, key string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// resetHWM resets the daemon's peak resident set to its current resident
// set (Linux 4.0 and later), and notes that as the start.
func (d *daemon) resetHWM() error {
	pid := d.cmd.Process.Pid
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return err
	}
	d.gc.reset()
	var err error
	d.start, err = status(pid, "VmRSS:")
	return err
}
