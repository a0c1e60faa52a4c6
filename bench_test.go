package fleetstate_test

// Benchmarks of the store and the rendezvous, each paired with the bare
// minimum the same work needs (its baseline) in the same run, so that the
// ratio between the two means something on a noisy machine. They run only
// with -bench; see BENCHMARKS.md for the commands and the figures.

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/spf13/afero"
)

// benchFS is a file system the benchmarks run on: memory, or the disk under
// the benchmark's temporary directory.
type benchFS struct {
	name string
	make func(b *testing.B) (afero.Fs, string)
}

var benchFSs = []benchFS{
	{"mem", func(*testing.B) (afero.Fs, string) { return afero.NewMemMapFs(), "/state" }},
	{"os", func(b *testing.B) (afero.Fs, string) { return afero.NewOsFs(), filepath.Join(b.TempDir(), "state") }},
}

var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// benchStore opens a store on a fresh file system with a session started.
func benchStore(b *testing.B, mk func(*testing.B) (afero.Fs, string)) (*fleetstate.Store, fleetstate.Session) {
	b.Helper()
	fsys, dir := mk(b)
	st, err := fleetstate.Open(fsys, dir, &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		b.Fatal(err)
	}
	sess, err := st.NewSession("bench")
	if err != nil {
		b.Fatal(err)
	}
	return st, sess
}

func benchContent(n int) []byte {
	return bytes.Repeat([]byte("fleetstate benchmark content.\n"), n/30+1)[:n]
}

// bareWrite is the least that an atomic replacement of a file needs: write
// a temporary file in the same folder, then rename it over the final name.
func bareWrite(fsys afero.Fs, final string, data []byte) error {
	f, err := afero.TempFile(fsys, filepath.Dir(final), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(f.Name(), final)
}

// BenchmarkPut compares Store.Put (overwriting one file, so that the folder
// does not grow) with bareWrite of the same content on the same file system.
func BenchmarkPut(b *testing.B) {
	for _, bf := range benchFSs {
		for _, size := range benchSizes {
			content := benchContent(size.n)
			b.Run(bf.name+"/"+size.name+"/store", func(b *testing.B) {
				st, _ := benchStore(b, bf.make)
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := st.Put("scout", "notes/plan.md", content, true); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(bf.name+"/"+size.name+"/baseline", func(b *testing.B) {
				st, sess := benchStore(b, bf.make)
				final := filepath.Join(st.Dir(), sess.ID, "scout", "notes", "plan.md")
				if err := st.Fs().MkdirAll(filepath.Dir(final), 0o700); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				for b.Loop() {
					if err := bareWrite(st.Fs(), final, content); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkGet compares Store.Get with a plain read of the same file.
func BenchmarkGet(b *testing.B) {
	for _, bf := range benchFSs {
		for _, size := range benchSizes {
			content := benchContent(size.n)
			b.Run(bf.name+"/"+size.name+"/store", func(b *testing.B) {
				st, _ := benchStore(b, bf.make)
				id, err := st.Put("scout", "notes/plan.md", content, true)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := st.Get(id); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(bf.name+"/"+size.name+"/baseline", func(b *testing.B) {
				st, sess := benchStore(b, bf.make)
				if _, err := st.Put("scout", "notes/plan.md", content, true); err != nil {
					b.Fatal(err)
				}
				final := filepath.Join(st.Dir(), sess.ID, "scout", "notes", "plan.md")
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := afero.ReadFile(st.Fs(), final); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFileID compares parsing and formatting a file ID with splitting
// and joining its text without any check.
func BenchmarkFileID(b *testing.B) {
	const text = "fsm::file::0b4f6c1e-9a43-4f7e-8d2a-5c1b2e3f4a5b::scout::notes/2026/plan-v2.md"
	id, err := fleetstate.ParseFileID(text)
	if err != nil {
		b.Fatal(err)
	}
	var sink int
	b.Run("parse/fileid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			id, err := fleetstate.ParseFileID(text)
			if err != nil {
				b.Fatal(err)
			}
			sink += len(id.Name())
		}
	})
	b.Run("parse/baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rest, _ := strings.CutPrefix(text, "fsm::file::")
			_, rest, _ = strings.Cut(rest, "::")
			_, name, _ := strings.Cut(rest, "::")
			sink += len(name)
		}
	})
	b.Run("format/fileid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink += len(id.String())
		}
	})
	session, agent, name := id.Session(), id.Agent(), id.Name()
	b.Run("format/baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink += len("fsm::file::" + session + "::" + agent + "::" + name)
		}
	})
	_ = sink
}

// BenchmarkList lists a session of 10,000 and 100,000 files (ten agents,
// three folders each), against a bare walk that reads the same folders and
// keeps each regular file's name, size and time.
func BenchmarkList(b *testing.B) {
	for _, bf := range benchFSs {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%d", bf.name, n), func(b *testing.B) {
				st, sess := benchStore(b, bf.make)
				benchFill(b, st, sess, n)
				b.Run("store", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						files, err := st.List("", "")
						if err != nil || len(files) != n {
							b.Fatalf("List: %d files, %v; want %d", len(files), err, n)
						}
					}
				})
				b.Run("baseline", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if got := bareList(b, st.Fs(), filepath.Join(st.Dir(), sess.ID)); got != n {
							b.Fatalf("bare walk: %d files; want %d", got, n)
						}
					}
				})
			})
		}
	}
}

// benchFill writes n small files into the current session, in the store's
// layout (ten agents, three folders each). It writes them directly rather
// than with Put, whose rename on afero's MemMapFs scans every file of the
// file system and would make filling 100,000 files quadratic.
func benchFill(b *testing.B, st *fleetstate.Store, sess fleetstate.Session, n int) {
	b.Helper()
	const agents, folders = 10, 3
	for a := range agents {
		for f := range folders {
			dir := filepath.Join(st.Dir(), sess.ID, fmt.Sprintf("agent-%02d", a), fmt.Sprintf("f%d", f))
			if err := st.Fs().MkdirAll(dir, 0o700); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range n {
		p := filepath.Join(st.Dir(), sess.ID, fmt.Sprintf("agent-%02d", i%agents), fmt.Sprintf("f%d", i%folders), fmt.Sprintf("file-%06d.md", i))
		if err := afero.WriteFile(st.Fs(), p, []byte("x"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

type benchEntry struct {
	name string
	size int64
	mod  time.Time
}

// bareList walks dir with Readdir and counts the regular files, keeping
// what List keeps of each.
func bareList(b *testing.B, fsys afero.Fs, dir string) int {
	var out []benchEntry
	var walk func(string)
	walk = func(d string) {
		f, err := fsys.Open(d)
		if err != nil {
			b.Fatal(err)
		}
		entries, err := f.Readdir(-1)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range entries {
			switch {
			case e.IsDir():
				walk(filepath.Join(d, e.Name()))
			case e.Mode().IsRegular():
				out = append(out, benchEntry{e.Name(), e.Size(), e.ModTime()})
			}
		}
	}
	walk(dir)
	return len(out)
}

// benchRendezvous opens a rendezvous on a fresh store with pull members
// named member-0… ready to be sent to.
func benchRendezvous(b *testing.B, mk func(*testing.B) (afero.Fs, string), members int) *fleetstate.Rendezvous {
	b.Helper()
	st, _ := benchStore(b, mk)
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rv.Close() })
	for i := range members {
		name := fmt.Sprintf("member-%d", i)
		if err := rv.AddMember(name, nil); err != nil {
			b.Fatal(err)
		}
		if err := rv.SetReady(name, true); err != nil {
			b.Fatal(err)
		}
	}
	return rv
}

// BenchmarkRoundTrip measures a delegation in one process: the lead's Send,
// the member's Next, its Reply, and Send returning the reply; against a
// ping-pong between two goroutines over unbuffered channels.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bf := range benchFSs {
		b.Run(bf.name+"/rendezvous", func(b *testing.B) {
			rv := benchRendezvous(b, bf.make, 1)
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
			for b.Loop() {
				o, err := rv.Send(ctx, "lead", "member-0", "do it")
				if err != nil || o.Kind != fleetstate.OutcomeReply {
					b.Fatalf("Send = %+v, %v; want a reply", o, err)
				}
			}
			cancel()
			wg.Wait()
		})
	}
	b.Run("baseline/channels", func(b *testing.B) {
		ping, pong := make(chan string), make(chan string)
		go func() {
			for m := range ping {
				pong <- m
			}
			close(pong)
		}()
		b.ReportAllocs()
		for b.Loop() {
			ping <- "do it"
			<-pong
		}
		close(ping)
		<-pong
	})
}

// BenchmarkMemory measures what 10,000 blocking sends parked on members
// that have not taken them yet (one each), and 10,000 messages queued for
// one member, cost: live heap, goroutine stacks and goroutines, per send or
// message. The parked sends' own goroutines (the callers') are counted:
// the rendezvous starts none. On mem the turn records written for
// durability live in the heap too; on os they are on disk.
func BenchmarkMemory(b *testing.B) {
	const n = 10_000
	for _, bf := range benchFSs {
		b.Run(bf.name+"/parked-send", func(b *testing.B) {
			var heap, stack, gor float64
			for b.Loop() {
				rv := benchRendezvous(b, bf.make, n)
				ctx, cancel := context.WithCancel(context.Background())
				before := benchMem()
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _ = rv.Send(ctx, "lead", fmt.Sprintf("member-%d", i), "a brief for the member")
					}()
				}
				benchWaitQueued(b, rv, n)
				after := benchMem()
				heap += float64(after.heap-before.heap) / n
				stack += float64(after.stack-before.stack) / n
				gor += float64(after.goroutines-before.goroutines) / n
				cancel()
				wg.Wait()
				rv.Close()
			}
			benchReportMem(b, heap, stack, gor, "send")
		})
		b.Run(bf.name+"/queued-message", func(b *testing.B) {
			var heap, stack, gor float64
			for b.Loop() {
				rv := benchRendezvous(b, bf.make, 1)
				before := benchMem()
				for range n {
					if _, err := rv.SendDetached("lead", "member-0", "a brief for the member"); err != nil {
						b.Fatal(err)
					}
				}
				benchWaitQueued(b, rv, n)
				after := benchMem()
				heap += float64(after.heap-before.heap) / n
				stack += float64(after.stack-before.stack) / n
				gor += float64(after.goroutines-before.goroutines) / n
				rv.Close()
			}
			benchReportMem(b, heap, stack, gor, "msg")
		})
	}
}

func benchReportMem(b *testing.B, heap, stack, gor float64, unit string) {
	runs := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(heap/runs, "heap-B/"+unit)
	b.ReportMetric(stack/runs, "stack-B/"+unit)
	b.ReportMetric((heap+stack)/runs, "total-B/"+unit)
	b.ReportMetric(gor/runs, "goroutines/"+unit)
}

type benchMemStats struct {
	heap, stack int64
	goroutines  int
}

func benchMem() benchMemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return benchMemStats{heap: int64(ms.HeapAlloc), stack: int64(ms.StackInuse), goroutines: runtime.NumGoroutine()}
}

// benchWaitQueued waits until n messages are queued across the members.
func benchWaitQueued(b *testing.B, rv *fleetstate.Rendezvous, n int) {
	b.Helper()
	queued := 0
	if !fleettest.Until(time.Minute, time.Millisecond, func() bool {
		queued = 0
		for _, m := range rv.Members() {
			queued += m.Queued
		}
		return queued == n
	}) {
		b.Fatalf("%d messages queued; want %d", queued, n)
	}
	// The senders are past enqueue, a few instructions from parking; let
	// them park.
	time.Sleep(10 * time.Millisecond)
}
