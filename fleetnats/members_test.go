package fleetnats_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetmem"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/afero"
)

// memberDaemon connects one daemon to the fleet "members"; log, if not nil,
// receives its log.
func memberDaemon(t *testing.T, url string, log *lockedWriter) *fleetnats.Fleet {
	t.Helper()
	opts := fleetnats.Options{URL: url, Fleet: "members", Timeout: 2 * time.Second}
	if log != nil {
		opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	f, err := fleetnats.Connect(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// lockedWriter is a log that the test reads while the daemon writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// memberServe serves ports from f until the test ends.
func memberServe(t *testing.T, f *fleetnats.Fleet, ports map[string]fleetstate.Member, opts *fleetnats.ServeOptions) *fleetnats.MemberServer {
	t.Helper()
	s, err := f.ServeMembers(context.Background(), ports, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// memberOwner runs a rendezvous with fast status reads.
func memberOwner(t *testing.T) *fleetstate.Rendezvous {
	t.Helper()
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/s", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, &fleetstate.RendezvousOptions{
		PollInterval: 20 * time.Millisecond,
		PickupGrace:  time.Minute,
		PortTimeout:  2 * time.Second,
		SendTimeout:  30 * time.Second,
		ReadyTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rv.Close() })
	return rv
}

// memberAdd registers name on rv behind port, ready.
func memberAdd(t *testing.T, rv *fleetstate.Rendezvous, name string, port fleetstate.Member) {
	t.Helper()
	if err := rv.AddMember(name, port); err != nil {
		t.Fatal(err)
	}
	if err := rv.SetReady(name, true); err != nil {
		t.Fatal(err)
	}
}

// memberWait polls cond until it holds, failing the test after a bound.
func memberWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func memberLookup(rv *fleetstate.Rendezvous, name string) fleetstate.MemberInfo {
	for _, m := range rv.Members() {
		if m.Name == name {
			return m
		}
	}
	return fleetstate.MemberInfo{}
}

func memberReceive(t *testing.T, lm *fleetmem.Member) string {
	t.Helper()
	select {
	case s := <-lm.Inbox():
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery came")
		return ""
	}
}

// countingPort counts the calls of a port.
type countingPort struct {
	fleetstate.Member
	status, deliver atomic.Int64
}

func (c *countingPort) Status(ctx context.Context) (fleetstate.Status, error) {
	c.status.Add(1)
	return c.Member.Status(ctx)
}

func (c *countingPort) Deliver(ctx context.Context, content string) error {
	c.deliver.Add(1)
	return c.Member.Deliver(ctx, content)
}

// reads waits until the port's status was read n more times.
func (c *countingPort) reads(t *testing.T, n int64) {
	t.Helper()
	from := c.status.Load()
	memberWait(t, "status reads", func() bool { return c.status.Load() >= from+n })
}

// reportingPane is a pane that takes hook reports, as a tmux pane does.
type reportingPane struct{ *fleetmem.Member }

func (p reportingPane) Report(st fleetstate.Status) { p.SetStatus(st) }

// TestMemberSendAcrossDaemons: the owner's rendezvous on daemon A delivers
// to a pane daemon B serves, the member's reply reaches A's lead, and a
// turn that ends without a reply is triaged from the pane's tail read
// across the hop.
func TestMemberSendAcrossDaemons(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	lm := fleetmem.NewMember()
	memberServe(t, b, map[string]fleetstate.Member{"w1": lm}, nil)
	rv := memberOwner(t)
	memberAdd(t, rv, "w1", a.RemoteMember("w1"))
	ctx := context.Background()

	type result struct {
		o   fleetstate.Outcome
		err error
	}
	sent := make(chan result, 1)
	go func() {
		o, err := rv.Send(ctx, "lead", "w1", "hello")
		sent <- result{o, err}
	}()
	if got := memberReceive(t, lm); got != "hello" {
		t.Fatalf("B's pane got %q; want hello", got)
	}
	lm.SetStatus(fleetstate.StatusWorking)
	memberWait(t, "A to read WORKING", func() bool { return memberLookup(rv, "w1").Status == "WORKING" })
	if err := rv.Reply("w1", "hi back"); err != nil {
		t.Fatal(err)
	}
	if r := <-sent; r.err != nil || r.o.Kind != fleetstate.OutcomeReply || r.o.Content != "hi back" {
		t.Fatalf("Send = %+v, %v; want the reply", r.o, r.err)
	}

	// A turn without a reply: A reads WORKING, then IDLE, and the tail.
	lm.SetStatus(fleetstate.StatusIdle)
	memberWait(t, "A to read IDLE", func() bool { return memberLookup(rv, "w1").Status == "IDLE" })
	o, err := rv.SendDetached("lead", "w1", "work quietly")
	if err != nil {
		t.Fatal(err)
	}
	if got := memberReceive(t, lm); got != "work quietly" {
		t.Fatalf("B's pane got %q", got)
	}
	lm.SetStatus(fleetstate.StatusWorking)
	memberWait(t, "A to read WORKING", func() bool { return memberLookup(rv, "w1").Status == "WORKING" })
	lm.Print("done, quietly")
	lm.SetStatus(fleetstate.StatusIdle)
	got, err := rv.Poll(ctx, "lead", o.Ticket, 20*time.Second)
	if err != nil || got.Kind != fleetstate.OutcomeTurnDone || !strings.Contains(got.Content, "done, quietly") {
		t.Fatalf("Poll = %+v, %v; want turn_done with B's tail", got, err)
	}
}

// TestMemberStatusGating: A delivers nothing while B's pane is WORKING,
// nor while B is gone (its status reads as UNKNOWN); the message stays
// queued and is delivered once a daemon serves the pane again.
func TestMemberStatusGating(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	ttl := time.Second
	lm := fleetmem.NewMember()
	lm.SetStatus(fleetstate.StatusWorking)
	memberServe(t, b, map[string]fleetstate.Member{"w1": lm}, &fleetnats.ServeOptions{TTL: ttl})
	rv := memberOwner(t)
	port := &countingPort{Member: a.RemoteMember("w1")}
	memberAdd(t, rv, "w1", port)
	memberWait(t, "A to read WORKING", func() bool { return memberLookup(rv, "w1").Status == "WORKING" })
	if _, err := rv.SendDetached("lead", "w1", "later"); err != nil {
		t.Fatal(err)
	}
	port.reads(t, 3)
	if n := port.deliver.Load(); n != 0 || memberLookup(rv, "w1").Queued != 1 {
		t.Fatalf("to a WORKING pane: %d deliveries, %+v; want none, one queued", n, memberLookup(rv, "w1"))
	}

	// B dies; its pane goes idle, but A cannot know.
	b.Conn().Close()
	lm.SetStatus(fleetstate.StatusIdle)
	memberWait(t, "A to read UNKNOWN", func() bool { return memberLookup(rv, "w1").Status == "UNKNOWN" })
	port.reads(t, 3)
	if n := port.deliver.Load(); n != 0 || memberLookup(rv, "w1").Queued != 1 {
		t.Fatalf("with B gone: %d deliveries, %+v; want none, one queued", n, memberLookup(rv, "w1"))
	}

	// B comes back (a new connection) and claims the pane once the old
	// registration expired.
	b2 := memberDaemon(t, url, nil)
	memberServe(t, b2, map[string]fleetstate.Member{"w1": lm}, &fleetnats.ServeOptions{TTL: ttl})
	if got := memberReceive(t, lm); got != "later" {
		t.Fatalf("after B came back the pane got %q; want later", got)
	}
	if n := port.deliver.Load(); n != 1 {
		t.Errorf("%d deliveries; want 1", n)
	}
}

// TestMemberGoneCrossesTheHop: a pane gone for good on B reads as
// ErrMemberGone on A, and A's open turn fails member_gone.
func TestMemberGoneCrossesTheHop(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	lm := fleetmem.NewMember()
	memberServe(t, b, map[string]fleetstate.Member{"w1": lm}, nil)
	rv := memberOwner(t)
	memberAdd(t, rv, "w1", a.RemoteMember("w1"))
	ctx := context.Background()
	o, err := rv.SendDetached("lead", "w1", "hello")
	if err != nil {
		t.Fatal(err)
	}
	memberReceive(t, lm)
	lm.Kill()
	got, err := rv.Poll(ctx, "lead", o.Ticket, 20*time.Second)
	if err != nil || got.Kind != fleetstate.OutcomeFailed || got.Reason != fleetstate.ReasonMemberGone {
		t.Fatalf("Poll = %+v, %v; want failed member_gone", got, err)
	}

	rm := a.RemoteMember("w1")
	if _, err := rm.Status(ctx); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Errorf("Status: %v; want ErrMemberGone", err)
	}
	if err := rm.Deliver(ctx, "x"); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Errorf("Deliver: %v; want ErrMemberGone", err)
	}
	if _, _, err := rm.Tail(ctx, 10); !errors.Is(err, fleetstate.ErrMemberGone) {
		t.Errorf("Tail: %v; want ErrMemberGone", err)
	}
}

// TestMemberNotServed: a pane no daemon serves is unavailable, never gone;
// a context that ends ends the call with its own error.
func TestMemberNotServed(t *testing.T) {
	url := natstest.Run(t).URL()
	a := memberDaemon(t, url, nil)
	rm := a.RemoteMember("nobody")
	ctx := context.Background()
	st, err := rm.Status(ctx)
	if st != fleetstate.StatusUnknown || fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Errorf("Status = %v, %v; want UNKNOWN, ERR_UNAVAILABLE", st, err)
	}
	if err := rm.Deliver(ctx, "x"); fleetstate.CodeOf(err) != fleetstate.CodeUnavailable || errors.Is(err, fleetstate.ErrMemberGone) {
		t.Errorf("Deliver: %v; want ERR_UNAVAILABLE", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := rm.Status(cctx); err != context.Canceled {
		t.Errorf("Status with a cancelled context: %v; want context.Canceled", err)
	}
}

// stuckPane is a pane whose writes hang, ignoring their context, until
// released: a delivery's answer comes too late.
type stuckPane struct {
	*fleetmem.Member
	release  chan struct{}
	delivers atomic.Int64
}

func (p *stuckPane) Deliver(_ context.Context, content string) error {
	p.delivers.Add(1)
	<-p.release
	return p.Member.Deliver(context.Background(), content)
}

// TestMemberDeliverOnce: a delivery whose answer did not come in time is
// not made again when the rendezvous tries it again.
func TestMemberDeliverOnce(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	p := &stuckPane{Member: fleetmem.NewMember(), release: make(chan struct{})}
	memberServe(t, b, map[string]fleetstate.Member{"w1": p}, nil)
	rm := a.RemoteMember("w1")
	// The calls to the hung pane give up after 300 ms; the later ones
	// have longer, since they must succeed even on a slow machine.
	deliver := func(within time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		return rm.Deliver(ctx, "once")
	}
	if err := deliver(300 * time.Millisecond); err == nil {
		t.Fatal("Deliver to a hung pane succeeded")
	}
	// Again while the first still hangs: in doubt, not made again.
	if err := deliver(300 * time.Millisecond); err == nil {
		t.Fatal("second Deliver to a hung pane succeeded")
	}
	close(p.release)
	if got := memberReceive(t, p.Member); got != "once" {
		t.Fatalf("pane got %q", got)
	}
	if err := deliver(10 * time.Second); err != nil {
		t.Fatalf("Deliver after the first landed: %v; want its success", err)
	}
	if n := p.delivers.Load(); n != 1 {
		t.Errorf("the pane was written %d times; want 1", n)
	}
	select {
	case s := <-p.Inbox():
		t.Errorf("a second delivery %q", s)
	default:
	}
	// Once answered, the next Deliver is a new delivery, of the same
	// content or not.
	if err := deliver(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := p.delivers.Load(); n != 2 {
		t.Errorf("the pane was written %d times; want 2", n)
	}
}

// TestMemberReport: a hook's status reaches the pane's daemon; a pane that
// takes no reports refuses it.
func TestMemberReport(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	hooked := reportingPane{fleetmem.NewMember()}
	memberServe(t, b, map[string]fleetstate.Member{"hooked": hooked, "plain": fleetmem.NewMember()}, nil)
	ctx := context.Background()
	if err := a.RemoteMember("hooked").Report(ctx, fleetstate.StatusBlocked); err != nil {
		t.Fatal(err)
	}
	if st, _ := hooked.Status(ctx); st != fleetstate.StatusBlocked {
		t.Errorf("pane status %v; want BLOCKED", st)
	}
	if err := a.RemoteMember("plain").Report(ctx, fleetstate.StatusBlocked); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
		t.Errorf("Report to a pane without hooks: %v; want ERR_INVALID_ARGUMENT", err)
	}
}

// TestMemberCall: a call about an agent reaches the daemon of its pane,
// with the agent's name, and its answer or its error comes back; a daemon
// that takes no calls refuses them. Panes lists the registrations, with
// the panes whose agents have a work tree.
func TestMemberCall(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b, c := memberDaemon(t, url, nil), memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	memberServe(t, b, map[string]fleetstate.Member{"scout": fleetmem.NewMember()}, &fleetnats.ServeOptions{
		Call: func(ctx context.Context, agent string, body json.RawMessage) (json.RawMessage, error) {
			if string(body) == `"fail"` {
				return nil, &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "call", Err: errors.New("no")}
			}
			return json.Marshal(map[string]string{"agent": agent, "got": string(body)})
		}})
	memberServe(t, c, map[string]fleetstate.Member{"plain": fleetmem.NewMember(), "treed": fleetmem.NewMember()}, &fleetnats.ServeOptions{Worktrees: []string{"treed"}})
	ctx := context.Background()
	if panes, err := a.Panes(ctx); err != nil || len(panes) != 3 || !panes["treed"].Worktree || panes["plain"].Worktree || panes["scout"].Worktree {
		t.Errorf("Panes = %+v, %v; want scout, plain and treed, treed's with a work tree", panes, err)
	}
	got, err := a.RemoteMember("scout").Call(ctx, json.RawMessage(`{"op":"x"}`))
	if err != nil || string(got) != `{"agent":"scout","got":"{\"op\":\"x\"}"}` {
		t.Fatalf("Call = %s, %v", got, err)
	}
	if _, err := a.RemoteMember("scout").Call(ctx, json.RawMessage(`"fail"`)); fleetstate.CodeOf(err) != fleetstate.CodeNotPermitted {
		t.Errorf("a failing call: %v; want its ERR_NOT_PERMITTED", err)
	}
	if _, err := a.RemoteMember("plain").Call(ctx, json.RawMessage(`{}`)); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
		t.Errorf("a call to a daemon that takes none: %v; want ERR_INVALID_ARGUMENT", err)
	}
	if _, err := a.RemoteMember("nobody").Call(ctx, json.RawMessage(`{}`)); fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Errorf("a call about a pane nobody serves: %v; want ERR_UNAVAILABLE", err)
	}
}

// paneEvents records what WatchPanes reports.
type paneEvents struct {
	mu  sync.Mutex
	got []string
}

func (e *paneEvents) add(name string, present bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sign := "-"
	if present {
		sign = "+"
	}
	e.got = append(e.got, sign+name)
}

func (e *paneEvents) has(ev string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.got, ev)
}

// TestWatchPanes: the owner learns of the panes registered before it
// watched (before WatchPanes returns), of a pane registered later, of one
// unregistered by Close, and of those of a daemon that died, when their
// registrations expire.
func TestWatchPanes(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b, c := memberDaemon(t, url, nil), memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	odd := "w.2 *>"
	memberServe(t, b, map[string]fleetstate.Member{"w1": fleetmem.NewMember(), odd: fleetmem.NewMember()},
		&fleetnats.ServeOptions{TTL: 2 * time.Second}) // short, yet a stalled refresh does not expire a pane
	var ev paneEvents
	stop, err := a.WatchPanes(context.Background(), ev.add)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ev.mu.Lock()
	initial := slices.Sorted(slices.Values(ev.got))
	ev.mu.Unlock()
	if want := []string{"+" + odd, "+w1"}; !slices.Equal(initial, want) {
		t.Fatalf("initial panes %q; want %q", initial, want)
	}
	if _, err := a.RemoteMember(odd).Status(context.Background()); err != nil {
		t.Errorf("Status of %q: %v", odd, err)
	}

	sc := memberServe(t, c, map[string]fleetstate.Member{"w3": fleetmem.NewMember()}, nil)
	memberWait(t, "+w3", func() bool { return ev.has("+w3") })
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	memberWait(t, "-w3", func() bool { return ev.has("-w3") })

	b.Conn().Close()
	memberWait(t, "B's panes to expire", func() bool { return ev.has("-w1") && ev.has("-"+odd) })
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if n := len(ev.got); n != 6 {
		t.Errorf("events %q; want each pane once present and once gone", ev.got)
	}
}

// TestMemberClaimedTwice: of two daemons with the same pane in their
// rosters the first serves it and the second logs why it does not, until
// the first goes.
func TestMemberClaimedTwice(t *testing.T) {
	url := natstest.Run(t).URL()
	var log lockedWriter
	a, b, c := memberDaemon(t, url, nil), memberDaemon(t, url, nil), memberDaemon(t, url, &log)
	ttl := 2 * time.Second // short, yet a stalled refresh does not let C take B's pane
	lb, lc := fleetmem.NewMember(), fleetmem.NewMember()
	sb := memberServe(t, b, map[string]fleetstate.Member{"w1": lb}, &fleetnats.ServeOptions{TTL: ttl, Daemon: "daemon-b"})
	sc := memberServe(t, c, map[string]fleetstate.Member{"w1": lc}, &fleetnats.ServeOptions{TTL: ttl, Daemon: "daemon-c"})
	if got := sb.Served(); !slices.Equal(got, []string{"w1"}) {
		t.Errorf("B serves %q; want w1", got)
	}
	if got := sc.Served(); len(got) != 0 {
		t.Errorf("C serves %q; want none", got)
	}
	if out := log.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "daemon-b") {
		t.Errorf("C's log %q; want an error naming daemon-b", out)
	}
	ctx := context.Background()
	rm := a.RemoteMember("w1")
	if err := rm.Deliver(ctx, "to b"); err != nil {
		t.Fatal(err)
	}
	if got := memberReceive(t, lb); got != "to b" {
		t.Fatalf("B's pane got %q", got)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	memberWait(t, "C to take the pane over", func() bool { return len(sc.Served()) == 1 })
	if err := rm.Deliver(ctx, "to c"); err != nil {
		t.Fatal(err)
	}
	if got := memberReceive(t, lc); got != "to c" {
		t.Fatalf("C's pane got %q", got)
	}
}

// TestMemberRestartSameDaemon: a daemon that restarts with the same ID
// serves its panes again at once, its old registrations still alive.
func TestMemberRestartSameDaemon(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	lm := fleetmem.NewMember()
	opts := &fleetnats.ServeOptions{Daemon: "daemon-b"}
	memberServe(t, b, map[string]fleetstate.Member{"w1": lm}, opts)
	b.Conn().Close()
	b2 := memberDaemon(t, url, nil)
	s2 := memberServe(t, b2, map[string]fleetstate.Member{"w1": lm}, opts)
	if got := s2.Served(); !slices.Equal(got, []string{"w1"}) {
		t.Fatalf("the restarted daemon serves %q; want w1", got)
	}
	if err := a.RemoteMember("w1").Deliver(context.Background(), "back"); err != nil {
		t.Fatal(err)
	}
	if got := memberReceive(t, lm); got != "back" {
		t.Fatalf("pane got %q", got)
	}
}

// TestServeMembersBadName: a roster name that is not an agent name is
// refused.
func TestServeMembersBadName(t *testing.T) {
	url := natstest.Run(t).URL()
	b := memberDaemon(t, url, nil)
	_, err := b.ServeMembers(context.Background(), map[string]fleetstate.Member{"a::b": fleetmem.NewMember()}, nil)
	if !errors.Is(err, fleetstate.ErrInvalidAgentName) {
		t.Fatalf("ServeMembers: %v; want ErrInvalidAgentName", err)
	}
}

// TestMemberLargeBrief: a brief too large for one NATS message (as it is,
// or once escaped as JSON) reaches the pane of another daemon whole, and
// the blob that carried it is gone after.
func TestMemberLargeBrief(t *testing.T) {
	url := natstest.Run(t).URL()
	a, b := memberDaemon(t, url, nil), memberDaemon(t, url, nil)
	panes := map[string]fleetstate.Member{}
	rv := memberOwner(t)
	var text strings.Builder
	for i := 0; text.Len() < 3<<20; i++ {
		fmt.Fprintf(&text, "line %d of a long brief, \"quoted\" <tag> & é\n", i)
	}
	briefs := []string{text.String(), strings.Repeat("\x01", 300<<10)}
	for i := range briefs {
		panes["w"+strconv.Itoa(i)] = fleetmem.NewMember()
	}
	memberServe(t, b, panes, nil)
	for name := range panes {
		memberAdd(t, rv, name, a.RemoteMember(name))
	}
	for i, brief := range briefs {
		name := "w" + strconv.Itoa(i)
		lm := panes[name].(*fleetmem.Member)
		o, err := rv.SendDetached("lead", name, brief)
		if err != nil {
			t.Fatal(err)
		}
		if got := memberReceive(t, lm); got != brief {
			t.Fatalf("B's pane got %d bytes; want the %d-byte brief whole", len(got), len(brief))
		}
		if err := rv.ReplyTurn(name, o.TurnID, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := a.JetStream().KeyValue(ctx, "members-turnblobs")
	if err != nil {
		t.Fatalf("the blobs of large briefs: %v", err)
	}
	keys, err := kv.ListKeys(ctx)
	var left []string
	if err == nil {
		for k := range keys.Keys() {
			left = append(left, k)
		}
	}
	if (err != nil && !errors.Is(err, jetstream.ErrNoKeysFound)) || len(left) > 0 {
		t.Fatalf("blobs left after delivery: %v, %v; want none", left, err)
	}
}
