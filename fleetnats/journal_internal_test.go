package fleetnats

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// ownFleet connects to the fleet of opts and owns it, until the test ends.
func ownFleet(tb testing.TB, opts Options) *Ownership {
	tb.Helper()
	f, err := Connect(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.Close)
	o, err := f.Own(context.Background(), OwnOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.Close() })
	return o
}

// TestReleaseThatDidNotLand: when a release the owner did not wait for
// did not land, the stream's last sequence is one short of what the owner
// expects; its next write finds its own message last and lands.
func TestReleaseThatDidNotLand(t *testing.T) {
	ctx := context.Background()
	o := ownFleet(t, Options{URL: natstest.Run(t).URL(), Fleet: "lost", Timeout: 2 * time.Second})
	if err := o.Save(ctx, "t1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	o.turns.mu.Lock()
	// As a release sent but refused leaves it.
	o.turns.last++
	o.turns.lastID = "refused"
	o.turns.mu.Unlock()
	if err := o.Save(ctx, "t2", []byte("b")); err != nil {
		t.Fatalf("Save after a release that did not land: %v", err)
	}
	recs, err := o.Load(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("Load = %q, %v; want both records", recs, err)
	}
}

// TestParsePubAck: the sequence of an acknowledgement, read without
// reflection, and the server's refusals as the errors jetstream returns,
// so that the fence recognises a wrong last sequence.
func TestParsePubAck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		data      string
		seq       uint64
		wrongSeq  bool
		wantError bool
	}{
		{"ack", `{"stream":"KV_f-turns","seq":42}`, 42, false, false},
		{"ack with domain", `{"stream":"KV_f-turns","domain":"hub","seq":7,"duplicate":true}`, 7, false, false},
		{"fleet named error", `{"stream":"KV_error-turns","seq":3}`, 3, false, false},
		{"wrong last sequence", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"KV_f-turns","seq":0}`, 0, true, true},
		{"other refusal", `{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`, 0, false, true},
		{"no stream", `{"seq":0}`, 0, false, true},
		{"not JSON", `+OK`, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, err := parsePubAck([]byte(tc.data))
			if seq != tc.seq || (err != nil) != tc.wantError || isWrongSequence(err) != tc.wrongSeq {
				t.Fatalf("parsePubAck(%s) = %d, %v; want %d, error %v, wrong sequence %v", tc.data, seq, err, tc.seq, tc.wantError, tc.wrongSeq)
			}
		})
	}
}

// laggingKV is a bucket whose first watch is served by a replica
// that has applied nothing past the sequence behind.
type laggingKV struct {
	jetstream.KeyValue
	behind  uint64
	watches int
}

func (kv *laggingKV) WatchFiltered(ctx context.Context, keys []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w, err := kv.KeyValue.WatchFiltered(ctx, keys, opts...)
	kv.watches++
	if err != nil || kv.watches > 1 {
		return w, err
	}
	defer w.Stop()
	lagged := &staticWatcher{updates: make(chan jetstream.KeyValueEntry, 100)}
	for e := range w.Updates() {
		if e == nil {
			break
		}
		if e.Revision() <= kv.behind {
			lagged.updates <- e
		}
	}
	lagged.updates <- nil
	return lagged, nil
}

// staticWatcher is a watch whose updates were all read beforehand.
type staticWatcher struct {
	updates chan jetstream.KeyValueEntry
	once    sync.Once
}

func (w *staticWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }
func (w *staticWatcher) Stop() error {
	w.once.Do(func() { close(w.updates) })
	return nil
}

// TestLoadFromALaggingReplica: on three replicas, a takeover's load whose
// watch is served by a replica behind the leader (a turn saved and a turn
// released after what it has) watches again until it has seen what the
// leader has, and returns the live turns: the newest included, the
// released one not.
func TestLoadFromALaggingReplica(t *testing.T) {
	ctx := context.Background()
	o := ownFleet(t, Options{URL: natstest.URLs(natstest.Cluster(t, 3)), Fleet: "lag", Timeout: 5 * time.Second})
	for _, id := range []string{"t1", "t2"} {
		if err := o.Save(ctx, id, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	o.turns.mu.Lock()
	behind := o.turns.last
	o.turns.mu.Unlock()
	if err := o.Save(ctx, "t3", []byte("t3")); err != nil {
		t.Fatal(err)
	}
	if err := releaseNow(ctx, o, "t1"); err != nil {
		t.Fatal(err)
	}
	lagging := &laggingKV{KeyValue: o.turns.kv, behind: behind}
	o.turns.kv = lagging
	recs, err := o.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s", recs); got != "[t2 t3]" {
		t.Errorf("Load = %s; want [t2 t3], the leader's live turns", got)
	}
	if lagging.watches < 2 {
		t.Errorf("%d watches; want the lagging one and more", lagging.watches)
	}
}

// TestListFromALaggingReplica: on three replicas, a list of files whose
// watch is served by a replica behind the leader watches again, and lists
// the file put last.
func TestListFromALaggingReplica(t *testing.T) {
	ctx := context.Background()
	f, err := Connect(ctx, Options{URL: natstest.URLs(natstest.Cluster(t, 3)), Fleet: "lag", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st := fleetstate.OpenBackend(f.Store(), nil)
	if _, err := st.NewSession("lag"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := st.Put("scout", name, []byte(name), false); err != nil {
			t.Fatal(err)
		}
	}
	files, err := f.stream(ctx, f.bucketName("files"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := files.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put("scout", "c", []byte("c"), false); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	lagging := &laggingKV{KeyValue: f.buckets["files"], behind: info.State.LastSeq}
	f.buckets["files"] = lagging
	f.mu.Unlock()
	list, err := st.List("", "scout")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range list {
		names = append(names, fi.ID.Name())
	}
	if got := fmt.Sprint(names); got != "[a b c]" {
		t.Errorf("List = %s; want [a b c], what the leader has", got)
	}
	if lagging.watches < 2 {
		t.Errorf("%d watches; want the lagging one and more", lagging.watches)
	}
}

// releaseNow releases turn id and flushes, so that the release has landed
// when it returns: Release alone is put off to the next Flush.
func releaseNow(ctx context.Context, o *Ownership, id string) error {
	if err := o.Release(ctx, id); err != nil {
		return err
	}
	return o.Flush(ctx)
}

// TestFenceAfterALateWriteOfTheOldOwner: a write of the old owner that the
// server stores after the new owner read the stream's last sequence (a
// deletion the old owner sent as it stopped, not waited for) makes the
// new owner's epoch fail its fence once; the new owner reads again and
// takes the fleet over, and the old owner is fenced out.
func TestFenceAfterALateWriteOfTheOldOwner(t *testing.T) {
	ctx := context.Background()
	opts := Options{URL: natstest.Run(t).URL(), Fleet: "late", Timeout: 2 * time.Second}
	old := ownFleet(t, opts)
	if err := old.Save(ctx, "t1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	f, err := Connect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	l, err := f.openTurnLog(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	late := &writeAfterInfo{Stream: l.stream, write: func() error { return old.Save(ctx, "t2", []byte("b")) }}
	l.stream = late
	if err := l.fence(ctx); err != nil {
		t.Fatalf("fence after a late write of the old owner: %v", err)
	}
	if late.err != nil {
		t.Fatalf("the old owner's late write: %v", late.err)
	}
	if err := old.Save(ctx, "t3", []byte("c")); fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("the old owner's write after the fence: %v; want %s", err, fleetstate.CodeUnavailable)
	}
	if err := l.save(ctx, "t4", []byte("d")); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	recs, err := l.load(ctx)
	if err != nil || len(recs) != 3 {
		t.Fatalf("load = %q, %v; want t1, t2 and t4", recs, err)
	}
}

// writeAfterInfo is a stream whose first Info is followed, before it
// returns, by a write of another owner.
type writeAfterInfo struct {
	jetstream.Stream
	write func() error
	err   error
	done  bool
}

func (s *writeAfterInfo) Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	info, err := s.Stream.Info(ctx, opts...)
	if !s.done {
		s.done = true
		s.err = s.write()
	}
	return info, err
}
