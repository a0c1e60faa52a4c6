package fleetwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon/events"

	tea "charm.land/bubbletea/v2"
	"go.uber.org/goleak"

	"github.com/fleetstate/fleetstate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDaemon serves /events as the daemon does, each connection by the
// script its number picks.
type fakeDaemon struct {
	srv   *httptest.Server
	conns atomic.Int32
	token string
	// script writes connection n's stream (n from 1); it returns to end
	// the stream, or blocks until the request's context ends.
	script func(n int, w http.ResponseWriter, r *http.Request)
}

func newFakeDaemon(t *testing.T, script func(n int, w http.ResponseWriter, r *http.Request)) *fakeDaemon {
	t.Helper()
	d := &fakeDaemon{token: "fso_test", script: script}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != events.Path {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+d.token {
			http.Error(w, "unauthorized: the events are for a lead's token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		d.script(int(d.conns.Add(1)), w, r)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *fakeDaemon) source() Source {
	return func() (string, string, error) { return d.srv.URL, d.token, nil }
}

func writeEvent(w http.ResponseWriter, kind string, v any) {
	data, _ := json.Marshal(v)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, data)
	w.(http.Flusher).Flush()
}

func snap(seq uint64, members ...string) fleetstate.Snapshot {
	s := fleetstate.Snapshot{Seq: seq, Tickets: []fleetstate.TicketInfo{}}
	for _, m := range members {
		s.Members = append(s.Members, fleetstate.MemberInfo{Name: m, Status: "PULL"})
	}
	return s
}

// run starts the stream's Run and returns its messages; the test's
// cleanup stops it and waits for it to end.
func run(t *testing.T, s *Stream, ctx context.Context, cancel context.CancelFunc) <-chan tea.Msg {
	t.Helper()
	out := make(chan tea.Msg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.Run(ctx, out)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return out
}

func next(t *testing.T, msgs <-chan tea.Msg) tea.Msg {
	t.Helper()
	select {
	case msg, ok := <-msgs:
		if !ok {
			t.Fatal("the stream closed its channel")
		}
		return msg
	case <-time.After(10 * time.Second):
		t.Fatal("no message from the stream in 10s")
	}
	return nil
}

func fast(o Options) Options {
	o.MinBackoff, o.MaxBackoff = time.Millisecond, 4*time.Millisecond
	return o
}

// The stream hands over the snapshot and the events in order; a gap makes
// it reconnect at once for a fresh snapshot; a stream that ends makes it
// report the fault and connect again.
func TestStreamSnapshotEventsGapAndReconnect(t *testing.T) {
	d := newFakeDaemon(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			writeEvent(w, "snapshot", snap(1, "scout"))
			fmt.Fprint(w, ": keep-alive\n\n")
			writeEvent(w, "event", fleetstate.Event{Seq: 2, Kind: fleetstate.EventReady, Member: "scout"})
			writeEvent(w, "event", fleetstate.Event{Seq: 9, Kind: fleetstate.EventGone, Member: "scout", Gap: 6})
			<-r.Context().Done() // the client must hang up by itself
		case 2:
			writeEvent(w, "snapshot", snap(9, "scout", "miner"))
			// and the daemon goes away
		default:
			writeEvent(w, "snapshot", snap(12, "scout"))
			<-r.Context().Done()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Dial(ctx, d.source(), fast(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := run(t, s, ctx, cancel)

	if m, ok := next(t, msgs).(SnapshotMsg); !ok || m.Snapshot.Seq != 1 || m.URL != d.srv.URL {
		t.Fatalf("first message %#v; want the snapshot of seq 1 from %s", m, d.srv.URL)
	}
	if m, ok := next(t, msgs).(EventMsg); !ok || m.Event.Seq != 2 || m.Event.Kind != fleetstate.EventReady {
		t.Fatalf("second message %#v; want the ready event", m)
	}
	if m, ok := next(t, msgs).(GapMsg); !ok || m.Missed != 6 {
		t.Fatalf("third message %#v; want a gap of 6", m)
	}
	if m, ok := next(t, msgs).(SnapshotMsg); !ok || m.Snapshot.Seq != 9 || len(m.Snapshot.Members) != 2 {
		t.Fatalf("after the gap %#v; want the fresh snapshot of seq 9", m)
	}
	if m, ok := next(t, msgs).(DownMsg); !ok || m.Err == nil || !strings.Contains(m.Err.Error(), "ended the stream") || m.Retry <= 0 {
		t.Fatalf("after the stream ended %#v; want a DownMsg that says so, with a retry", m)
	}
	if m, ok := next(t, msgs).(SnapshotMsg); !ok || m.Snapshot.Seq != 12 {
		t.Fatalf("after reconnecting %#v; want the snapshot of seq 12", m)
	}
}

// While the daemon is away the stream reports each failure, explained,
// with waits that double up to the maximum, and asks its source again
// each time, so that it finds a daemon that came back elsewhere.
func TestStreamBackoffAndSourceFollowsTheDaemon(t *testing.T) {
	d := newFakeDaemon(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeEvent(w, "snapshot", snap(uint64(n)))
		if n == 1 {
			return
		}
		<-r.Context().Done()
	})
	var asked atomic.Int32
	errDown := errors.New("no daemon")
	src := func() (string, string, error) {
		switch n := asked.Add(1); {
		case n == 1:
			return d.srv.URL, d.token, nil
		case n < 6:
			return "", "", errDown
		}
		return d.srv.URL + "/", d.token, nil
	}
	explain := func(err error) error {
		if errors.Is(err, errDown) {
			return errors.New("no daemon serves DIR: start it")
		}
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Dial(ctx, src, fast(Options{Explain: explain}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := run(t, s, ctx, cancel)
	if _, ok := next(t, msgs).(SnapshotMsg); !ok {
		t.Fatal("want the first snapshot")
	}
	if _, ok := next(t, msgs).(DownMsg); !ok {
		t.Fatal("want the end of the first stream")
	}
	var retries []time.Duration
	for range 4 {
		m, ok := next(t, msgs).(DownMsg)
		if !ok || m.Err == nil || m.Err.Error() != "no daemon serves DIR: start it" {
			t.Fatalf("while down: %#v; want the explained error", m)
		}
		retries = append(retries, m.Retry)
	}
	if want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}; fmt.Sprint(retries) != fmt.Sprint(want) {
		t.Errorf("waits %v; want %v", retries, want)
	}
	if m, ok := next(t, msgs).(SnapshotMsg); !ok || m.Snapshot.Seq != 2 {
		t.Fatalf("once back: %#v; want the second connection's snapshot", m)
	}
}

// A refusal on the first connection is Dial's error, explained.
func TestDialRefused(t *testing.T) {
	d := newFakeDaemon(t, func(int, http.ResponseWriter, *http.Request) {})
	src := func() (string, string, error) { return d.srv.URL, "fst_wrong", nil }
	_, err := Dial(context.Background(), src, Options{})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized || !strings.Contains(err.Error(), "a lead's token") {
		t.Fatalf("Dial with a wrong token: %v; want a 401 StatusError with the daemon's message", err)
	}
	explained := errors.New("401: --url needs a lead's token in $FLEET_TOKEN")
	if _, err := Dial(context.Background(), src, Options{Explain: func(error) error { return explained }}); err != explained {
		t.Fatalf("Dial with Explain: %v; want the explained error", err)
	}
}

// A connection that stays silent past the idle bound is taken for dead.
// The bound covers each connection's headers and snapshot too, so it is
// long enough (1 s) that a pause of the race detector or the collector
// does not pass for silence.
func TestStreamIdleReconnects(t *testing.T) {
	d := newFakeDaemon(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeEvent(w, "snapshot", snap(uint64(n)))
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Dial(ctx, d.source(), fast(Options{Idle: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := run(t, s, ctx, cancel)
	next(t, msgs)
	if m, ok := next(t, msgs).(DownMsg); !ok || !errors.Is(m.Err, errSilent) {
		t.Fatalf("after silence: %#v; want a DownMsg for the silence", m)
	}
	if m, ok := next(t, msgs).(SnapshotMsg); !ok || m.Snapshot.Seq != 2 {
		t.Fatalf("then %#v; want a new connection's snapshot", m)
	}
}

// Run ends and closes its channel when its context ends, even while
// nobody reads.
func TestStreamEndsWithItsContext(t *testing.T) {
	d := newFakeDaemon(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeEvent(w, "snapshot", snap(1))
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Dial(ctx, d.source(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan tea.Msg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, out)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	if _, open := <-out; open {
		t.Fatal("Run left its channel open")
	}
}
