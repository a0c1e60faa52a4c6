// Command serve measures a delegation's blocking round trip through
// `fleetstate serve` over HTTP, as agents make it: the lead's fleet_send,
// the member's fleet_next and fleet_reply, and the send returning the
// reply. It runs the same daemon on the file backend and on NATS JetStream
// side by side, each in its own processes on loopback, and alternates
// them round by round, so that the machine's moments fall on all alike:
//
//	file       serve --dir (the embedded default)
//	nats-node  serve --nats-node (the daemon runs its NATS node, R1)
//	nats-1     serve --nats, one `fleetstate nats` node (R1)
//	nats-3     serve --nats, three `fleetstate nats` nodes clustered (R3)
//	nodes-3    three daemons, each serve --nats-node, their nodes clustered
//	           (R3); the clients call the one that owns the fleet
//
// It prints, per backend, the median over the rounds of each round's
// median round trip, its p99, and the ratio to the file backend's.
//
// With -base DIR it also builds the fleetstate of another tree of this
// module in DIR (a git worktree of an older commit, say) and starts each
// selected backend B a second time on that binary, every process of it
// (daemons, NATS nodes, token commands) from DIR. B@base is measured right
// after B in each round, alternated with the others like them, and the
// table gains the ratio of B's p50 to B@base's, per round and their median;
// a B@base row's p50 / file is against file@base.
//
//	go run ./bench/serve -rounds 5 -duration 2s
//	git worktree add ../before HEAD~1
//	go run ./bench/serve -backends file,nats-node -base ../before
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/bench/internal/fleetbin"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

var backendNames = []string{"file", "nats-node", "nats-1", "nats-3", "nodes-3"}

func main() {
	rounds := flag.Int("rounds", 5, "measurements of each backend, alternated; the median is reported")
	duration := flag.Duration("duration", 2*time.Second, "how long each measurement runs")
	list := flag.String("backends", strings.Join(backendNames, ","), "backends, comma-separated: "+strings.Join(backendNames, ", "))
	baseDir := flag.String("base", "", "a directory holding another tree of this module (a git worktree, say): each backend B is also run on its fleetstate, as B@base, alternated with the others")
	flag.Parse()
	var names []string
	for _, n := range strings.Split(*list, ",") {
		if !slices.Contains(backendNames, n) {
			fmt.Fprintf(os.Stderr, "serve: unknown backend %q (known: %s)\n", n, strings.Join(backendNames, ", "))
			os.Exit(2)
		}
		names = append(names, n)
	}
	if *rounds < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "serve: -rounds and -duration must be positive")
		os.Exit(2)
	}
	if err := run(os.Stdout, names, *rounds, *duration, *baseDir); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}

// fleet is one backend's daemon, its lead and its member.
type fleet struct {
	name         string
	lead, member *mcpadapter.Client
	stop         context.CancelFunc // ends the member's loop
	memberErr    chan error
	// waiting gets a value each time the member is about to call
	// fleet_next: a round trip starts once the member waits for work, as
	// a member does between tasks, so that none overlaps the tail of the
	// one before (which would make its message queued first, and then
	// delivered, a write more on any backend).
	waiting chan struct{}
}

// sample is one measurement: the round trips' latencies.
type sample []time.Duration

// baseSuffix marks a backend run on the binary built from -base.
const baseSuffix = "@base"

// run measures the backends names and prints the table to w. With
// baseDir, each backend also runs on the fleetstate built from there,
// measured right after it as name+baseSuffix.
func run(w io.Writer, names []string, rounds int, d time.Duration, baseDir string) error {
	tmp, bin, baseBin, err := fleetbin.Build("fleetstate-bench-serve-", baseDir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	h := &harness{bin: bin, running: &running{tmp: tmp}}
	defer h.close()
	hs := []*harness{h}
	if baseDir != "" {
		// The same processes, so h.close ends the base's too.
		hs = append(hs, &harness{bin: baseBin, suffix: baseSuffix, running: h.running})
		var all []string
		for _, n := range names {
			all = append(all, n, n+baseSuffix)
		}
		names = all
	}
	fleets := make([]*fleet, len(names))
	for i, n := range names {
		bh := hs[0]
		if strings.HasSuffix(n, baseSuffix) {
			bh = hs[1]
		}
		if fleets[i], err = bh.start(strings.TrimSuffix(n, baseSuffix)); err != nil {
			return fmt.Errorf("start %s: %w", n, err)
		}
		defer fleets[i].close()
	}
	samples := make([][]sample, len(names))
	for r := range rounds {
		for i, f := range fleets {
			s, err := f.measure(d)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", f.name, r+1, err)
			}
			samples[i] = append(samples[i], s)
		}
	}
	fmt.Fprintf(w, "blocking round trip (fleet_send, fleet_next, fleet_reply) over HTTP on loopback, one lead and one member waiting in fleet_next, mcpadapter.Client; %d rounds of %v each, backends alternated, medians of the rounds' values; round trips/s is one over their mean\n\n", rounds, d)
	if baseDir != "" {
		fmt.Fprintf(w, "B@base is backend B on the fleetstate built from %s; its p50 / file is against file@base, and B's p50 / base against B@base's\n\n", baseDir)
		fmt.Fprintln(w, "| backend | round trips/s | p50 | p99 | p50 / file | per round, p50 / file | p50 / base | per round, p50 / base |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |")
	} else {
		fmt.Fprintln(w, "| backend | round trips/s | p50 | p99 | p50 / file | per round, p50 / file |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- |")
	}
	for i, n := range names {
		// The file backend of the same binary, and B@base for B.
		file := slices.Index(names, "file")
		if strings.HasSuffix(n, baseSuffix) {
			file = slices.Index(names, "file"+baseSuffix)
		}
		base := -1
		if baseDir != "" && !strings.HasSuffix(n, baseSuffix) {
			base = slices.Index(names, n+baseSuffix)
		}
		var rate, p50, p99, ratio, baseRatio []float64
		for r, s := range samples[i] {
			var busy time.Duration
			for _, x := range s {
				busy += x
			}
			rate = append(rate, float64(len(s))/busy.Seconds())
			p50 = append(p50, quantile(s, 0.5))
			p99 = append(p99, quantile(s, 0.99))
			if file >= 0 {
				ratio = append(ratio, quantile(s, 0.5)/quantile(samples[file][r], 0.5))
			}
			if base >= 0 {
				baseRatio = append(baseRatio, quantile(s, 0.5)/quantile(samples[base][r], 0.5))
			}
		}
		row := fmt.Sprintf("| %s | %.0f | %.0f µs | %.0f µs |", n, median(rate), median(p50), median(p99))
		row += ratioCells(ratio)
		if baseDir != "" {
			row += ratioCells(baseRatio)
		}
		fmt.Fprintln(w, row)
	}
	return nil
}

// ratioCells returns the table's two cells for per-round ratios: their
// median and each round's; both empty without ratios.
func ratioCells(ratio []float64) string {
	if len(ratio) == 0 {
		return " | |"
	}
	per := make([]string, len(ratio))
	for k, x := range ratio {
		per[k] = fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf(" %.2f× | %s |", median(ratio), strings.Join(per, ", "))
}

// parked is how long a round trip starts after the member said it was
// about to call fleet_next: time for that call to reach the daemon.
const parked = 2 * time.Millisecond

// measure runs round trips for d and returns their latencies.
func (f *fleet) measure(d time.Duration) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	var s sample
	for end := time.Now().Add(d); time.Now().Before(end); {
		select {
		case <-f.waiting:
		case err := <-f.memberErr:
			return nil, err
		case <-ctx.Done():
			return nil, errors.New("the member is not back in fleet_next")
		}
		time.Sleep(parked)
		start := time.Now()
		o, err := f.lead.Send(ctx, "member", "do it")
		if err != nil {
			return nil, err
		}
		if o.Kind != fleetstate.OutcomeReply || o.Content != "done" {
			return nil, fmt.Errorf("fleet_send returned %+v; want the member's reply", o)
		}
		s = append(s, time.Since(start))
		select {
		case err := <-f.memberErr:
			return nil, err
		default:
		}
	}
	return s, nil
}

// memberLoop answers every message "done" until ctx ends.
func (f *fleet) memberLoop(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case f.waiting <- struct{}{}:
		default: // the signal before is still there
		}
		msg, ok, err := f.member.Next(ctx, time.Minute)
		if err == nil && ok {
			err = f.member.ReplyTurn(ctx, msg.TurnID, "done")
		}
		if err != nil && ctx.Err() == nil {
			f.memberErr <- err
			return
		}
	}
}

func (f *fleet) close() {
	f.stop()
	f.lead.Close()
	f.member.Close()
}

// harness starts processes of the fleetstate binary bin. Harnesses of
// different binaries share their running, so that closing one ends the
// processes of all.
type harness struct {
	bin    string
	suffix string // added to the names of the fleets it starts
	*running
}

// running is the processes started, and the directories made under tmp.
type running struct {
	tmp  string
	mu   sync.Mutex
	cmds []*exec.Cmd
	n    int
}

// close ends every process started, by every harness sharing r.
func (r *running) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
}

// dir returns a new directory under the harness's.
func (h *running) dir(what string) string {
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	return filepath.Join(h.tmp, fmt.Sprintf("%s-%d", what, n))
}

var urlRE = regexp.MustCompile(`"?url"?[=:]"?(http://127\.0\.0\.1:\d+/mcp)`)

// process starts the fleetstate binary with args and returns the first
// match of re in its standard output or error, with the process left
// running.
func (h *harness) process(re *regexp.Regexp, args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	cmd.Stderr = cmd.Stdout // one pipe, read below
	if err := cmd.Start(); err != nil {
		return "", err
	}
	h.mu.Lock()
	h.cmds = append(h.cmds, cmd)
	h.mu.Unlock()
	found := make(chan string, 1)
	var logs strings.Builder
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			if logs.Len() < 1<<14 {
				logs.WriteString(sc.Text() + "\n")
			}
			mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case s := <-found:
		return s, nil
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		return "", fmt.Errorf("fleetstate %s: nothing matching %s within 30s:\n%s", strings.Join(args, " "), re, logs.String())
	}
}

var natsURLRE = regexp.MustCompile(`^(nats://127\.0\.0\.1:\d+)$`)

// natsNode starts `fleetstate nats` with args and returns its client URL.
func (h *harness) natsNode(name string, args ...string) (string, error) {
	return h.process(natsURLRE, append([]string{"nats", "--name", name, "--store-dir", h.dir("nats"),
		"--max-store", "1073741824", "--max-mem", "67108864", "--log-level", "warn"}, args...)...)
}

// token adds a token for agent in role on the fleet that where names
// (--dir or --nats and its argument), trying again for a while: a NATS
// cluster just started may not have elected its leaders yet.
func (h *harness) token(agent, role string, where ...string) (string, error) {
	var out []byte
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		out, err = exec.Command(h.bin, append([]string{"token", "add", "--agent", agent, "--role", role}, where...)...).Output()
		if err == nil {
			return strings.TrimSpace(string(out)), nil
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return "", fmt.Errorf("token add %s: %w", agent, err)
}

// start brings backend name up and returns its fleet, its member looping.
func (h *harness) start(name string) (*fleet, error) {
	var where, serve []string
	switch name {
	case "file":
		where = []string{"--dir", h.dir("state")}
		serve = where
	case "nats-node":
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		where = []string{"--nats", "nats://" + addr}
		serve = []string{"--nats-node", "--nats-addr", addr, "--nats-store-dir", h.dir("node"),
			"--nats-max-store", "1073741824", "--nats-max-mem", "67108864"}
	case "nats-1":
		url, err := h.natsNode("n1", "--addr", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		where = []string{"--nats", url}
		serve = where
	case "nats-3":
		clients, routes, err := clusterAddrs(3)
		if err != nil {
			return nil, err
		}
		var urls []string
		for i := range 3 {
			url, err := h.natsNode(fmt.Sprintf("n%d", i+1), "--addr", clients[i], "--cluster", routes[i],
				"--routes", otherRoutes(routes, i), "--cluster-name", "bench")
			if err != nil {
				return nil, err
			}
			urls = append(urls, url)
		}
		where = []string{"--nats", strings.Join(urls, ",")}
		serve = where
	case "nodes-3":
		return h.startNodes3()
	}
	tokens := map[string]string{}
	add := func() error {
		for agent, role := range map[string]string{"lead": "lead", "member": "member"} {
			tok, err := h.token(agent, role, where...)
			if err != nil {
				return err
			}
			tokens[agent] = tok
		}
		return nil
	}
	if name != "nats-node" { // its NATS node starts with the daemon
		if err := add(); err != nil {
			return nil, err
		}
	}
	url, err := h.process(urlRE, append([]string{"serve", "--addr", "127.0.0.1:0"}, serve...)...)
	if err != nil {
		return nil, err
	}
	if name == "nats-node" {
		if err := add(); err != nil {
			return nil, err
		}
	}
	return connectFleet(name+h.suffix, url, tokens)
}

// startNodes3 starts three daemons, each running its own NATS node, the
// nodes clustered, and returns the fleet as served by its owner.
func (h *harness) startNodes3() (*fleet, error) {
	clients, routes, err := clusterAddrs(3)
	if err != nil {
		return nil, err
	}
	// All at once: a node alone has no JetStream quorum.
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_, errs[i] = h.process(urlRE, "serve", "--addr", "127.0.0.1:0", "--nats-node",
				"--nats-addr", clients[i], "--nats-name", fmt.Sprintf("d%d", i+1),
				"--nats-cluster", routes[i], "--nats-routes", otherRoutes(routes, i), "--nats-cluster-name", "bench",
				"--nats-store-dir", h.dir("node"), "--nats-max-store", "1073741824", "--nats-max-mem", "67108864")
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	where := []string{"--nats", "nats://" + strings.Join(clients, ",nats://")}
	tokens := map[string]string{}
	for agent, role := range map[string]string{"lead": "lead", "member": "member"} {
		tok, err := h.token(agent, role, where...)
		if err != nil {
			return nil, err
		}
		tokens[agent] = tok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := fleetnats.Connect(ctx, fleetnats.Options{URL: where[1]})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for {
		rec, ok, err := f.Owner(ctx)
		if err == nil && ok && rec.Addr != "" {
			return connectFleet("nodes-3"+h.suffix, rec.Addr, tokens)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no daemon owns the fleet: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// connectFleet connects a lead and a member to the daemon at url, with
// tokens, and starts the member's loop.
func connectFleet(name, url string, tokens map[string]string) (*fleet, error) {
	lead, err := dial(url, tokens["lead"], "lead")
	if err != nil {
		return nil, err
	}
	member, err := dial(url, tokens["member"], "member")
	if err != nil {
		lead.Close()
		return nil, err
	}
	// The member's first call makes it a ready member, also where its
	// token was added after the daemon started.
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, _, err = member.Next(cctx, 0)
	ccancel()
	if err != nil {
		lead.Close()
		member.Close()
		return nil, fmt.Errorf("the member's first fleet_next: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &fleet{name: name, lead: lead, member: member, stop: stop, memberErr: make(chan error, 1), waiting: make(chan struct{}, 1)}
	go f.memberLoop(ctx)
	// Warm up: the first round trips open the fleet's buckets and slots.
	if _, err := f.measure(200 * time.Millisecond); err != nil {
		f.close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return f, nil
}

// dial connects to the daemon at url as agent, trying again while it
// joins its fleet.
func dial(url, token, agent string) (*mcpadapter.Client, error) {
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var c *mcpadapter.Client
		c, err = mcpadapter.Dial(ctx, url, token, agent)
		cancel()
		if err == nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("dial %s as %s: %w", url, agent, err)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// quantile returns the q-quantile of s, in microseconds.
func quantile(s sample, q float64) float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	return float64(c[int(q*float64(len(c)-1))]) / float64(time.Microsecond)
}

func median(xs []float64) float64 {
	c := slices.Clone(xs)
	slices.Sort(c)
	return c[len(c)/2]
}

// clusterAddrs returns n loopback addresses for clients and n for routes.
func clusterAddrs(n int) (clients, routes []string, err error) {
	for range n {
		c, err := freeAddr()
		if err != nil {
			return nil, nil, err
		}
		r, err := freeAddr()
		if err != nil {
			return nil, nil, err
		}
		clients, routes = append(clients, c), append(routes, r)
	}
	return clients, routes, nil
}

// otherRoutes returns the routes of every server but the i-th, as --routes
// takes them.
func otherRoutes(routes []string, i int) string {
	var others []string
	for j, r := range routes {
		if j != i {
			others = append(others, "nats-route://"+r)
		}
	}
	return strings.Join(others, ",")
}
