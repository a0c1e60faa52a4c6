package fleetstate_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/spf13/afero"
)

// journalCountFS counts the files of the rendezvous's turns opened for
// writing: one per append of a record, per slot reused or created.
type journalCountFS struct {
	afero.Fs
	writes atomic.Int64
}

func (c *journalCountFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 && strings.Contains(name, "/turns/") {
		c.writes.Add(1)
	}
	return c.Fs.OpenFile(name, flag, perm)
}

type nextResult struct {
	msg fleetstate.Message
	ok  bool
	err error
}

// parkNext starts a Next of member and returns once it waits on the
// member's empty FIFO.
func parkNext(t *testing.T, rv *fleetstate.Rendezvous, member string) <-chan nextResult {
	t.Helper()
	ch := make(chan nextResult, 1)
	go func() {
		msg, ok, err := rv.Next(context.Background(), member, time.Minute)
		ch <- nextResult{msg, ok, err}
	}()
	if !fleettest.Until(10*time.Second, time.Millisecond, func() bool { return fleetstate.Parked(rv, member) == 1 }) {
		t.Fatalf("Next of %s never waited", member)
	}
	return ch
}

// TestDeliveredAtOnceWrittenOnce: a message that a waiting Next takes at
// once is written once, as delivered, instead of queued and then
// delivered; a crash right after restores its turn open, and the message
// is not delivered again.
func TestDeliveredAtOnceWrittenOnce(t *testing.T) {
	fsys := &journalCountFS{Fs: afero.NewMemMapFs()}
	st := open(t, fsys, "/state", nil)
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}

	next := parkNext(t, rv, "scout")
	before := fsys.writes.Load()
	o, err := rv.SendDetached("lead", "scout", "exactly once")
	if err != nil {
		t.Fatal(err)
	}
	if got := fsys.writes.Load() - before; got != 1 {
		t.Errorf("records written for a message delivered at once: %d; want 1", got)
	}
	if o.State != fleetstate.TicketWorking {
		t.Errorf("accepted outcome %+v; want state working", o)
	}
	got := <-next
	if !got.ok || got.err != nil || got.msg.Content != "exactly once" || got.msg.TurnID != o.TurnID {
		t.Fatalf("Next = %+v; want the message of turn %s", got, o.TurnID)
	}

	fleetstate.Crash(rv)
	rv, err = fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	if p, err := rv.Poll(t.Context(), "lead", o.Ticket, 0); err != nil || p.State != fleetstate.TicketWorking {
		t.Fatalf("ticket after a crash %+v, %v; want working (open, not queued)", p, err)
	}
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	if msg, ok, err := rv.Next(t.Context(), "scout", 0); ok || err != nil {
		t.Fatalf("after a crash Next = %+v, %v, %v; want nothing: the message was delivered", msg, ok, err)
	}
	// That Next ended the open turn, and the lead has its outcome.
	if p, err := rv.Poll(t.Context(), "lead", o.Ticket, 0); err != nil || p.Kind != fleetstate.OutcomeTurnDone {
		t.Fatalf("ticket after the member moved on %+v, %v; want turn_done", p, err)
	}
}

// TestRoundTripAppends: a blocking round trip to a member that waits for
// it writes two records (delivered, and the reply held on the ticket):
// the lead's next send, reusing the slot, says the old turn is over.
func TestRoundTripAppends(t *testing.T) {
	fsys := &journalCountFS{Fs: afero.NewMemMapFs()}
	st := open(t, fsys, "/state", nil)
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	const rounds = 5
	before := fsys.writes.Load()
	for i := range rounds {
		next := parkNext(t, rv, "scout")
		type sent struct {
			o   fleetstate.Outcome
			err error
		}
		done := make(chan sent, 1)
		go func() {
			o, err := rv.Send(t.Context(), "lead", "scout", "work")
			done <- sent{o, err}
		}()
		if got := <-next; !got.ok || got.err != nil {
			t.Fatalf("round %d: Next = %+v", i, got)
		}
		if err := rv.Reply("scout", "done"); err != nil {
			t.Fatal(err)
		}
		if s := <-done; s.err != nil || s.o.Kind != fleetstate.OutcomeReply {
			t.Fatalf("round %d: Send = %+v, %v; want the reply", i, s.o, s.err)
		}
	}
	if got := fsys.writes.Load() - before; got != 2*rounds {
		t.Errorf("records written in %d round trips: %d; want %d", rounds, got, 2*rounds)
	}
}

// TestDeliveredAtOnceRefused: when the record of a message a waiting Next
// would take cannot be written, the send is refused and the Next goes on
// waiting, and takes the next message that can be.
func TestDeliveredAtOnceRefused(t *testing.T) {
	ffs, st, reopen := faultRendezvous(t)
	rv := reopen()
	next := parkNext(t, rv, "scout")
	refuseRendezvousWrites(ffs)
	_, err := rv.SendDetached("lead", "scout", "never accepted")
	wantDiskError(t, st, err, "no space left")
	if !fleettest.Until(10*time.Second, time.Millisecond, func() bool { return fleetstate.Parked(rv, "scout") == 1 }) {
		t.Fatalf("Next stopped waiting after a refused send")
	}
	ffs.Clear()
	o, err := rv.SendDetached("lead", "scout", "accepted")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-next; !got.ok || got.err != nil || got.msg.Content != "accepted" || got.msg.TurnID != o.TurnID {
		t.Fatalf("Next = %+v; want the accepted message", got)
	}
	rv = reopen()
	if msg, ok, err := rv.Next(t.Context(), "scout", 0); ok || err != nil {
		t.Fatalf("a message was delivered again after a restart: %+v, %v", msg, err)
	}
}

// TestDeliveredAtOnceRacesCancel: a Next that gives up as a message is
// handed to it either returns the message or leaves it queued for the
// next Next; it is never dropped nor delivered twice.
func TestDeliveredAtOnceRacesCancel(t *testing.T) {
	st := open(t, afero.NewMemMapFs(), "/state", nil)
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		ctx, cancel := context.WithCancel(t.Context())
		ch := make(chan nextResult, 1)
		go func() {
			msg, ok, err := rv.Next(ctx, "scout", time.Minute)
			ch <- nextResult{msg, ok, err}
		}()
		if !fleettest.Until(10*time.Second, time.Millisecond, func() bool { return fleetstate.Parked(rv, "scout") == 1 }) {
			t.Fatalf("round %d: Next never waited", i)
		}
		go cancel()
		o, err := rv.SendDetached("lead", "scout", "work")
		if err != nil {
			t.Fatal(err)
		}
		got := <-ch
		if !got.ok {
			if got.err != context.Canceled {
				t.Fatalf("round %d: Next = %+v; want the message or context.Canceled", i, got)
			}
			got.msg, got.ok, got.err = rv.Next(t.Context(), "scout", 0)
		}
		if !got.ok || got.err != nil || got.msg.TurnID != o.TurnID {
			t.Fatalf("round %d: message of turn %s taken as %+v", i, o.TurnID, got)
		}
		if err := rv.Reply("scout", "done"); err != nil {
			t.Fatal(err)
		}
		if msg, ok, err := rv.Next(t.Context(), "scout", 0); ok || err != nil {
			t.Fatalf("round %d: delivered twice: %+v, %v", i, msg, err)
		}
		if err := rv.Ack("lead", o.Ticket); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
}
