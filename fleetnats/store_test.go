package fleetnats_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/nats-io/nats.go"
)

// callTimeout bounds each call of the tests to the server.
const callTimeout = 10 * time.Second

// connect connects to the fleet name on url, as one daemon does.
func connect(t *testing.T, url, name string, timeout time.Duration) *fleetnats.Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	f, err := fleetnats.Connect(ctx, fleetnats.Options{URL: url, Fleet: name, Timeout: timeout})
	if err != nil {
		t.Fatalf("Connect(%s, %s): %v", url, name, err)
	}
	t.Cleanup(f.Close)
	return f
}

// daemons connects n fleets, each with its own connection, to one fleet
// on one server, and opens a store on each.
func daemons(t *testing.T, url string, n int) []*fleetstate.Store {
	t.Helper()
	stores := make([]*fleetstate.Store, n)
	for i := range stores {
		stores[i] = fleetstate.OpenBackend(connect(t, url, "fleet", callTimeout).Store(), nil)
	}
	return stores
}

// A stream created a moment ago on a cluster may have no leader yet: its
// first write answers ERR_UNAVAILABLE, which a client retries, for a
// bounded time.
func newSession(t *testing.T, st *fleetstate.Store) fleetstate.Session {
	t.Helper()
	var sess fleetstate.Session
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sess, err = st.NewSession("test")
		if fleetstate.CodeOf(err) != fleetstate.CodeUnavailable || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return sess
}

// TestStoreCreateRace races two daemons, each with goroutines, putting one
// new name without overwrite: in every round exactly one put wins, the
// others fail with ERR_FILE_EXISTS, and the file holds the winner's
// content.
func TestStoreCreateRace(t *testing.T) {
	const rounds, perDaemon = 50, 4
	srv := natstest.Run(t)
	stores := daemons(t, srv.URL(), 2)
	newSession(t, stores[0])
	for r := range rounds {
		name := fmt.Sprintf("claims/claim-%d", r)
		n := len(stores) * perDaemon
		errs := make([]error, n)
		ids := make([]fleetstate.FileID, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			st := stores[i%len(stores)]
			wg.Go(func() {
				<-start
				ids[i], errs[i] = st.Put("racer", name, fmt.Appendf(nil, "writer %d", i), false)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both created %s", r, winner, i, name)
			case err == nil:
				winner = i
			case fleetstate.CodeOf(err) != fleetstate.CodeFileExists:
				t.Fatalf("round %d: writer %d: %v; want ERR_FILE_EXISTS", r, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %s", r, name)
		}
		for _, st := range stores {
			got, err := st.Get(ids[winner])
			if want := fmt.Sprintf("writer %d", winner); err != nil || string(got) != want {
				t.Fatalf("round %d: Get = %q, %v; want the winner's %q", r, got, err, want)
			}
		}
	}
}

// TestStoreOverwriteAtomic has writers on two daemons overwrite a file of
// 2 MiB, kept as blobs, while readers on both read it: every read is
// exactly one of the payloads, and in the end one blob is left.
func TestStoreOverwriteAtomic(t *testing.T) {
	const writers, readers, size, chunk = 4, 4, 2 << 20, 512 << 10
	writes := 8
	if raceEnabled {
		// The race detector slows the server down about tenfold; a
		// reader overtaken by every overwrite reads again until the
		// writers are done.
		writes = 3
	}
	srv := natstest.Run(t)
	stores := make([]*fleetstate.Store, 2)
	for i := range stores {
		stores[i] = fleetstate.OpenBackend(connect(t, srv.URL(), "fleet", time.Minute).Store(),
			&fleetstate.BackendOptions{Timeout: time.Minute})
	}
	newSession(t, stores[0])
	payloads := make([][]byte, writers+1)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte('A' + i)}, size+i)
	}
	id, err := stores[0].Put("scout", "shared/state.bin", payloads[writers], false)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	var wwg, rwg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, writers+readers)
	reads := make([]int, readers)
	for r := range readers {
		st := stores[r%len(stores)]
		rwg.Go(func() {
			for {
				select {
				case <-done:
					if reads[r] > 0 {
						return
					}
				default:
				}
				data, err := st.Get(id)
				if err != nil {
					errc <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				if !slices.ContainsFunc(payloads, func(p []byte) bool { return bytes.Equal(p, data) }) {
					errc <- fmt.Errorf("reader %d: torn read of %d bytes", r, len(data))
					return
				}
				reads[r]++
			}
		})
	}
	for w := range writers {
		st := stores[w%len(stores)]
		wwg.Go(func() {
			for range writes {
				if _, err := st.Put("scout", "shared/state.bin", payloads[w], true); err != nil {
					errc <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	wwg.Wait()
	close(done)
	rwg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	t.Logf("reads per reader: %v", reads)

	// Every replaced blob and every blob of a put that lost its race was
	// removed: the blobs left are the current file's chunks.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	js := connect(t, srv.URL(), "fleet", callTimeout).JetStream()
	s, err := js.Stream(ctx, "KV_fleet-blobs")
	if err != nil {
		t.Fatalf("blob stream: %v", err)
	}
	final, err := stores[0].Get(id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got, want := s.CachedInfo().State.Msgs, uint64((len(final)+chunk-1)/chunk); got != want {
		t.Errorf("the blobs hold %d chunks; want %d, those of the file's %d bytes", got, want, len(final))
	}
}

// TestStoreLargeContent puts and gets content of the largest size a store
// takes, and overwrites it with other content of that size.
func TestStoreLargeContent(t *testing.T) {
	srv := natstest.Run(t)
	// A minute per call, not the default 10 s: under the race detector, on
	// a machine loaded by two other full test runs, a 16 MiB get took
	// longer; this test is of sizes, not of time.
	st := fleetstate.OpenBackend(connect(t, srv.URL(), "fleet", time.Minute).Store(), &fleetstate.BackendOptions{Timeout: time.Minute})
	newSession(t, st)
	for i := range 2 {
		content := make([]byte, fleetstate.DefaultMaxContentSize)
		_, _ = rand.Read(content)
		id, err := st.Put("scout", "big.bin", content, true)
		if err != nil {
			t.Fatalf("Put #%d of %d bytes: %v", i+1, len(content), err)
		}
		got, err := st.Get(id)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("Get #%d = %d bytes (equal: %v), %v; want the %d bytes put", i+1, len(got), bytes.Equal(got, content), err, len(content))
		}
		files, err := st.List("", "scout")
		if err != nil || len(files) != 1 || files[0].Size != int64(len(content)) {
			t.Fatalf("List = %v, %v; want one file of %d bytes", files, err, len(content))
		}
	}
}

// TestStoreUnavailable stops the server under a connected store: every
// call fails with ERR_UNAVAILABLE within the store's timeout, and once
// the server is back nothing of the failed calls was done.
func TestStoreUnavailable(t *testing.T) {
	const timeout = 500 * time.Millisecond
	srv := natstest.Run(t)
	f := connect(t, srv.URL(), "fleet", timeout)
	st := fleetstate.OpenBackend(f.Store(), &fleetstate.BackendOptions{Timeout: timeout})
	sess := newSession(t, st)
	id, err := st.Put("scout", "notes.md", []byte("v1"), false)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}

	srv.Stop()
	calls := []struct {
		name string
		call func() error
	}{
		{"Overwrite", func() error { _, err := st.Put("scout", "notes.md", []byte("v2"), true); return err }},
		{"Create", func() error { _, err := st.Put("scout", "new.md", []byte("new"), false); return err }},
		{"Get", func() error { _, err := st.Get(id); return err }},
		{"List", func() error { _, err := st.List("", ""); return err }},
		{"NewSession", func() error { _, err := st.NewSession("while down"); return err }},
		{"CurrentSession", func() error { _, err := st.CurrentSession(); return err }},
		{"Clean", st.Clean},
	}
	for _, c := range calls {
		began := time.Now()
		err := c.call()
		took := time.Since(began)
		if got := fleetstate.CodeOf(err); got != fleetstate.CodeUnavailable {
			t.Errorf("%s with the server down: %v (code %q); want ERR_UNAVAILABLE", c.name, err, got)
		}
		// A call makes at most two waits on the store's timeout: reading
		// the current session, then its own; the slack is for a slow
		// machine, and far below a wait that is not bounded by it.
		if limit := 2*timeout + 3*time.Second; took > limit {
			t.Errorf("%s took %v with the server down; want at most %v", c.name, took, limit)
		}
	}

	srv.Restart()
	if !fleettest.Until(callTimeout, 10*time.Millisecond, func() bool { return f.Conn().Status() == nats.CONNECTED }) {
		t.Fatalf("no reconnection within %v", callTimeout)
	}
	// Give each call a fresh store with a longer timeout: the stream's
	// leader may take a moment after the restart.
	st = fleetstate.OpenBackend(connect(t, srv.URL(), "fleet", callTimeout).Store(), nil)
	var got []byte
	if !fleettest.Until(callTimeout, 50*time.Millisecond, func() bool {
		got, err = st.Get(id)
		return fleetstate.CodeOf(err) != fleetstate.CodeUnavailable
	}) || err != nil || string(got) != "v1" {
		t.Fatalf("Get after the restart = %q, %v; want %q", got, err, "v1")
	}
	if cur, err := st.CurrentSession(); err != nil || cur != sess {
		t.Fatalf("CurrentSession after the restart = %v, %v; want %v", cur, err, sess)
	}
	files, err := st.List("", "")
	if err != nil || len(files) != 1 || files[0].ID != id {
		t.Fatalf("List after the restart = %v, %v; want [%v]", files, err, id)
	}
}

// TestStoreReadsEveryWriteOnCluster: on a loaded 3-node cluster, a get on
// any node, the writer's or another, returns what the put that returned
// just before it wrote, inline or in a blob. With the buckets' direct
// gets, which any replica answers, about one read in twenty returned the
// previous content, and a blob's chunk not yet applied read as gone.
func TestStoreReadsEveryWriteOnCluster(t *testing.T) {
	servers := natstest.Cluster(t, 3)
	stores := make([]*fleetstate.Store, len(servers))
	for i, srv := range servers {
		stores[i] = fleetstate.OpenBackend(connect(t, srv.URL(), "fleet", callTimeout).Store(), nil)
	}
	newSession(t, stores[0])
	// Load: other files overwritten on every node, so that followers lag.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for j := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := stores[j%3].Put("loader", fmt.Sprint("load", j), make([]byte, 30000+n%1000), true); err != nil {
					t.Errorf("the load's put: %v", err)
					return
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	big := make([]byte, 300<<10) // past the inline bound: a blob
	stale := 0
	for i := range 150 {
		w, r := stores[i%3], stores[(i+1)%3]
		want := []byte(fmt.Sprint(i))
		if i%10 == 0 {
			copy(big, want)
			want = big
		}
		id, err := w.Put("scout", "k", want, true)
		if err != nil {
			t.Fatal(err)
		}
		for who, st := range map[string]*fleetstate.Store{"another node": r, "the writer's node": w} {
			if got, err := st.Get(id); err != nil || !bytes.Equal(got, want) {
				stale++
				if stale <= 5 {
					t.Errorf("put %d (%d bytes), then a get on %s: %.20q (%d bytes), %v", i, len(want), who, got, len(got), err)
				}
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of 300 gets after a put did not return it", stale)
	}
}

// TestStoreOnClusterWithoutStreamUpdates: reading through the leaders
// needs no change of a stream's configuration, so a NATS user that may
// not update streams (least privilege) has a working store.
func TestStoreOnClusterWithoutStreamUpdates(t *testing.T) {
	servers := natstest.ClusterDenying(t, 3, "$JS.API.STREAM.UPDATE.>")
	st := fleetstate.OpenBackend(connect(t, servers[1].UserURL(), "fleet", 5*time.Second).Store(), nil)
	newSession(t, st)
	for _, content := range [][]byte{[]byte("small"), bytes.Repeat([]byte("b"), 300<<10)} {
		id, err := st.Put("scout", "f", content, true)
		if err != nil {
			t.Fatalf("Put of %d bytes: %v", len(content), err)
		}
		if got, err := st.Get(id); err != nil || !bytes.Equal(got, content) {
			t.Fatalf("Get = %d bytes, %v; want the %d bytes put", len(got), err, len(content))
		}
	}
}

// TestStoreOnCluster runs the store on a 3-node cluster, its buckets
// replicated three times, with each daemon connected to another node:
// what one writes the others read, and create-if-absent has one winner.
func TestStoreOnCluster(t *testing.T) {
	servers := natstest.Cluster(t, 3)
	stores := make([]*fleetstate.Store, len(servers))
	for i, srv := range servers {
		f := connect(t, srv.URL(), "fleet", callTimeout)
		if got := f.Replicas(); got != 3 {
			t.Fatalf("Replicas() on a cluster of 3 = %d; want 3", got)
		}
		stores[i] = fleetstate.OpenBackend(f.Store(), nil)
	}
	sess := newSession(t, stores[0])
	if cur, err := stores[2].CurrentSession(); err != nil || cur != sess {
		t.Fatalf("CurrentSession on another node = %v, %v; want %v", cur, err, sess)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	id, err := stores[1].Put("scout", "big.bin", big, false)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, err := stores[2].Get(id); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Get on another node = %d bytes, %v; want the %d bytes put", len(got), err, len(big))
	}
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() { _, errs[i] = st.Put("scout", "claim", []byte{byte(i)}, false) })
	}
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch fleetstate.CodeOf(err) {
		case "":
			wins++
		case fleetstate.CodeFileExists:
		default:
			t.Errorf("Put on node %d: %v", i+1, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d puts created the claim; want 1", wins)
	}
}

// TestConnectInProcess: with Options.InProcess the fleet reaches the
// embedded server through memory, whatever URL says (here a port nobody
// listens on), and its store works; Close closes that connection.
func TestConnectInProcess(t *testing.T) {
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	f, err := fleetnats.Connect(ctx, fleetnats.Options{InProcess: srv, URL: "nats://127.0.0.1:1", Fleet: "inproc", Timeout: callTimeout})
	if err != nil {
		t.Fatalf("Connect in process: %v", err)
	}
	if got := f.Conn().ConnectedServerName(); got != srv.Name() {
		t.Errorf("connected to %q; want the embedded server %q", got, srv.Name())
	}
	st := fleetstate.OpenBackend(f.Store(), nil)
	newSession(t, st)
	id, err := st.Put("scout", "a.txt", []byte("in process"), false)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, err := st.Get(id); err != nil || string(got) != "in process" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	f.Close()
	if !f.Conn().IsClosed() {
		t.Error("the in-process connection is open after Close")
	}
}
