package fleetnats

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// bigRecord is n bytes whose every line is numbered, so that chunks lost,
// repeated or reordered show.
func bigRecord(tag string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(tag + " " + strconv.Itoa(i) + "\n")
	}
	return b.Bytes()[:n]
}

// turnBlobs returns the IDs of the blobs in the fleet's NAME-turnblobs.
func turnBlobs(t *testing.T, f *Fleet) map[string]bool {
	t.Helper()
	ctx := context.Background()
	ids := map[string]bool{}
	kv, err := f.js.KeyValue(ctx, f.bucketName(turnBlobsBucket))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return ids
	}
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		id, _, _ := bytes.Cut([]byte(k), []byte("."))
		ids[string(id)] = true
	}
	return ids
}

// TestJournalLargeRecords: a record larger than a message is kept whole
// as a blob named by the turn's key; the blob a key named before goes when
// it names another record, or is deleted, or the journal is reset; a blob
// no key names is swept by the next owner; an owner that lost the fleet
// leaves no key naming its blob.
func TestJournalLargeRecords(t *testing.T) {
	ctx := context.Background()
	url := natstest.Run(t).URL()
	connect := func() *Fleet {
		f, err := Connect(ctx, Options{URL: url, Fleet: "big", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	f := connect()
	o, err := f.Own(ctx, OwnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	load := func(o *Ownership, want ...[]byte) {
		t.Helper()
		recs, err := o.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(want) {
			t.Fatalf("Load: %d records; want %d", len(recs), len(want))
		}
		for i := range want {
			if !bytes.Equal(recs[i], want[i]) {
				t.Fatalf("Load: record %d has %d bytes, not the %d written", i, len(recs[i]), len(want[i]))
			}
		}
	}
	blobs := func(n int) {
		t.Helper()
		if got := turnBlobs(t, f); len(got) != n {
			t.Fatalf("%d blobs of large records: %v; want %d", len(got), got, n)
		}
	}

	big1, big2 := bigRecord("one", 2<<20+3), bigRecord("two", 3<<20)
	if err := o.Save(ctx, "t1", big1); err != nil {
		t.Fatalf("Save of %d bytes: %v", len(big1), err)
	}
	blobs(1)
	load(o, big1)
	if err := o.Save(ctx, "t1", big2); err != nil {
		t.Fatal(err)
	}
	blobs(1) // the first went once the key named the second
	load(o, big2)
	if err := o.Save(ctx, "t1", []byte("small")); err != nil {
		t.Fatal(err)
	}
	blobs(0)
	if err := o.Save(ctx, "t1", big1); err != nil {
		t.Fatal(err)
	}
	if err := releaseNow(ctx, o, "t1"); err != nil {
		t.Fatal(err)
	}
	blobs(0)
	load(o)
	if err := o.Save(ctx, "t2", big2); err != nil {
		t.Fatal(err)
	}
	if err := o.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	blobs(0)

	// A blob its writer never got to name, and one named: the next owner
	// keeps the named one and sweeps the other.
	if err := o.Save(ctx, "t3", big1); err != nil {
		t.Fatal(err)
	}
	kv, err := f.turnBlobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.writeBlob(ctx, kv, big2); err != nil {
		t.Fatal(err)
	}
	blobs(2)
	// The lease disappears as it would had o's renewals been cut off; o
	// does not know yet.
	owners, err := f.js.KeyValue(ctx, f.bucketName("owner"))
	if err != nil {
		t.Fatal(err)
	}
	if err := owners.Purge(ctx, "owner"); err != nil {
		t.Fatal(err)
	}
	g := connect()
	o2, err := g.Own(ctx, OwnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	defer o.Close()
	load(o2, big1)
	blobs(1)

	// The old owner, fenced out, writes a blob but cannot make a key name
	// it; the next load sweeps it.
	if err := o.Save(ctx, "t3", big2); fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("Save by an owner that lost the fleet: %v; want %s", err, fleetstate.CodeUnavailable)
	}
	load(o2, big1)
	blobs(1)

	// A crash between a large record's write and the deletion of the
	// record it replaced leaves both keys: the later one loads, and
	// forgetting the turn deletes both.
	if err := o2.turns.publish(ctx, turnPrefix+"t4", []byte("before"), ""); err != nil {
		t.Fatal(err)
	}
	entry, _, err := g.writeBlob(ctx, kv, big2)
	if err != nil {
		t.Fatal(err)
	}
	if err := o2.turns.publish(ctx, bigPrefix+"t4", entry, ""); err != nil {
		t.Fatal(err)
	}
	load(o2, big1, big2)
	if err := releaseNow(ctx, o2, "t4"); err != nil {
		t.Fatal(err)
	}
	load(o2, big1)
	blobs(1)
	// And the other way: a record back in one message, the large one's
	// key not deleted yet.
	if err := o2.turns.publish(ctx, turnPrefix+"t3", []byte("small again"), ""); err != nil {
		t.Fatal(err)
	}
	load(o2, []byte("small again"))
	if err := releaseNow(ctx, o2, "t3"); err != nil {
		t.Fatal(err)
	}
	load(o2)
	blobs(0)
}
