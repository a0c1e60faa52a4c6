package fleetnats

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// lagging is a bucket whose direct gets are answered by a replica that
// has applied nothing yet: every key reads as not found.
type lagging struct{ jetstream.KeyValue }

func (lagging) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return nil, jetstream.ErrKeyNotFound
}

// TestReadBlobAsksTheLeader: a chunk that a direct get does not find is
// read from the stream's leader; only a chunk the leader does not have
// either makes the blob gone. leaderKV.Get reads what a direct get reads,
// and reports a key never written, purged or deleted as not found.
func TestReadBlobAsksTheLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := Connect(ctx, Options{URL: natstest.Run(t).URL(), Fleet: "blobs"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv, err := f.turnBlobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("chunk "), 200<<10) // 1.2 MiB: three chunks
	_, ref, err := f.writeBlob(ctx, kv, content)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Chunks < 2 {
		t.Fatalf("a blob of %d chunks; want several", ref.Chunks)
	}
	got, err := f.readBlob(ctx, lagging{kv}, ref)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("readBlob through a lagging replica = %d bytes, %v; want the %d bytes written", len(got), err, len(content))
	}

	if _, err := kv.Put(ctx, "deleted", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "purged", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "purged"); err != nil {
		t.Fatal(err)
	}
	lkv := leaderKV{KeyValue: kv, f: f}
	want, err := kv.Get(ctx, ref.ID+".0")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := lkv.Get(ctx, ref.ID+".0"); err != nil || !bytes.Equal(e.Value(), want.Value()) || e.Revision() != want.Revision() || e.Key() != want.Key() {
		t.Fatalf("leaderKV.Get of a chunk = %v, %v; want the value and revision %d of a direct get", e, err, want.Revision())
	}
	for _, key := range []string{"never", "deleted", "purged"} {
		if _, err := lkv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("leaderKV.Get of a key %s: %v; want %v", key, err, jetstream.ErrKeyNotFound)
		}
	}
	// An error the API answers keeps its code, for the backend's error
	// mapping: a get of a stream that does not exist.
	var api *jetstream.APIError
	if _, err := f.leaderMsg(ctx, "no-such-bucket", msgGet{Seq: 1}); !errors.As(err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamNotFound {
		t.Errorf("leaderMsg of a stream that does not exist: %v; want the API's stream-not-found error", err)
	}
	gone := ref
	gone.ID = "never-written"
	if _, err := f.readBlob(ctx, lagging{kv}, gone); !errors.Is(err, errBlobGone) {
		t.Errorf("readBlob of a blob the leader has not either: %v; want %v", err, errBlobGone)
	}
}
