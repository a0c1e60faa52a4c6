package fleetnats

import (
	"bytes"
	"context"
	"testing"

	"github.com/fleetstate/fleetstate/internal/natstest"
)

// BenchmarkJournalWrite measures the owner's journal alone, without the
// rendezvous: one fenced write waited for (Save), and a round trip's
// writes (two saves waited for and one release that is not), on one
// server reached over loopback TCP and in process. BenchmarkRoundTrip
// shows what the rendezvous adds.
func BenchmarkJournalWrite(b *testing.B) {
	s := natstest.Run(b)
	rec := bytes.Repeat([]byte("r"), 300)
	for _, conn := range []struct {
		name string
		opts Options
	}{{"tcp", Options{URL: s.URL()}}, {"inproc", Options{InProcess: s}}} {
		for _, op := range []string{"save", "twosaves", "roundtrip"} {
			b.Run(op+"/"+conn.name, func(b *testing.B) {
				ctx := context.Background()
				opts := conn.opts
				opts.Fleet = "jw" + op + conn.name
				o := ownFleet(b, opts)
				b.ReportAllocs()
				for b.Loop() {
					if err := o.Save(ctx, "t1", rec); err != nil {
						b.Fatal(err)
					}
					if op == "save" {
						continue
					}
					if err := o.Save(ctx, "t1", rec); err != nil {
						b.Fatal(err)
					}
					if op == "twosaves" {
						continue
					}
					if err := releaseNow(ctx, o, "t1"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
