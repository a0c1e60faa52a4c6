package events_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/events"
)

// eventsServer serves the events of a new rendezvous with the member
// scout; both end with the test.
func eventsServer(t *testing.T) (*fleetstate.Rendezvous, *httptest.Server) {
	t.Helper()
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(events.Handler(rv, events.Options{Operator: testOperator}))
	t.Cleanup(func() {
		_ = rv.Close()
		srv.Close()
	})
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	return rv, srv
}

// An event's content reaches a stream clipped to SnapshotClip bytes,
// marked with its full length, and its "<" as one byte each.
func TestEventsStreamClipsContents(t *testing.T) {
	rv, srv := eventsServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+testOperator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") { // the snapshot
	}
	const size = 64 << 10
	if _, err := rv.SendDetached("lead", "scout", strings.Repeat("<", size)); err != nil {
		t.Fatal(err)
	}
	var line string
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			line = data
			break
		}
	}
	if len(line) > 2*events.SnapshotClip || strings.Contains(line, `\u003c`) {
		t.Fatalf("the queued event's data is %d bytes (%.60s…); want at most %d, with \"<\" unescaped", len(line), line, 2*events.SnapshotClip)
	}
	var e fleetstate.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	if e.Kind != fleetstate.EventQueued || e.Content != strings.Repeat("<", events.SnapshotClip) || e.ContentBytes != size {
		t.Fatalf("event %s with %d bytes of content, content_bytes %d; want queued, %d bytes, %d", e.Kind, len(e.Content), e.ContentBytes, events.SnapshotClip, size)
	}
}

// A client that stops reading keeps no brief alive: once its tickets are
// cancelled and acknowledged, what the daemon holds for its stream is
// clipped frames only.
func TestEventsStalledStreamPinsNoBriefs(t *testing.T) {
	rv, srv := eventsServer(t)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testOperator + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for { // up to the snapshot's end; then the client reads no more
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	const briefs, size = 40, 512 << 10
	heap0 := heapInUse()
	for range briefs {
		o, err := rv.SendDetached("lead", "scout", strings.Repeat("x", size))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rv.Cancel("lead", o.Ticket); err != nil {
			t.Fatal(err)
		}
		if err := rv.Ack("lead", o.Ticket); err != nil {
			t.Fatal(err)
		}
	}
	if grew := heapInUse() - heap0; grew > 4<<20 {
		t.Errorf("the heap grew by %d bytes with %d cancelled and acknowledged briefs of %d bytes behind a stalled stream; want under 4 MiB", grew, briefs, size)
	}
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// testOperator is the operator token of the handlers in these tests.
const testOperator = "fso_operator-token-of-the-test"
