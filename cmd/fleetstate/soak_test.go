package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The soak: a lead and many members run random flows against one daemon
// for a set time, with faults, and then the ledger is checked. Run it with
//
//	go test ./cmd/fleetstate -run TestSoak -soak=10m -soak-members=100 -v
//
// It is skipped unless -soak is given.
var (
	soakFor         = flag.Duration("soak", 0, "run TestSoak for this long; 0 skips it")
	soakMembers     = flag.Int("soak-members", 100, "members of TestSoak")
	soakLeadWorkers = flag.Int("soak-lead-workers", 8, "concurrent calls of the lead in TestSoak")
	soakRestart     = flag.Duration("soak-restart", 90*time.Second, "mean interval between daemon restarts in TestSoak; 0: none")
	soakSeed        = flag.Uint64("soak-seed", 0, "random seed of TestSoak; 0: from the clock")
)

// The daemon's bounds in the soak: short, so that every path (pending,
// defaults, not ready) is taken often.
var soakBounds = fleetstate.RendezvousOptions{
	SendTimeout:  3 * time.Second,
	AskTimeout:   2 * time.Second,
	ReadyTimeout: 5 * time.Second,
	MaxWait:      5 * time.Second,
}

// soakDaemon is the daemon, in this process so that its goroutines and
// memory can be measured, restartable on the same address and directory.
type soakDaemon struct {
	dir  string
	addr string
	log  *slog.Logger

	mu     sync.Mutex
	d      *daemon.Daemon
	served chan error
}

func (d *soakDaemon) start(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	dd, err := daemon.New(daemon.Config{Dir: d.dir, Logger: d.log, Rendezvous: soakBounds, SessionTTL: 10 * time.Second, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	addr := d.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil || i > 100 {
			break
		}
		time.Sleep(50 * time.Millisecond) // the old listener's port, freed
	}
	if err != nil {
		t.Fatal(err)
	}
	d.addr = ln.Addr().String()
	d.d, d.served = dd, make(chan error, 1)
	go func(dd *daemon.Daemon, served chan error) { served <- dd.Serve(context.Background(), ln) }(dd, d.served)
}

// stop shuts the daemon down as SIGTERM does: the rendezvous first (blocked
// calls get their tickets), then the streams, then HTTP.
func (d *soakDaemon) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.d.Close()
	<-d.served
}

func (d *soakDaemon) url() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return "http://" + d.addr + "/mcp"
}

// countingHandler counts the log records of the rendezvous by level.
type countingHandler struct {
	errors, warns atomic.Int64
	mu            sync.Mutex
	samples       []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Level >= slog.LevelError:
		h.errors.Add(1)
		h.mu.Lock()
		if len(h.samples) < 5 {
			h.samples = append(h.samples, r.Message)
		}
		h.mu.Unlock()
	case r.Level >= slog.LevelWarn:
		h.warns.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// soakConn is one agent's MCP client, with the means to cut its
// connections as the death of its process would.
type soakConn struct {
	c   *client.Client
	net *fleettest.Cuttable
}

func dialSoak(ctx context.Context, url, token string, listen bool) (*soakConn, error) {
	sc := &soakConn{net: fleettest.NewCuttable()}
	sc.net.MaxIdleConnsPerHost = 4
	version := mcp.LATEST_PROTOCOL_VERSION
	if listen {
		version = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	}
	c, _, err := adaptertest.Dial(ctx, url, &http.Client{Transport: fleettest.Bearer{Token: token, Base: sc.net}}, adaptertest.DialOptions{
		Name: "soak", ProtocolVersion: version, Listen: listen,
		Transport: []transport.StreamableHTTPCOption{transport.WithHTTPLogger(slog.New(slog.DiscardHandler))},
	})
	if err != nil {
		sc.net.CloseIdleConnections()
		return nil, err
	}
	sc.c = c
	return sc, nil
}

// cut closes every connection of the client at once, with no goodbye.
func (sc *soakConn) cut() { sc.net.Cut() }

func (sc *soakConn) close() {
	if sc == nil {
		return
	}
	sc.c.Close()
	sc.net.CloseIdleConnections()
}

// errTransport marks a call whose fate is unknown: the connection broke.
var errTransport = errors.New("transport")

// call calls a tool: the structured content, whether it is an error
// result, or errTransport.
func (sc *soakConn) call(ctx context.Context, tool string, args map[string]any) (map[string]any, bool, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := sc.c.CallTool(ctx, req)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", errTransport, err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	return out, res.IsError, nil
}

// soakLedger is what every party was told, to be checked at the end.
type soakLedger struct {
	mu sync.Mutex
	t  *testing.T

	received   map[string]string // turn → member that got its message
	turnOf     map[string]string // message content → its turn, as delivered
	abandoned  map[string]bool   // contents of blocking sends the lead abandoned
	receivedBy map[string]int    // message content → deliveries
	replied    map[string]string // turn → digest of the reply a member was told was taken
	outcomes   map[string]soakOutcome
	accepted   map[string]bool // turns of messages the daemon accepted
	open       int             // accepted turns with no outcome yet

	counts map[string]int // figures
}

type soakOutcome struct {
	kind, reason, content, via string
}

func newSoakLedger(t *testing.T) *soakLedger {
	return &soakLedger{t: t, received: map[string]string{}, turnOf: map[string]string{}, abandoned: map[string]bool{}, receivedBy: map[string]int{},
		replied: map[string]string{}, outcomes: map[string]soakOutcome{}, accepted: map[string]bool{}, counts: map[string]int{}}
}

func (l *soakLedger) count(what string, n int) {
	l.mu.Lock()
	l.counts[what] += n
	l.mu.Unlock()
}

func (l *soakLedger) receive(member, turn, content string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts["messages delivered"]++
	if prev, dup := l.received[turn]; dup {
		l.t.Errorf("turn %s delivered twice: to %s and %s", turn, prev, member)
	}
	l.received[turn] = member
	l.turnOf[content] = turn
	l.receivedBy[content]++
	if l.receivedBy[content] > 1 {
		l.t.Errorf("message %q delivered %d times", content, l.receivedBy[content])
	}
}

// outcome records a terminal outcome the lead learnt, through its blocked
// call ("call") or a ticket ("ticket"). A ticket may be read twice (polled,
// then the ack lost to a restart), and an outcome a call returned is held on
// its ticket until the lead's next call, so a poll may read it after the
// call did; two different outcomes of one turn are a duplicate.
func (l *soakLedger) outcome(o map[string]any, via string) {
	turn, _ := o["turn_id"].(string)
	kind, _ := o["outcome"].(string)
	if turn == "" || (kind != "reply" && kind != "turn_done" && kind != "failed") {
		return
	}
	got := soakOutcome{kind: kind, via: via}
	got.reason, _ = o["reason"].(string)
	content, _ := o["content"].(string)
	got.content = digest(content)
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, seen := l.outcomes[turn]; seen {
		if (via == "ticket" || prev.via == "ticket") && prev.kind == got.kind && prev.content == got.content && prev.reason == got.reason {
			l.counts["tickets read again"]++
			return
		}
		l.t.Errorf("turn %s reached the lead twice: %+v, then %+v", turn, prev, got)
		return
	}
	l.outcomes[turn] = got
	if l.accepted[turn] {
		l.open--
	}
	l.counts["outcomes via "+via]++
	key := "outcome " + kind
	if got.reason != "" {
		key += "/" + got.reason
	}
	l.counts[key]++
}

// soak is one run.
type soak struct {
	t      *testing.T
	d      *soakDaemon
	tokens map[string]string
	l      *soakLedger
	seq    atomic.Int64
	rng    func() *rand.Rand
}

func (s *soak) connect(ctx context.Context, agent string, listen bool) *soakConn {
	for ctx.Err() == nil {
		sc, err := dialSoak(ctx, s.d.url(), s.tokens[agent], listen)
		if err == nil {
			return sc
		}
		s.l.count("reconnects", 1)
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// member is one member's life: take a message, do one of the things
// members do, again.
func (s *soak) member(ctx, drain context.Context, name string, listen bool) {
	rng := s.rng()
	sc := s.connect(drain, name, listen)
	if sc == nil {
		return
	}
	defer func() { sc.close() }()
	for drain.Err() == nil {
		msg, isErr, err := sc.call(drain, "fleet_next", map[string]any{"wait_s": 2})
		if err != nil {
			if drain.Err() != nil {
				return
			}
			sc.close()
			if sc = s.connect(drain, name, listen); sc == nil {
				return
			}
			continue
		}
		turn, _ := msg["turn_id"].(string)
		if isErr || turn == "" {
			if isErr {
				time.Sleep(20 * time.Millisecond) // the daemon is closing
			}
			continue
		}
		content, _ := msg["content"].(string)
		s.l.receive(name, turn, content)
		if rng.IntN(20) == 0 {
			s.storeTraffic(drain, sc, name, rng)
		}
		reply := "reply to " + turn
		switch p := rng.IntN(100); {
		case p < 10 && ctx.Err() == nil: // ask first, then reply
			a, isErr, err := sc.call(drain, "fleet_ask", map[string]any{"question": "which way for " + turn + "?", "default": "either"})
			s.l.count("questions asked", 1)
			if err == nil && !isErr {
				if a["timed_out"] == true {
					s.l.count("questions defaulted", 1)
				} else {
					s.l.count("questions answered", 1)
				}
			}
		case p < 15 && ctx.Err() == nil: // slow: often longer than the send bound
			time.Sleep(time.Duration(rng.IntN(5000)) * time.Millisecond)
		case p < 20 && ctx.Err() == nil: // never replies: the next fleet_next ends the turn
			s.l.count("turns left without a reply", 1)
			continue
		case p < 24 && listen && ctx.Err() == nil: // dies mid-turn
			s.l.count("member connections cut mid-turn", 1)
			sc.cut()
			sc.close()
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond)
			if sc = s.connect(drain, name, listen); sc == nil {
				return
			}
			continue
		case p < 28:
			reply += " " + strings.Repeat("x", 64<<10)
		}
		_, isErr, err = sc.call(drain, "fleet_reply", map[string]any{"content": reply})
		switch {
		case err != nil:
			s.l.count("replies broken in flight", 1)
		case !isErr:
			s.l.mu.Lock()
			s.l.replied[turn] = digest(reply)
			s.l.counts["replies taken"]++
			s.l.mu.Unlock()
		default:
			s.l.count("replies refused (turn over)", 1)
		}
	}
}

// storeTraffic puts a file and reads it back.
func (s *soak) storeTraffic(ctx context.Context, sc *soakConn, name string, rng *rand.Rand) {
	content := sealed(name, int(s.seq.Add(1)), 1+rng.IntN(16<<10))
	p, isErr, err := sc.call(ctx, "put", map[string]any{"agent_name": name, "file_name": fmt.Sprintf("f%d", s.seq.Add(1)), "content": content})
	if err != nil || isErr {
		return
	}
	g, isErr, err := sc.call(ctx, "get", map[string]any{"id": p["id"]})
	if err == nil && !isErr && g["content"] != content {
		s.t.Errorf("put and get of %v: content differs", p["id"])
	}
	s.l.count("files put and read back", 1)
}

// leadWorker sends work: blocking, detached, or blocking and abandoned.
func (s *soak) leadWorker(ctx, drain context.Context, members []string) {
	rng := s.rng()
	sc := s.connect(drain, "lead", false)
	if sc == nil {
		return
	}
	defer func() { sc.close() }()
	for ctx.Err() == nil {
		// A lead keeps a bounded amount of work in flight: about one
		// turn a member.
		s.l.mu.Lock()
		busy := s.l.open >= len(members)
		s.l.mu.Unlock()
		if busy {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		to := members[rng.IntN(len(members))]
		content := fmt.Sprintf("job %d for %s", s.seq.Add(1), to)
		mode := rng.IntN(10)
		args := map[string]any{"to": to, "content": content}
		callCtx, cancel := context.WithCancel(drain)
		switch {
		case mode < 4:
			args["wait"] = false
		case mode == 9: // the lead's connection drops mid-send
			time.AfterFunc(time.Duration(rng.IntN(1500))*time.Millisecond, cancel)
		}
		o, isErr, err := sc.call(callCtx, "fleet_send", args)
		cancel()
		switch {
		case err != nil && callCtx.Err() != nil && drain.Err() == nil:
			s.l.count("lead sends abandoned", 1)
			s.l.mu.Lock()
			s.l.abandoned[content] = true
			s.l.mu.Unlock()
			sc.close() // a dropped connection: a new one
			if sc = s.connect(drain, "lead", false); sc == nil {
				return
			}
			continue
		case err != nil:
			s.l.count("lead sends broken in flight", 1)
			sc.close()
			if sc = s.connect(drain, "lead", false); sc == nil {
				return
			}
			continue
		case isErr:
			if o["error"] != "ERR_CLOSED" {
				s.t.Errorf("fleet_send refused: %v", o)
			}
			continue
		}
		s.l.count("messages accepted", 1)
		s.l.mu.Lock()
		if turn, _ := o["turn_id"].(string); turn != "" {
			if _, done := s.l.outcomes[turn]; !done {
				s.l.open++
			}
			s.l.accepted[turn] = true
		}
		s.l.mu.Unlock()
		s.settle(drain, sc, o, rng)
	}
}

// settle follows a blocking call's outcome: a question is answered by its
// turn ID and the answer's own outcome followed the same way.
func (s *soak) settle(ctx context.Context, sc *soakConn, o map[string]any, rng *rand.Rand) {
	for o != nil {
		switch o["outcome"] {
		case "question":
			if rng.IntN(4) == 0 {
				return // left for the question window to default
			}
			a, isErr, err := sc.call(ctx, "fleet_send", map[string]any{"turn_id": o["turn_id"], "content": "this way"})
			if err != nil || isErr {
				return // the question went meanwhile, or the daemon did
			}
			o = a
		case "pending":
			return // the collector takes it from the ticket
		default:
			s.l.outcome(o, "call")
			return
		}
	}
}

// collector reads the lead's tickets, answers questions on them and acks
// finished ones, until stop says so.
func (s *soak) collector(ctx context.Context, stop func() bool) {
	rng := s.rng()
	sc := s.connect(ctx, "lead", false)
	if sc == nil {
		return
	}
	defer func() { sc.close() }()
	for !stop() {
		all, isErr, err := sc.call(ctx, "fleet_poll", map[string]any{"wait_s": 1})
		if err != nil || isErr {
			if err != nil {
				sc.close()
				if sc = s.connect(ctx, "lead", false); sc == nil {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		tickets, _ := all["tickets"].([]any)
		for _, tk := range tickets {
			o := tk.(map[string]any)
			switch o["outcome"] {
			case "question":
				if rng.IntN(2) == 0 {
					if a, isErr, err := sc.call(ctx, "fleet_send", map[string]any{"turn_id": o["turn_id"], "content": "that way"}); err == nil && !isErr {
						s.settle(ctx, sc, a, rng)
					}
				}
			case "reply", "turn_done", "failed":
				s.l.outcome(o, "ticket")
				if _, isErr, err := sc.call(ctx, "fleet_ack", map[string]any{"ticket": o["ticket"]}); err == nil && !isErr {
					s.l.count("tickets acked", 1)
				}
			}
		}
	}
}

// snapshot is the daemon's load on the Go runtime.
type snapshot struct {
	goroutines int
	heap       uint64
}

func measure() snapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return snapshot{runtime.NumGoroutine(), ms.HeapInuse}
}

func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Skip("the soak runs only when asked: go test ./cmd/fleetstate -run TestSoak -soak=10m -soak-members=100 -v")
	}
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, %d members, %d lead workers, %v, restart every ~%v", seed, *soakMembers, *soakLeadWorkers, *soakFor, *soakRestart)
	var seeds atomic.Uint64
	seeds.Store(seed)
	logs := &countingHandler{}
	d := &soakDaemon{dir: t.TempDir(), log: slog.New(logs)}
	var tokens map[string]string
	{
		st, err := fleetstate.Open(nil, d.dir, &fleetstate.Options{NoGitIgnore: true})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := auth.OpenTokens(st)
		if err != nil {
			t.Fatal(err)
		}
		agents := map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead}
		for i := range *soakMembers {
			agents[fmt.Sprintf("m%03d", i)] = mcpadapter.RoleMember
		}
		tokens = adaptertest.AddTokens(t, tk, agents)
		if _, err := st.NewSession("soak"); err != nil {
			t.Fatal(err)
		}
	}
	d.start(t)
	baseline := measure()
	s := &soak{t: t, d: d, tokens: tokens, l: newSoakLedger(t), rng: func() *rand.Rand {
		n := seeds.Add(1)
		return rand.New(rand.NewPCG(n, n*7919))
	}}
	var members []string
	for i := range *soakMembers {
		members = append(members, fmt.Sprintf("m%03d", i))
	}

	start := time.Now()
	ctx, stopLoad := context.WithTimeout(context.Background(), *soakFor)
	defer stopLoad()
	drain, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	var membersWG, leadWG, collectWG sync.WaitGroup
	for i, m := range members {
		membersWG.Go(func() { s.member(ctx, drain, m, i%4 == 0) }) // a quarter hold a listening stream, as the proxy does
	}
	for range *soakLeadWorkers {
		leadWG.Go(func() { s.leadWorker(ctx, drain, members) })
	}
	var collecting atomic.Bool
	collecting.Store(true)
	collectWG.Go(func() { s.collector(drain, func() bool { return !collecting.Load() }) })

	// Faults beside those of the actors: the daemon restarts.
	var peak snapshot
	restarts := 0
	rng := s.rng()
	ticker := time.NewTicker(5 * time.Second)
	nextRestart := time.Now().Add(jitter(rng, *soakRestart))
load:
	for {
		select {
		case <-ctx.Done():
			break load
		case <-ticker.C:
			if m := measure(); m.goroutines > peak.goroutines || m.heap > peak.heap {
				peak.goroutines, peak.heap = max(peak.goroutines, m.goroutines), max(peak.heap, m.heap)
			}
			if *soakRestart > 0 && time.Now().After(nextRestart) {
				d.stop()
				d.start(t)
				restarts++
				nextRestart = time.Now().Add(jitter(rng, *soakRestart))
			}
		}
	}
	ticker.Stop()
	loadEnd := time.Now()

	// Drain: no new work; members go on until every ticket is settled.
	leadWG.Wait()
	lead := s.connect(drain, "lead", false)
	open, queued := -1, -1 // unknown until a poll and a members call succeed
	if !fleettest.Until(3*time.Minute, 200*time.Millisecond, func() bool {
		all, isErr, err := lead.call(drain, "fleet_poll", nil)
		mem, isErr2, err2 := lead.call(drain, "fleet_members", nil)
		if err != nil || err2 != nil || isErr || isErr2 {
			return false
		}
		open, queued = len(all["tickets"].([]any)), 0
		for _, m := range mem["members"].([]any) {
			queued += int(m.(map[string]any)["queued"].(float64))
		}
		return open == 0 && queued == 0
	}) {
		t.Fatalf("after the load, %d tickets and %d queued messages never settled (-1: never read)", open, queued)
	}
	collecting.Store(false)
	collectWG.Wait()
	stopAll()
	membersWG.Wait()
	lead.close()
	drained := time.Now()

	// The ledger.
	l := s.l
	l.mu.Lock()
	lost, handoff := 0, 0

	abandonedTurns := map[string]bool{}
	for content := range l.abandoned {
		if turn := l.turnOf[content]; turn != "" {
			abandonedTurns[turn] = true
		}
	}
	for turn, reply := range l.replied {
		o, ok := l.outcomes[turn]
		switch {
		case !ok && abandonedTurns[turn]:
			// Handed to the lead's blocking call in the instant the lead
			// gave it up: it must still have been held on its ticket.
			handoff++
			t.Errorf("reply to turn %s, whose blocking send the lead abandoned, never reached the lead", turn)
		case !ok:
			lost++
			t.Errorf("reply to turn %s was taken but never reached the lead", turn)
		case o.kind != "reply" || o.content != reply:
			t.Errorf("turn %s: the member's reply was taken, the lead got %+v", turn, o)
		}
	}
	for turn := range l.accepted {
		if _, ok := l.outcomes[turn]; !ok {
			lost++
			t.Errorf("turn %s was accepted and never reached an outcome (delivered to %q)", turn, l.received[turn])
		}
	}
	t.Logf("load %v, drain %v, %d daemon restarts", loadEnd.Sub(start).Round(time.Second), drained.Sub(loadEnd).Round(time.Second), restarts)
	keys := make([]string, 0, len(l.counts))
	for k := range l.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("  %-40s %d", k, l.counts[k])
	}
	t.Logf("  %-40s %d", "replies or turns lost", lost)
	t.Logf("  %-40s %d", "replies lost to an abandoned blocking call", handoff)
	t.Logf("  %-40s %d", "messages delivered twice", countOver(l.receivedBy, 1))
	t.Logf("rendezvous log: %d errors, %d warnings %v", logs.errors.Load(), logs.warns.Load(), logs.samples)
	l.mu.Unlock()

	// Goroutines and memory back to where they started, the ledger (the
	// test's own memory) dropped first.
	s.l, l = nil, nil
	var end snapshot
	fleettest.Until(30*time.Second, 500*time.Millisecond, func() bool {
		end = measure()
		return end.goroutines <= baseline.goroutines+2 && end.heap <= baseline.heap+16<<20
	}) // the checks below say what did not settle
	d.stop()
	t.Logf("goroutines: baseline %d, peak %d, end %d; heap in use: baseline %.1f MiB, peak %.1f MiB, end %.1f MiB",
		baseline.goroutines, peak.goroutines, end.goroutines, mib(baseline.heap), mib(peak.heap), mib(end.heap))
	if end.goroutines > baseline.goroutines+2 {
		t.Errorf("goroutines: %d at the end; baseline %d", end.goroutines, baseline.goroutines)
		buf := make([]byte, 1<<20)
		t.Logf("%s", buf[:runtime.Stack(buf, true)])
	}
	if end.heap > baseline.heap+16<<20 {
		t.Errorf("heap in use %.1f MiB at the end; baseline %.1f MiB", mib(end.heap), mib(baseline.heap))
	}
}

func jitter(rng *rand.Rand, mean time.Duration) time.Duration {
	if mean <= 0 {
		return time.Duration(1<<62 - 1)
	}
	return mean/2 + time.Duration(rng.Int64N(int64(mean)))
}

func countOver(m map[string]int, n int) int {
	c := 0
	for _, v := range m {
		if v > n {
			c++
		}
	}
	return c
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// digest keeps the ledger small: it holds the hash of contents, not them.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
