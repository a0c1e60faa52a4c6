package fleetnats

import (
	"context"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/natstest"
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
