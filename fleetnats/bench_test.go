package fleetnats_test

// Benchmarks of a fleet on JetStream side by side with the file backend,
// in one binary and one run, so that the ratio between them means
// something on a noisy machine: the store's put and get, and the
// rendezvous's blocking round trip, each on
//
//   - file-os: the file backend on disk (afero's OsFs under b.TempDir()),
//   - file-mem: the file backend in memory (afero's MemMapFs),
//   - nats-1: JetStream on one embedded server (natstest.Run), R1,
//     reached over loopback TCP, as a daemon reaches a separate server,
//   - nats-1-inproc: the same server reached in process
//     (Options.InProcess), as a daemon reaches the node it embeds
//     (serve --nats-node),
//   - nats-3: JetStream on a cluster of three embedded servers routed on
//     loopback (natstest.Cluster), R3, reached over loopback TCP,
//   - nats-3-inproc: the same cluster, the client in process with one of
//     its servers (a daemon embedding one node of three).
//
// Besides the wall time, the round trip reports the process's CPU time per
// operation (cpu-µs/op), servers included: the work done, which a loaded
// machine changes far less than the wall time. They run only with -bench;
// see BENCHMARKS.md for the commands and figures.

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/spf13/afero"
)

// benchBackend opens, for one benchmark, a store with a session started
// and, on request, the rendezvous options that keep its turns in the same
// place.
type benchBackend struct {
	name string
	// open returns the store and the options of a rendezvous on it.
	open func(b *testing.B) (*fleetstate.Store, *fleetstate.RendezvousOptions)
}

// benchFleets counts the fleets the benchmarks create, so that each has
// its own buckets on a server they share.
var benchFleets atomic.Int64

// benchBackends starts the servers the JetStream backends need, once for
// the benchmark b and its sub-benchmarks, and returns the backends.
func benchBackends(b *testing.B) []benchBackend {
	b.Helper()
	single := natstest.Run(b)
	cluster := natstest.Cluster(b, 3)
	file := func(mk func(*testing.B) (afero.Fs, string)) func(*testing.B) (*fleetstate.Store, *fleetstate.RendezvousOptions) {
		return func(b *testing.B) (*fleetstate.Store, *fleetstate.RendezvousOptions) {
			b.Helper()
			fsys, dir := mk(b)
			st, err := fleetstate.Open(fsys, dir, &fleetstate.Options{NoGitIgnore: true})
			if err != nil {
				b.Fatal(err)
			}
			benchSession(b, st)
			return st, &fleetstate.RendezvousOptions{}
		}
	}
	// jetStream connects to the servers of opts (URL or InProcess).
	jetStream := func(opts fleetnats.Options) func(*testing.B) (*fleetstate.Store, *fleetstate.RendezvousOptions) {
		return func(b *testing.B) (*fleetstate.Store, *fleetstate.RendezvousOptions) {
			b.Helper()
			opts.Fleet = fmt.Sprintf("bench%d", benchFleets.Add(1))
			f, err := fleetnats.Connect(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(f.Close)
			st := fleetstate.OpenBackend(f.Store(), nil)
			benchSession(b, st)
			own, err := f.Own(context.Background(), fleetnats.OwnOptions{})
			if err != nil {
				b.Fatal(err)
			}
			// The rendezvous closes its journal; this is for the store
			// benchmarks, which open none. Closing twice does nothing.
			b.Cleanup(func() { own.Close() })
			return st, &fleetstate.RendezvousOptions{Journal: own}
		}
	}
	return []benchBackend{
		{"file-os", file(func(b *testing.B) (afero.Fs, string) {
			return afero.NewOsFs(), filepath.Join(b.TempDir(), "state")
		})},
		{"file-mem", file(func(*testing.B) (afero.Fs, string) { return afero.NewMemMapFs(), "/state" })},
		{"nats-1", jetStream(fleetnats.Options{URL: single.URL(), Replicas: 1})},
		{"nats-1-inproc", jetStream(fleetnats.Options{InProcess: single, Replicas: 1})},
		{"nats-3", jetStream(fleetnats.Options{URL: natstest.URLs(cluster), Replicas: 3})},
		{"nats-3-inproc", jetStream(fleetnats.Options{InProcess: cluster[0], Replicas: 3})},
	}
}

func benchSession(b *testing.B, st *fleetstate.Store) {
	b.Helper()
	if _, err := st.NewSession("bench"); err != nil {
		b.Fatal(err)
	}
}

// benchSizes are the contents put and got: 1 MiB is above the largest
// content a JetStream index entry holds inline (256 KiB, inlineMax in
// store.go), so it goes through a blob of two chunks.
var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

func benchContent(n int) []byte {
	return bytes.Repeat([]byte("fleetstate benchmark content.\n"), n/30+1)[:n]
}

// BenchmarkPut overwrites one file, so that the store does not grow, on
// each backend.
func BenchmarkPut(b *testing.B) {
	backends := benchBackends(b)
	for _, size := range benchSizes {
		content := benchContent(size.n)
		for _, bk := range backends {
			b.Run(size.name+"/"+bk.name, func(b *testing.B) {
				st, _ := bk.open(b)
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := st.Put("scout", "notes/plan.md", content, true); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkGet reads one file back on each backend.
func BenchmarkGet(b *testing.B) {
	backends := benchBackends(b)
	for _, size := range benchSizes {
		content := benchContent(size.n)
		for _, bk := range backends {
			b.Run(size.name+"/"+bk.name, func(b *testing.B) {
				st, _ := bk.open(b)
				id, err := st.Put("scout", "notes/plan.md", content, true)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				for b.Loop() {
					got, err := st.Get(id)
					if err != nil || len(got) != size.n {
						b.Fatalf("Get: %d bytes, %v; want %d", len(got), err, size.n)
					}
				}
			})
		}
	}
}

// BenchmarkRoundTrip measures a delegation as the root package's
// BenchmarkRoundTrip does: the lead's Send, the member's Next (a member
// that pulls), its Reply, and Send returning the reply, on each backend.
// On JetStream the rendezvous keeps its turns in the fleet's journal
// (Fleet.Own), so every durable state change is a fenced publish.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bk := range benchBackends(b) {
		b.Run(bk.name, func(b *testing.B) {
			st, opts := bk.open(b)
			var writes *countingJournal
			if opts.Journal != nil {
				writes = &countingJournal{Journal: opts.Journal}
				opts.Journal = writes
			}
			rv, err := fleetstate.NewRendezvous(st, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { rv.Close() })
			if err := rv.AddMember("member-0", nil); err != nil {
				b.Fatal(err)
			}
			if err := rv.SetReady("member-0", true); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, ok, err := rv.Next(ctx, "member-0", time.Minute)
					if err != nil {
						return
					}
					if ok {
						if err := rv.Reply("member-0", "done"); err != nil {
							panic(err)
						}
					}
				}
			}()
			b.ReportAllocs()
			if writes != nil {
				writes.n.Store(0)
			}
			cpu := cpuTime()
			for b.Loop() {
				o, err := rv.Send(ctx, "lead", "member-0", "do it")
				if err != nil || o.Kind != fleetstate.OutcomeReply {
					b.Fatalf("Send = %+v, %v; want a reply", o, err)
				}
			}
			reportCPU(b, cpu)
			if writes != nil {
				b.ReportMetric(float64(writes.n.Load())/float64(b.N), "writes/op")
			}
			cancel()
			wg.Wait()
		})
	}
}

// reportCPU reports the CPU time the process used per operation since
// cpuTime said start: the client's and the embedded servers' work, which
// on a loaded machine varies much less than the wall time does.
func reportCPU(b *testing.B, start time.Duration) {
	if start == 0 {
		return
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// countingJournal counts the writes (saves and releases) of a journal
// between the start of the benchmark's loop and its end.
type countingJournal struct {
	fleetstate.Journal
	n atomic.Int64
}

func (j *countingJournal) Save(ctx context.Context, id string, rec []byte) error {
	j.n.Add(1)
	return j.Journal.Save(ctx, id, rec)
}

func (j *countingJournal) Hold(ctx context.Context, id string, rec []byte, saved bool) error {
	if !saved {
		j.n.Add(1)
	}
	return j.Journal.Hold(ctx, id, rec, saved)
}

func (j *countingJournal) Release(ctx context.Context, id string) error {
	j.n.Add(1)
	return j.Journal.Release(ctx, id)
}
