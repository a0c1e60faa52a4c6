package fleetnats_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/fleetstate/fleetstate/internal/natstest"
)

// TestUnconfirmedDecisionSuite runs the contract of a decision whose
// write failed (package fleetstatetest) on the ownerships of fleets on
// one server, a fleet per test.
func TestUnconfirmedDecisionSuite(t *testing.T) {
	srv := natstest.Run(t)
	fleetstatetest.TestUnconfirmedDecision(t, func(t *testing.T) fleetstatetest.JournalFleet {
		return journalFleet{newTestFleet(t, srv.URL()).fleet}
	})
}

// TestDecisionWhileTheServerIsPaused: with the server that leads the
// turns' stream paused (its socket holds what the owner sends), an allow
// times out and reports that it may have taken effect; a deny after it is
// refused, as the allow lands when the server resumes. The agent gets the
// allow only once a write of it is acknowledged, and the next owner finds
// the request allowed: never the deny, never the allow before it was
// written.
func TestDecisionWhileTheServerIsPaused(t *testing.T) {
	srv := natstest.Run(t)
	link := newPausableLink(t, strings.TrimPrefix(srv.URL(), "nats://"))
	f := connect(t, "nats://"+link.addr(), "paused", callTimeout)
	r := pausedOwner(t, f)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, _ := r.Subscribe(0)
	req := fleetstate.PermissionRequest{Key: "s/t1", Tool: "Bash", Input: `{"command":"rm -rf build"}`, Timeout: time.Minute}
	type decided struct {
		d   fleetstate.Decision
		ok  bool
		err error
	}
	got := make(chan decided, 1)
	go func() {
		d, ok, err := r.RequestPermission(ctx, "scout", req)
		got <- decided{d, ok, err}
	}()
	var p fleetstate.PermissionRequest
	for p.ID == "" {
		select {
		case e := <-sub.Events():
			if e.Kind == fleetstate.EventPermissionRequested {
				p = *e.Permission
			}
		case <-time.After(callTimeout):
			t.Fatalf("no permission request within %v", callTimeout)
		}
	}
	sub.Close()

	link.pause()
	err := r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow})
	if fleetstate.CodeOf(err) != fleetstate.CodeDecisionUnconfirmed {
		t.Fatalf("an allow while the server is paused: %v; want %s", err, fleetstate.CodeDecisionUnconfirmed)
	}
	err = r.DecidePermission("lead", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: "no"})
	if fleetstate.CodeOf(err) != fleetstate.CodeRequestDecided {
		t.Fatalf("a deny after the unconfirmed allow: %v; want %s", err, fleetstate.CodeRequestDecided)
	}
	select {
	case res := <-got:
		t.Fatalf("the agent got %+v while the server was paused", res)
	default:
	}
	link.resume()
	select {
	case res := <-got:
		if res.err != nil || !res.ok || res.d.Behavior != fleetstate.BehaviorAllow || res.d.By != "operator" {
			t.Fatalf("RequestPermission = %+v, %v, %v; want allow by operator", res.d, res.ok, res.err)
		}
	case <-time.After(callTimeout):
		t.Fatalf("the allow did not take effect within %v of the server's resumption", callTimeout)
	}

	r.Close()
	d, ok, err := pausedOwner(t, f).RequestPermission(ctx, "scout", req)
	if err != nil || !ok || d.Behavior != fleetstate.BehaviorAllow || d.By != "operator" {
		t.Fatalf("the request asked again of the next owner = %+v, %v, %v; want allow by operator", d, ok, err)
	}
}

// pausedOwner owns f, with a lease that outlives the test's pause, and
// opens a rendezvous whose writes of the turns time out after a second.
func pausedOwner(t *testing.T, f *fleetnats.Fleet) *fleetstate.Rendezvous {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	own, err := f.Own(ctx, fleetnats.OwnOptions{LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r, err := fleetstate.NewRendezvous(fleetstate.OpenBackend(f.Store(), nil),
		&fleetstate.RendezvousOptions{Journal: boundedJournal{own, time.Second}})
	if err != nil {
		own.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// boundedJournal bounds each Save by bound, shorter than the
// rendezvous's own bound.
type boundedJournal struct {
	*fleetnats.Ownership
	bound time.Duration
}

func (j boundedJournal) Save(ctx context.Context, id string, rec []byte) error {
	ctx, cancel := context.WithTimeout(ctx, j.bound)
	defer cancel()
	return j.Ownership.Save(ctx, id, rec)
}

// pausableLink forwards TCP connections to a server. While paused it
// holds what clients send, as the socket of a stopped (SIGSTOP) server
// does, and delivers it when resumed.
type pausableLink struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	resumed chan struct{} // while paused: closed by resume
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newPausableLink(t *testing.T, target string) *pausableLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &pausableLink{ln: ln, target: target}
	l.wg.Go(l.accept)
	t.Cleanup(l.close)
	return l
}

func (l *pausableLink) addr() string { return l.ln.Addr().String() }

func (l *pausableLink) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", l.target)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, c, s)
		l.mu.Unlock()
		l.wg.Go(func() { l.pipe(s, c, true) })
		l.wg.Go(func() { l.pipe(c, s, false) })
	}
}

// pipe copies src to dst; with held, what it read waits while the link is
// paused.
func (l *pausableLink) pipe(dst, src net.Conn, held bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && held {
			l.mu.Lock()
			resumed := l.resumed
			l.mu.Unlock()
			if resumed != nil {
				<-resumed
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *pausableLink) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resumed == nil {
		l.resumed = make(chan struct{})
	}
}

func (l *pausableLink) resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resumed != nil {
		close(l.resumed)
		l.resumed = nil
	}
}

// close resumes the link, closes every connection and waits for its
// goroutines.
func (l *pausableLink) close() {
	l.resume()
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// TestLossEndsTheWriteInFlight: a write of the turns waiting on a server
// that stopped answering (paused, as by SIGSTOP) does not hold the loss of
// the ownership up: the lease's renewals fail, the ownership is lost
// within its TTL, and the write ends then, unavailable, rather than at its
// own bound, a minute on. Before, the loss waited for the write, and the
// writes queued behind it each waited their own bound: a daemon whose
// server was paused kept its callers waiting past any client's patience.
func TestLossEndsTheWriteInFlight(t *testing.T) {
	srv := natstest.Run(t)
	link := newPausableLink(t, strings.TrimPrefix(srv.URL(), "nats://"))
	f := connect(t, "nats://"+link.addr(), "lossy", callTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	own, err := f.Own(ctx, fleetnats.OwnOptions{LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.Save(ctx, "t1", []byte(`{"id":"t1"}`)); err != nil {
		t.Fatal(err)
	}

	link.pause()
	defer link.resume()
	wrote := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		wrote <- own.Save(ctx, "t2", []byte(`{"id":"t2"}`))
	}()
	select {
	case <-own.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("the ownership was not lost within 20 s of its server's pause (lease 2 s)")
	}
	select {
	case err := <-wrote:
		if fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
			t.Fatalf("the write in flight at the loss: %v; want %s", err, fleetstate.CodeUnavailable)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write in flight still waits 5 s after the ownership was lost")
	}
}
