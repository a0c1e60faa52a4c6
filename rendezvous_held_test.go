package fleetstate_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/spf13/afero"
)

// Outcomes held for a re-poll (RendezvousOptions.HoldReturned) and the
// held log: see the header of rendezvous_journal.go. These tests are of a
// state directory's own: its slot files, its held log, crashes in the
// middle of writing it. The held outcomes' flows on every backend are in
// package fleetstatetest's rendezvous suites.

const heldLog = "/state/.fleetstate/rendezvous/turns/held.jsonl"

// heldRoundTrip is a blocking round trip from lead to member, a pulling
// member: its reply, returned by Send, is then held on the ticket.
func heldRoundTrip(t *testing.T, rv *fleetstate.Rendezvous, member, brief string) fleetstate.Outcome {
	t.Helper()
	sent := async(func() (fleetstate.Outcome, error) {
		return rv.Send(context.Background(), "lead", member, brief)
	})
	msg, ok, err := rv.Next(context.Background(), member, time.Minute)
	if err != nil || !ok || msg.Content != brief {
		t.Fatalf("Next(%s) = %+v, %v, %v; want %q", member, msg, ok, err, brief)
	}
	if err := rv.Reply(member, "re: "+brief); err != nil {
		t.Fatalf("Reply: %v", err)
	}
	res := <-sent
	if res.err != nil || res.o.Kind != fleetstate.OutcomeReply || res.o.Content != "re: "+brief {
		t.Fatalf("Send(%s) = %+v, %v; want the reply", brief, res.o, res.err)
	}
	return res.o
}

// wantHeld fails unless the ticket of o holds its reply for lead.
func wantHeld(t *testing.T, rv *fleetstate.Rendezvous, o fleetstate.Outcome, why string) {
	t.Helper()
	p, err := rv.Poll(context.Background(), "lead", o.Ticket, 0)
	if err != nil || p.State != fleetstate.TicketDone || p.Content != o.Content || p.TurnID != o.TurnID {
		t.Fatalf("%s: Poll = %+v, %v; want the held reply %q", why, p, err, o.Content)
	}
}

// wantGone fails unless the ticket of o is unknown.
func wantGone(t *testing.T, rv *fleetstate.Rendezvous, o fleetstate.Outcome, why string) {
	t.Helper()
	if p, err := rv.Poll(context.Background(), "lead", o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("%s: Poll = %+v, %v; want %s", why, p, err, fleetstate.CodeUnknownTicket)
	}
}

// createCountFS counts the files created and renamed in the rendezvous's
// turns folder, and the files opened there for writing.
type createCountFS struct {
	afero.Fs
	creates, writes atomic.Int64
}

func (c *createCountFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if strings.Contains(name, "/turns/") {
		if flag&os.O_CREATE != 0 {
			c.creates.Add(1)
		}
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			c.writes.Add(1)
		}
	}
	return c.Fs.OpenFile(name, flag, perm)
}

func (c *createCountFS) Rename(oldname, newname string) error {
	if strings.Contains(newname, "/turns/") {
		c.creates.Add(1)
	}
	return c.Fs.Rename(oldname, newname)
}

// TestHeldSteadyStateCreatesNoFile: with HoldReturned, as a daemon runs,
// the outcomes returned stay held, yet once the first slot exists round
// trips create no file: a held turn's record moves to the held log and its
// slot back to the pool. Each round trip opens three files for writing:
// the slot for the delivered message and for the reply, and the held log.
func TestHeldSteadyStateCreatesNoFile(t *testing.T) {
	fsys := &createCountFS{Fs: afero.NewMemMapFs()}
	st := open(t, fsys, "/state", nil)
	rv, err := fleetstate.NewRendezvous(st, &fleetstate.RendezvousOptions{HoldReturned: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	var held []fleetstate.Outcome
	for i := range 2 { // the first slot, and the held log
		held = append(held, heldRoundTrip(t, rv, "scout", fmt.Sprintf("warm-up %d", i)))
	}
	const rounds = 40
	creates, writes := fsys.creates.Load(), fsys.writes.Load()
	for i := range rounds {
		// The member waits first, so that each message is written once,
		// as delivered (see TestRoundTripAppends).
		next := parkNext(t, rv, "scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return rv.Send(context.Background(), "lead", "scout", fmt.Sprintf("task %d", i))
		})
		if got := <-next; !got.ok || got.err != nil {
			t.Fatalf("round %d: Next = %+v", i, got)
		}
		if err := rv.Reply("scout", "done"); err != nil {
			t.Fatal(err)
		}
		res := <-sent
		if res.err != nil || res.o.Kind != fleetstate.OutcomeReply {
			t.Fatalf("round %d: Send = %+v, %v; want the reply", i, res.o, res.err)
		}
		held = append(held, res.o)
	}
	if got := fsys.creates.Load() - creates; got != 0 {
		t.Errorf("files created in %d round trips with held outcomes: %d; want 0", rounds, got)
	}
	if got := fsys.writes.Load() - writes; got != 3*rounds {
		t.Errorf("files written in %d round trips: %d; want %d", rounds, got, 3*rounds)
	}
	names, err := afero.Glob(fsys, filepath.Join(filepath.Dir(heldLog), "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Errorf("turns folder = %q; want one slot and the held log", names)
	}
	for _, o := range held {
		wantHeld(t, rv, o, "a returned outcome within its hold")
	}
}

// TestHeldLogTornLines: a line of the held log that a crash cut short is
// skipped, and the lines appended after it still read.
func TestHeldLogTornLines(t *testing.T) {
	fsys := afero.NewMemMapFs()
	opts := &fleetstate.RendezvousOptions{HoldReturned: time.Hour}
	st := open(t, fsys, "/state", nil)
	rv, err := fleetstate.NewRendezvous(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	a := heldRoundTrip(t, rv, "scout", "a")
	fleetstate.Crash(rv)

	// A crash in the middle of the append of b's record: half a line.
	data, err := afero.ReadFile(fsys, heldLog)
	if err != nil {
		t.Fatal(err)
	}
	torn := append(bytes.Clone(data), bytes.TrimLeft(data, "\n")[:len(bytes.TrimSpace(data))/2]...)
	if err := afero.WriteFile(fsys, heldLog, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	rv, err = fleetstate.NewRendezvous(open(t, fsys, "/state", nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, rv, a, "a beside a torn line")
	b := heldRoundTrip(t, rv, "scout", "b") // appended after the torn line
	fleetstate.Crash(rv)
	rv, err = fleetstate.NewRendezvous(open(t, fsys, "/state", nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	wantHeld(t, rv, a, "a after a torn line and a restart")
	wantHeld(t, rv, b, "b, written after a torn line")
	tickets, err := rv.PollAll(context.Background(), "lead", 0)
	if err != nil || len(tickets) != 2 {
		t.Fatalf("PollAll = %+v, %v; want a and b only", tickets, err)
	}
}

// TestHeldLogCompaction: as holds end, the held log is compacted, so it
// stays within twice its live records (past its least size); the turns
// still held are restored from the compacted log, and those whose hold
// ended are not brought back by the slots that held them.
func TestHeldLogCompaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = time.Minute
		opts := &fleetstate.RendezvousOptions{HoldReturned: hold}
		fsys := afero.NewMemMapFs()
		st := open(t, fsys, "/state", nil)
		rv, err := fleetstate.NewRendezvous(st, opts)
		if err != nil {
			t.Fatal(err)
		}
		fleetstate.SetHeldLogMin(rv, 1)
		for _, m := range []string{"m0", "m1", "m2"} {
			if err := rv.AddMember(m, nil); err != nil {
				t.Fatal(err)
			}
		}
		var expired, held []fleetstate.Outcome
		maxSize := int64(0)
		for i := range 30 {
			o := heldRoundTrip(t, rv, fmt.Sprintf("m%d", i%3), fmt.Sprintf("task %d", i))
			if i < 25 {
				expired = append(expired, o)
			} else {
				held = append(held, o)
			}
			if i == 24 {
				settle(hold) // the first 25 holds end
			} else {
				settle(time.Second)
			}
			fi, err := fsys.Stat(heldLog)
			if err != nil {
				t.Fatal(err)
			}
			maxSize = max(maxSize, fi.Size())
		}
		one := int64(0) // the size of one record line, about
		data, err := afero.ReadFile(fsys, heldLog)
		if err != nil {
			t.Fatal(err)
		}
		if n := int64(bytes.Count(data, []byte(`"ticket"`))); n > 0 {
			one = int64(len(data)) / n
		}
		if n := bytes.Count(data, []byte(`"ticket"`)); n > 2*len(held)+2 {
			t.Errorf("held log holds %d records for %d held turns: not compacted", n, len(held))
		}
		if limit := 4 * one * int64(len(held)+2); maxSize > limit && one > 0 {
			t.Errorf("held log grew to %d bytes with at most %d held turns of about %d bytes", maxSize, len(held)+1, one)
		}
		// The last, acked: the compaction that follows forgets it, and
		// the slot that still ends with its record must not bring it back.
		last := held[len(held)-1]
		held = held[:len(held)-1]
		if err := rv.Ack("lead", last.Ticket); err != nil {
			t.Fatal(err)
		}
		expired = append(expired, last)
		fleetstate.Crash(rv)
		rv, err = fleetstate.NewRendezvous(open(t, fsys, "/state", nil), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rv.Close()
		for _, o := range expired {
			wantGone(t, rv, o, "a turn whose hold ended before the compaction")
		}
		for _, o := range held {
			wantHeld(t, rv, o, "a held turn after compaction and a crash")
		}
	})
}

// dyingFS is a process that dies at its n-th change of the turns folder
// (an open for writing, a write, a truncation, a rename or a removal
// there): a write then writes half its bytes, and that change and every
// later one fail without effect, as nothing a dead process does reaches
// the disk. Reads go on. Counting with n = 0 never dies.
type dyingFS struct {
	afero.Fs
	mu      sync.Mutex
	n, done int // guarded by mu
	dead    bool
}

var errDead = syscall.EIO

// change counts a change and reports how much of it happens: all, half
// (the change that dies, if a write) or none.
func (d *dyingFS) change(name string) (ok, half bool) {
	if !strings.Contains(name, "/turns") {
		return true, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return false, false
	}
	d.done++
	if d.n > 0 && d.done == d.n {
		d.dead = true
		return false, true
	}
	return true, false
}

// mark returns how many changes happened so far, and whether it is dead.
func (d *dyingFS) mark() (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done, d.dead
}

func (d *dyingFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		if ok, _ := d.change(name); !ok {
			return nil, &os.PathError{Op: "open", Path: name, Err: errDead}
		}
	}
	f, err := d.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &dyingFile{File: f, d: d}, nil
}

func (d *dyingFS) Rename(oldname, newname string) error {
	if ok, _ := d.change(newname); !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errDead}
	}
	return d.Fs.Rename(oldname, newname)
}

func (d *dyingFS) Remove(name string) error {
	if ok, _ := d.change(name); !ok {
		return &os.PathError{Op: "remove", Path: name, Err: errDead}
	}
	return d.Fs.Remove(name)
}

type dyingFile struct {
	afero.File
	d *dyingFS
}

func (f *dyingFile) Write(p []byte) (int, error) {
	ok, half := f.d.change(f.Name())
	if half {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errDead
	}
	if !ok {
		return 0, errDead
	}
	return f.File.Write(p)
}

func (f *dyingFile) Truncate(size int64) error {
	if ok, _ := f.d.change(f.Name()); !ok {
		return errDead
	}
	return f.File.Truncate(size)
}

// TestHeldCrashAtEachChange runs a story of held outcomes (round trips,
// acks, holds that end, compactions of the held log) and kills the
// process at each change it makes to the turns folder in turn, the last
// write torn. A new rendezvous on what was left must then restore every
// outcome whose round trip ended before the crash and that was not
// released before it, and none that was acked or whose hold ended before
// the crash.
func TestHeldCrashAtEachChange(t *testing.T) {
	total := heldCrashStory(t, 0)
	if total < 40 {
		t.Fatalf("the story made %d changes; want more", total)
	}
	for n := 1; n <= total; n++ {
		heldCrashStory(t, n)
	}
}

// heldCrashStory runs the story on a process that dies at its n-th change
// (never with n = 0), checks what a restart finds, and returns how many
// changes the story made.
func heldCrashStory(t *testing.T, n int) (changes int) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		const hold = time.Minute
		// Quiet: the writes a dead process tries fail, and are logged.
		opts := &fleetstate.RendezvousOptions{HoldReturned: hold, Logger: slog.New(slog.DiscardHandler)}
		mem := afero.NewMemMapFs()
		d := &dyingFS{Fs: mem, n: n}
		st := open(t, d, "/state", nil)
		rv, err := fleetstate.NewRendezvous(st, opts)
		if err != nil {
			t.Fatal(err)
		}
		fleetstate.SetHeldLogMin(rv, 1) // compact at every chance
		for _, m := range []string{"m0", "m1"} {
			if err := rv.AddMember(m, nil); err != nil {
				t.Fatal(err)
			}
		}
		// What the story saw, at the count of changes made by then: a
		// ticket held (its round trip over) and released (acked, or its
		// hold over).
		type fate struct {
			o                  fleetstate.Outcome
			heldAt, releasedAt int  // 0: not (yet)
			unsure             bool // released as the process died: either way
		}
		var fates []*fate
		step := 0
		roundTrip := func() {
			member := fmt.Sprintf("m%d", step%2)
			brief := fmt.Sprintf("task %d", step)
			step++
			sent := async(func() (fleetstate.Outcome, error) {
				return rv.Send(context.Background(), "lead", member, brief)
			})
			msg, ok, err := rv.Next(context.Background(), member, time.Minute)
			if err != nil || !ok {
				<-sent
				return // refused once dead
			}
			_ = rv.Reply(member, "re: "+msg.Content)
			res := <-sent
			synctest.Wait() // the writer's step of the reply is over
			if c, dead := d.mark(); !dead && res.err == nil && res.o.Kind == fleetstate.OutcomeReply {
				fates = append(fates, &fate{o: res.o, heldAt: c})
			}
		}
		// gone reports whether the rendezvous, in memory, no longer holds
		// the ticket of f.
		gone := func(f *fate) bool {
			_, err := rv.Poll(context.Background(), "lead", f.o.Ticket, 0)
			return fleetstate.CodeOf(err) == fleetstate.CodeUnknownTicket
		}
		// settled notes the releases (acks, holds that ended) of the
		// action that began when the count was at before: each at the
		// count after it, or, if the process died meanwhile, as unsure.
		settled := func(before int) {
			c, dead := d.mark()
			for _, f := range fates {
				switch {
				case f.releasedAt != 0 || f.unsure || !gone(f):
				case dead && before < n:
					f.unsure = true // released as the process died
				case !dead:
					f.releasedAt = c
				}
			}
		}
		ack := func(i int) {
			if i < 0 || i >= len(fates) {
				return
			}
			before, _ := d.mark()
			_ = rv.Ack("lead", fates[i].o.Ticket)
			settled(before)
		}
		sleep := func(dt time.Duration) {
			before, _ := d.mark()
			settle(dt)
			settled(before)
		}
		for round := range 3 {
			roundTrip()
			roundTrip()
			ack(3 * round) // an older one
			roundTrip()
			ack(len(fates) - 1) // the last, whose slot still ends with its record
			sleep(20 * time.Second)
			roundTrip()
			sleep(hold)
		}
		roundTrip()

		changes, _ = d.mark()
		fleetstate.Crash(rv)
		st2 := open(t, mem, "/state", nil)
		rv2, err := fleetstate.NewRendezvous(st2, opts)
		if err != nil {
			t.Fatalf("dead at change %d: NewRendezvous: %v", n, err)
		}
		defer rv2.Close()
		if tmp, _ := afero.Glob(mem, filepath.Join(filepath.Dir(heldLog), ".fleetstate-tmp-*")); len(tmp) > 0 {
			t.Fatalf("dead at change %d: temporary files left after the restart: %q", n, tmp)
		}
		for _, f := range fates {
			switch {
			case f.unsure:
			case f.releasedAt != 0:
				wantGone(t, rv2, f.o, fmt.Sprintf("dead at change %d, released at %d", n, f.releasedAt))
			case f.heldAt != 0:
				wantHeld(t, rv2, f.o, fmt.Sprintf("dead at change %d, held at %d", n, f.heldAt))
			}
		}
		// The restored rendezvous works.
		if err := rv2.AddMember("m9", nil); err != nil {
			t.Fatal(err)
		}
		heldRoundTrip(t, rv2, "m9", "after the restart")
	})
	return changes
}

// TestHeldLogRefused: while the held log cannot be written, a handed turn
// keeps its slot (the next turn takes another), and its record moves once
// the log can be written again; a crash at either point restores it.
func TestHeldLogRefused(t *testing.T) {
	ffs := fleettest.NewFaultFS(afero.NewMemMapFs())
	opts := &fleetstate.RendezvousOptions{HoldReturned: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	reopen := func(prev *fleetstate.Rendezvous) *fleetstate.Rendezvous {
		t.Helper()
		if prev != nil {
			fleetstate.Crash(prev)
		}
		rv, err := fleetstate.NewRendezvous(open(t, ffs, "/state", nil), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rv.Close() })
		if err := rv.AddMember("scout", nil); err != nil {
			t.Fatal(err)
		}
		return rv
	}
	rv := reopen(nil)
	ffs.Fail(fleettest.OpWrite, "held.jsonl", syscall.ENOSPC)
	ffs.Fail(fleettest.OpCreate, "held.jsonl", syscall.ENOSPC)
	a := heldRoundTrip(t, rv, "scout", "a")
	b := heldRoundTrip(t, rv, "scout", "b") // not in a's slot
	rv = reopen(rv)
	wantHeld(t, rv, a, "a, while the held log is refused, after a restart")
	wantHeld(t, rv, b, "b, while the held log is refused, after a restart")
	c := heldRoundTrip(t, rv, "scout", "c")
	ffs.Clear()
	d := heldRoundTrip(t, rv, "scout", "d") // c moves now, with d
	e := heldRoundTrip(t, rv, "scout", "e") // in the slot of c or d
	rv = reopen(rv)
	for _, o := range []fleetstate.Outcome{a, b, c, d, e} {
		wantHeld(t, rv, o, o.Content+" after the held log works again and a restart")
	}
}
