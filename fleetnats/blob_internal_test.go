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
// either makes the blob gone. leaderGet reads a value, and reports a key
// never written, purged or deleted as not found.
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
	if data, err := f.leaderGet(ctx, kv, ref.ID+".0"); err != nil || !bytes.Equal(data, content[:len(data)]) || len(data) == 0 {
		t.Fatalf("leaderGet of a chunk = %q, %v", data, err)
	}
	for _, key := range []string{"never", "deleted", "purged"} {
		if _, err := f.leaderGet(ctx, kv, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("leaderGet of a key %s: %v; want %v", key, err, jetstream.ErrKeyNotFound)
		}
	}
	gone := ref
	gone.ID = "never-written"
	if _, err := f.readBlob(ctx, lagging{kv}, gone); !errors.Is(err, errBlobGone) {
		t.Errorf("readBlob of a blob the leader has not either: %v; want %v", err, errBlobGone)
	}
}
