package fleetstate_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/spf13/afero"
)

// ---- one owner -------------------------------------------------------------

// A second rendezvous on a directory that one owns is refused with a named
// error naming the owner, in memory and on disk; once the owner closes, the
// directory can be owned again.
func TestOneOwnerPerStateDirectory(t *testing.T) {
	fileOnly(t, "the owner's lock on a state directory (TestOwnOneOwner of package fleetnats tests the lease)")
	for _, tc := range []struct {
		name string
		fs   afero.Fs
		dir  func(t *testing.T) string
	}{
		{"memory", afero.NewMemMapFs(), func(*testing.T) string { return "/state" }},
		{"disk", afero.NewOsFs(), func(t *testing.T) string { return filepath.Join(t.TempDir(), "state") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			opts := &fleetstate.Options{NoGitIgnore: true}
			st := open(t, tc.fs, dir, opts)
			r, err := fleetstate.NewRendezvous(st, &fleetstate.RendezvousOptions{Addr: "http://127.0.0.1:7333/mcp"})
			if err != nil {
				t.Fatal(err)
			}
			// Another Store on the same directory, as another process has.
			st2 := open(t, tc.fs, dir, opts)
			_, err = fleetstate.NewRendezvous(st2, nil)
			if !errors.Is(err, fleetstate.ErrFleetOwned) {
				t.Fatalf("second NewRendezvous = %v; want %s", err, fleetstate.CodeFleetOwned)
			}
			var owned *fleetstate.OwnedError
			if !errors.As(err, &owned) || owned.Owner.PID != os.Getpid() || owned.Owner.Addr != "http://127.0.0.1:7333/mcp" || owned.Dir != st2.Dir() {
				t.Fatalf("second NewRendezvous detail %+v; want this process's pid, the owner's address and the directory", owned)
			}
			if o, ok, err := st2.FleetOwner(); err != nil || !ok || o.PID != os.Getpid() {
				t.Fatalf("FleetOwner = %+v, %v, %v; want this process", o, ok, err)
			}
			r.Close()
			if _, ok, err := st2.FleetOwner(); err != nil || ok {
				t.Fatalf("FleetOwner after Close = %v, %v; want none", ok, err)
			}
			r2, err := fleetstate.NewRendezvous(st2, nil)
			if err != nil {
				t.Fatalf("NewRendezvous after the owner closed: %v", err)
			}
			r2.Close()
		})
	}
}

// Store.Clean refuses, and changes nothing, while a rendezvous owns the
// fleet; Rendezvous.Clean cleans the store and ends the turns in one step.
func TestCleanGoesThroughTheOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		if _, err := f.st.NewSession("s"); err != nil {
			t.Fatal(err)
		}
		id := put(t, f.st, "scout", "notes.md", "keep", false)
		o, err := f.r.SendDetached("lead", "scout", "work")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.st.Clean(); !errors.Is(err, fleetstate.ErrFleetOwned) {
			t.Fatalf("Store.Clean under an owner = %v; want %s", err, fleetstate.CodeFleetOwned)
		}
		if got := get(t, f.st, id); got != "keep" {
			t.Fatalf("a refused clean changed a file: %q", got)
		}
		if _, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0); err != nil {
			t.Fatalf("a refused clean dropped a ticket: %v", err)
		}
		if err := f.r.Clean(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.CurrentSession(); !errors.Is(err, fleetstate.ErrNoActiveSession) {
			t.Fatalf("session after Rendezvous.Clean: %v; want none", err)
		}
		if _, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("ticket after Rendezvous.Clean: %v; want %s", err, fleetstate.CodeUnknownTicket)
		}
		if _, ok, _ := f.r.Next(context.Background(), "scout", 0); ok {
			t.Fatal("a cleaned message was delivered")
		}
	})
}

// The state directory may hold what the store did not make (here it is a
// git work tree): a clean removes only sessions, the store's own files and
// the rendezvous state.
func TestCleanRemovesOnlyWhatTheStoreMade(t *testing.T) {
	fileOnly(t, "what a clean leaves in a state directory on disk")
	dir := t.TempDir()
	for name, content := range map[string]string{
		".git/HEAD":   "ref: refs/heads/main\n",
		"src/main.go": "package main\n",
		"README.md":   "mine\n",
		"11111111-2222-3333-4444-55555555555.txt": "not a session folder\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := open(t, afero.NewOsFs(), dir, &fleetstate.Options{NoGitIgnore: true})
	r, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first, err := st.NewSession("one")
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, "scout", "a/b.md", "x", false)
	if _, err := st.NewSession("two"); err != nil {
		t.Fatal(err)
	}
	put(t, st, "scout", "c.md", "y", false)
	if err := r.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SendDetached("lead", "scout", "work"); err != nil {
		t.Fatal(err)
	}
	if err := r.Clean(); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{first.ID, "current_run.txt", "previous_run_log.txt", ".fleetstate/rendezvous"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the clean (%v)", gone, err)
		}
	}
	for _, kept := range []string{".git/HEAD", "src/main.go", "README.md", "11111111-2222-3333-4444-55555555555.txt"} {
		if _, err := os.Stat(filepath.Join(dir, kept)); err != nil {
			t.Errorf("%s, which the store did not make, is gone: %v", kept, err)
		}
	}
}

// ---- restarts --------------------------------------------------------------

// restart crashes f's rendezvous and opens a new one in the same home
// with opts, registering the pulling members named.
func (f *fleet) restart(opts *fleetstate.RendezvousOptions, members ...string) {
	f.t.Helper()
	fleetstate.Crash(f.r)
	f.h.crashed(f.t)
	st, r := openRendezvous(f.t, f.h, opts)
	f.st, f.r = st, r
	for _, m := range members {
		if err := r.AddMember(m, nil); err != nil {
			f.t.Fatal(err)
		}
	}
}

// working sends brief to member, detached, and has the member take it:
// the turn is open.
func (f *fleet) working(member, brief string) fleetstate.Outcome {
	f.t.Helper()
	o, err := f.r.SendDetached("lead", member, brief)
	if err != nil {
		f.t.Fatal(err)
	}
	f.next(member)
	return o
}

func (f *fleet) poll(ticket string) fleetstate.Outcome {
	f.t.Helper()
	o, err := f.r.Poll(context.Background(), "lead", ticket, 0)
	if err != nil {
		f.t.Fatalf("Poll(%s): %v", ticket, err)
	}
	return o
}

// A member that held an open turn counts as ready after a restart, so a
// message queued behind the turn does not fail for want of readiness; if
// the member never comes back, the turn ends member_gone at the rejoin
// bound, and the queued message member_not_ready at the ready bound after.
func TestRestoredTurnsOfAMemberThatNeverComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		open := f.working("scout", "long task")
		queued, _ := f.r.SendDetached("lead", "scout", "after it")
		opts := &fleetstate.RendezvousOptions{RejoinTimeout: 30 * time.Second, ReadyTimeout: 10 * time.Second}
		f.restart(opts, "scout")

		settle(20 * time.Second) // past the ready bound, within the rejoin bound
		if o := f.poll(queued.Ticket); o.State != fleetstate.TicketQueued {
			t.Fatalf("queued ticket within the rejoin bound = %+v; want still queued (the member counts as ready)", o)
		}
		if got := f.r.Members(); len(got) != 1 || !got[0].Ready {
			t.Fatalf("members within the rejoin bound = %+v; want scout ready", got)
		}
		settle(11 * time.Second) // past the rejoin bound
		if o := f.poll(open.Ticket); o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonMemberGone {
			t.Fatalf("restored open turn past the rejoin bound = %+v; want failed, member_gone", o)
		}
		if err := f.r.Ack("lead", open.Ticket); err != nil {
			t.Fatalf("ack of the ended turn: %v", err)
		}
		settle(11 * time.Second) // past the ready bound that then starts
		if o := f.poll(queued.Ticket); o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonMemberNotReady {
			t.Fatalf("queued ticket of a member gone = %+v; want failed, member_not_ready", o)
		}
	})
}

// A member that comes back within the rejoin bound keeps its turn and
// answers it.
func TestRestoredTurnKeptByAMemberThatComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		open := f.working("scout", "long task")
		f.restart(&fleetstate.RendezvousOptions{RejoinTimeout: 30 * time.Second}, "scout")
		settle(10 * time.Second)
		if err := f.r.SetReady("scout", true); err != nil { // its stream reopened
			t.Fatal(err)
		}
		settle(time.Minute)
		if err := f.r.Reply("scout", "done after all"); err != nil {
			t.Fatalf("reply to the restored turn: %v", err)
		}
		if o := f.poll(open.Ticket); o.Content != "done after all" {
			t.Fatalf("ticket = %+v; want the reply", o)
		}
	})
}

// Messages queued for a member that is not registered after the restart
// (its token was revoked meanwhile) end at the ready bound; so does the
// open turn of such a member at the rejoin bound.
func TestRestoredTurnsOfAnUnregisteredMemberEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		open := f.working("scout", "task")
		queued, _ := f.r.SendDetached("lead", "scout", "next")
		f.restart(&fleetstate.RendezvousOptions{RejoinTimeout: 5 * time.Second, ReadyTimeout: 5 * time.Second})
		settle(11 * time.Second)
		if o := f.poll(open.Ticket); o.Reason != fleetstate.ReasonMemberGone {
			t.Fatalf("open turn = %+v; want failed, member_gone", o)
		}
		if o := f.poll(queued.Ticket); o.Reason != fleetstate.ReasonMemberNotReady {
			t.Fatalf("queued ticket = %+v; want failed, member_not_ready", o)
		}
	})
}

// A question pending at a restart keeps its window: the lead can answer it
// by turn ID and the member's next Ask gets the answer at once.
func TestRestoredQuestionCanBeAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		o := f.working("scout", "task")
		asked := make(chan error, 1)
		go func() {
			_, _, err := f.r.Ask(context.Background(), "scout", "which way?", "left")
			asked <- err
		}()
		settle(10 * time.Second)
		f.restart(nil, "scout")
		if err := <-asked; fleetstate.CodeOf(err) != fleetstate.CodeClosed {
			t.Fatalf("the Ask cut by the restart = %v; want %s", err, fleetstate.CodeClosed)
		}
		q := f.poll(o.Ticket)
		if q.Kind != fleetstate.OutcomeQuestion || q.Content != "which way?" {
			t.Fatalf("restored ticket = %+v; want the question", q)
		}
		answered := async(func() (fleetstate.Outcome, error) {
			return f.r.Answer(context.Background(), "lead", q.TurnID, "right")
		})
		synctest.Wait()
		text, timedOut, err := f.r.Ask(context.Background(), "scout", "which way?", "left")
		if err != nil || timedOut || text != "right" {
			t.Fatalf("the member's next Ask = %q, %v, %v; want the lead's answer at once", text, timedOut, err)
		}
		if err := f.r.Reply("scout", "went right"); err != nil {
			t.Fatal(err)
		}
		if res := <-answered; res.err != nil || res.o.Content != "went right" {
			t.Fatalf("Answer = %+v, %v; want the member's reply", res.o, res.err)
		}
	})
}

// A restored question nobody answers goes back to working when what was
// left of its window passes, and a waiting poll over all tickets does not
// spin on it meanwhile.
func TestRestoredQuestionWindowEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		o := f.working("scout", "task")
		go f.r.Ask(context.Background(), "scout", "which way?", "left")
		settle(20 * time.Second)
		f.restart(nil, "scout")
		if err := f.r.SetReady("scout", true); err != nil { // the member is back, but does not ask again
			t.Fatal(err)
		}
		all, err := f.r.PollAll(context.Background(), "lead", 0) // the lead sees the question
		if err != nil || len(all) != 1 || all[0].Kind != fleetstate.OutcomeQuestion {
			t.Fatalf("PollAll = %+v, %v; want the question", all, err)
		}
		// The question was seen: the waiting poll does not return at once,
		// and the end of the window (35 s on) is no news either.
		start := time.Now()
		all, err = f.r.PollAll(context.Background(), "lead", 50*time.Second)
		if waited := time.Since(start); err != nil || waited != 50*time.Second || len(all) != 1 || all[0].State != fleetstate.TicketWorking {
			t.Fatalf("waiting PollAll = %+v, %v after %v; want the ticket back to working, after the full 50s", all, err, waited)
		}
		if _, err := f.r.Answer(context.Background(), "lead", o.TurnID, "late"); fleetstate.CodeOf(err) != fleetstate.CodeNoPendingQuestion {
			t.Fatalf("Answer after the window = %v; want %s", err, fleetstate.CodeNoPendingQuestion)
		}
	})
}

// A waiting poll over all tickets returns at once for news only: a question
// the lead has seen does not make it return again.
func TestPollAllWaitsForNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		f.r.SendDetached("lead", "scout", "task")
		f.next("scout")
		go f.r.Ask(context.Background(), "scout", "which way?", "left")
		synctest.Wait()
		start := time.Now()
		if all, _ := f.r.PollAll(context.Background(), "lead", 30*time.Second); len(all) != 1 || time.Since(start) != 0 {
			t.Fatalf("first waiting PollAll = %+v after %v; want the new question at once", all, time.Since(start))
		}
		start = time.Now()
		f.r.PollAll(context.Background(), "lead", 30*time.Second)
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("second waiting PollAll returned after %v; want it to wait 30s for news", d)
		}
	})
}

// ---- cancel ----------------------------------------------------------------

func TestCancelQueuedTurnIsNeverDelivered(t *testing.T) {
	f := newFleet(t, nil)
	f.pull("scout")
	first, _ := f.r.SendDetached("lead", "scout", "first")
	second, _ := f.r.SendDetached("lead", "scout", "second")
	o, err := f.r.Cancel("lead", first.Ticket)
	if err != nil || o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonCancelled || o.State != fleetstate.TicketDone {
		t.Fatalf("Cancel = %+v, %v; want failed, cancelled, done", o, err)
	}
	if msg := f.next("scout"); msg.Content != "second" {
		t.Fatalf("Next after a cancel = %q; want the second message", msg.Content)
	}
	_ = second
}

func TestCancelOpenTurnTellsTheMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "task")
		})
		msg := f.next("scout")
		asked := make(chan error, 1)
		go func() {
			_, _, err := f.r.Ask(context.Background(), "scout", "sure?", "yes")
			asked <- err
		}()
		synctest.Wait()
		<-sent                                   // the question
		o, err := f.r.Cancel("lead", msg.TurnID) // by turn ID
		if err != nil || o.Reason != fleetstate.ReasonCancelled || o.TurnID != msg.TurnID {
			t.Fatalf("Cancel by turn ID = %+v, %v", o, err)
		}
		if err := <-asked; !errors.Is(err, fleetstate.ErrTurnCancelled) {
			t.Fatalf("the blocked Ask = %v; want %s", err, fleetstate.CodeTurnCancelled)
		}
		if err := f.r.Reply("scout", "too late"); !errors.Is(err, fleetstate.ErrTurnCancelled) {
			t.Fatalf("Reply after the cancel = %v; want %s", err, fleetstate.CodeTurnCancelled)
		}
		// The outcome the cancel returned is held until the lead's next
		// call, which a second cancel is: then it is gone.
		if p := f.poll(o.Ticket); p.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("ticket after the cancel = %+v", p)
		}
		if _, err := f.r.Cancel("lead", o.Ticket); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("second Cancel = %v; want %s", err, fleetstate.CodeUnknownTicket)
		}
		if _, ok, err := f.r.Next(context.Background(), "scout", 0); ok || err != nil {
			t.Fatalf("Next = %v, %v", ok, err)
		}
		if err := f.r.Reply("scout", "x"); !errors.Is(err, fleetstate.ErrNoOpenTurn) {
			t.Fatalf("Reply after Next = %v; want %s", err, fleetstate.CodeNoOpenTurn)
		}
	})
}

func TestCancelWakesTheBlockedSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "task")
		})
		msg := f.next("scout")
		if _, err := f.r.Cancel("lead", msg.TurnID); err != nil {
			t.Fatal(err)
		}
		if res := <-sent; res.err != nil || res.o.Reason != fleetstate.ReasonCancelled {
			t.Fatalf("the blocked Send = %+v, %v; want failed, cancelled", res.o, res.err)
		}
	})
}

func TestCancelRefusesOthers(t *testing.T) {
	f := newFleet(t, nil)
	f.pull("scout")
	o, _ := f.r.SendDetached("lead", "scout", "task")
	for _, tc := range []struct{ lead, id string }{
		{"other-lead", o.Ticket},
		{"lead", "ticket-00000000-0000-0000-0000-000000000000"},
	} {
		if _, err := f.r.Cancel(tc.lead, tc.id); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Errorf("Cancel(%s, %s) = %v; want %s", tc.lead, tc.id, err, fleetstate.CodeUnknownTicket)
		}
	}
	if p := f.poll(o.Ticket); p.State != fleetstate.TicketQueued {
		t.Fatalf("refused cancels changed the ticket: %+v", p)
	}
}

// ---- watchers --------------------------------------------------------------

// countingPort is a Member port that counts its status reads and gives no
// change notices, so it is read every PollInterval.
type countingPort struct{ reads atomic.Int64 }

func (p *countingPort) Deliver(context.Context, string) error { return nil }
func (p *countingPort) Status(context.Context) (fleetstate.Status, error) {
	p.reads.Add(1)
	return fleetstate.StatusWorking, nil
}
func (p *countingPort) Tail(context.Context, int) (string, bool, error) { return "", false, nil }

// However often a member's port is removed and given back, one goroutine
// watches it.
func TestOneWatcherPerMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, &fleetstate.RendezvousOptions{PollInterval: time.Second})
		p := &countingPort{}
		for range 10 {
			if err := f.r.AddMember("scout", p); err != nil {
				t.Fatal(err)
			}
			if err := f.r.AddMember("scout", nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.r.AddMember("scout", p); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := p.reads.Load()
		settle(10 * time.Second)
		if n := p.reads.Load() - before; n != 10 {
			t.Fatalf("%d status reads in 10 poll intervals; want 10 (one watcher)", n)
		}
	})
}

// A LocalMember tells the rendezvous when its status changes: with a poll
// interval of an hour, a delivery and the end of a turn happen at once.
func TestLocalMemberIsNotPolled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, &fleetstate.RendezvousOptions{PollInterval: time.Hour})
		lm := f.local("worker")
		start := time.Now()
		o, _ := f.r.SendDetached("lead", "worker", "task")
		if got := recv(lm); got != "task" {
			t.Fatalf("member got %q; want the task at once", got)
		}
		lm.SetStatus(fleetstate.StatusWorking)
		synctest.Wait()
		lm.Print("all done")
		lm.SetStatus(fleetstate.StatusIdle)
		synctest.Wait()
		if p := f.poll(o.Ticket); p.Kind != fleetstate.OutcomeTurnDone || p.Content != "all done" {
			t.Fatalf("ticket = %+v; want turn_done with the tail", p)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("%v of fake time passed; want none (no polling)", d)
		}
	})
}

// ---- paging ----------------------------------------------------------------

func TestPollPage(t *testing.T) {
	f := newFleet(t, nil)
	f.pull("scout")
	var want []string
	for i := range 250 {
		o, err := f.r.SendDetached("lead", "scout", fmt.Sprintf("job %d", i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, o.Ticket)
	}
	var got []string
	cursor, pages := "", 0
	for {
		p, err := f.r.PollPage(context.Background(), "lead", 0, cursor, 0)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Tickets) > fleetstate.DefaultPollLimit {
			t.Fatalf("page of %d tickets; want at most %d", len(p.Tickets), fleetstate.DefaultPollLimit)
		}
		for _, o := range p.Tickets {
			got = append(got, o.Ticket)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if pages != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%d pages, %d tickets; want 3 pages of all 250 oldest first", pages, len(got))
	}
	if p, _ := f.r.PollPage(context.Background(), "lead", 0, "", 5000); len(p.Tickets) != 250 || p.Next != "" {
		t.Fatalf("a page with a huge limit: %d tickets, next %q", len(p.Tickets), p.Next)
	}
	if _, err := f.r.PollPage(context.Background(), "lead", 0, "not-a-cursor", 10); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
		t.Fatalf("bad cursor = %v; want %s", err, fleetstate.CodeInvalidArgument)
	}
}

// After a restart, the members that restored turns name but that were not
// added again are listed, and removing them ends their turns at once.
func TestRemoveRestoredMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, nil)
		f.pull("scout")
		f.pull("miner")
		open := f.working("scout", "task")
		queued, _ := f.r.SendDetached("lead", "scout", "next")
		f.r.SendDetached("lead", "miner", "keep")
		f.restart(nil, "miner")
		if got := f.r.Unregistered(); fmt.Sprint(got) != "[scout]" {
			t.Fatalf("Unregistered() = %v; want [scout]", got)
		}
		if err := f.r.RemoveMember("scout"); err != nil {
			t.Fatal(err)
		}
		for _, tk := range []string{open.Ticket, queued.Ticket} {
			if o := f.poll(tk); o.Reason != fleetstate.ReasonMemberRemoved {
				t.Fatalf("ticket %s = %+v; want failed, member_removed at once", tk, o)
			}
		}
		if got := f.r.Unregistered(); len(got) != 0 {
			t.Fatalf("Unregistered() after the removal = %v", got)
		}
	})
}

// A reply or question bound to a turn never lands on another.
func TestReplyTurnIsBoundToItsTurn(t *testing.T) {
	f := newFleet(t, nil)
	f.pull("scout")
	f.r.SendDetached("lead", "scout", "task 1")
	two, _ := f.r.SendDetached("lead", "scout", "task 2")
	first := f.next("scout")
	second := f.next("scout") // ends the first turn: a member asking for work is done with the old
	if err := f.r.ReplyTurn("scout", first.TurnID, "X = 42"); !errors.Is(err, fleetstate.ErrNoOpenTurn) {
		t.Fatalf("reply bound to an ended turn = %v; want %s", err, fleetstate.CodeNoOpenTurn)
	}
	if _, _, err := f.r.AskTurn(context.Background(), "scout", first.TurnID, "q?", "d"); !errors.Is(err, fleetstate.ErrNoOpenTurn) {
		t.Fatalf("ask bound to an ended turn = %v; want %s", err, fleetstate.CodeNoOpenTurn)
	}
	if err := f.r.ReplyTurn("scout", second.TurnID, "Y = 7"); err != nil {
		t.Fatal(err)
	}
	if o := f.poll(two.Ticket); o.Content != "Y = 7" {
		t.Fatalf("task 2 = %+v; want Y = 7", o)
	}
}

// With HoldReturned, an outcome a call returned is not released by the
// lead's next call, only by an ack or the end of the hold.
func TestHoldReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, &fleetstate.RendezvousOptions{HoldReturned: time.Minute})
		f.pull("scout")
		sent := async(func() (fleetstate.Outcome, error) {
			return f.r.Send(context.Background(), "lead", "scout", "task")
		})
		f.next("scout")
		f.r.Reply("scout", "done")
		res := <-sent
		f.r.SendDetached("lead", "scout", "another call of the lead")
		if o := f.poll(res.o.Ticket); o.Content != "done" {
			t.Fatalf("held outcome after the lead's next call = %+v; want it kept", o)
		}
		settle(time.Minute)
		if _, err := f.r.Poll(context.Background(), "lead", res.o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
			t.Fatalf("held outcome after the hold = %v; want %s", err, fleetstate.CodeUnknownTicket)
		}
	})
}

// A session lock that another process holds past the lock timeout (a
// process stopped while holding it) makes Open and NewSession fail with a
// named error instead of waiting for ever; once it is let go, they work.
func TestSessionLockWaitIsBounded(t *testing.T) {
	fileOnly(t, "the session lock file of a state directory")
	dir := filepath.Join(t.TempDir(), "state")
	opts := &fleetstate.Options{NoGitIgnore: true, LockTimeout: 50 * time.Millisecond}
	st := open(t, afero.NewOsFs(), dir, opts)
	f, err := os.OpenFile(filepath.Join(dir, ".fleetstate", "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := st.NewSession("blocked"); !errors.Is(err, fleetstate.ErrInternal) {
		t.Fatalf("NewSession under a held lock = %v; want %s", err, fleetstate.CodeInternal)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("NewSession waited %v; want about the lock timeout", d)
	}
	if _, err := st.CurrentSession(); !errors.Is(err, fleetstate.ErrNoActiveSession) {
		t.Fatalf("a refused NewSession changed the session: %v", err)
	}
	f.Close() // lets the lock go
	if _, err := st.NewSession("free"); err != nil {
		t.Fatalf("NewSession once the lock is free: %v", err)
	}
}

// gatedFS holds appends to the rendezvous's slot files while its gate is
// shut, as a slow disk would.
type gatedFS struct {
	afero.Fs
	mu      sync.Mutex
	gate    chan struct{} // nil: open; otherwise writes wait for it to close
	waiting chan struct{} // closed when a write first waits at the gate
}

func (g *gatedFS) shut() (gate, waiting chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.waiting = make(chan struct{}), make(chan struct{})
	return g.gate, g.waiting
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	g.mu.Lock()
	gate, waiting := g.gate, g.waiting
	if gate != nil && flag&os.O_APPEND != 0 && strings.Contains(name, "turns") {
		select {
		case <-waiting:
		default:
			close(waiting)
		}
	} else {
		gate = nil
	}
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.Fs.OpenFile(name, flag, perm)
}

// While a write of the journal waits on a slow disk, polls and member
// lists are answered: the rendezvous's lock is not held across the write.
func TestSlowDiskDoesNotBlockReaders(t *testing.T) {
	fileOnly(t, "a slow disk under the journal's slot files")
	g := &gatedFS{Fs: afero.NewMemMapFs()}
	st := open(t, g, "/state", nil)
	r, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	o, _ := r.SendDetached("lead", "scout", "task")
	if _, ok, err := r.Next(context.Background(), "scout", time.Second); !ok || err != nil {
		t.Fatalf("Next = %v, %v", ok, err)
	}
	gate, waiting := g.shut()
	replied := make(chan error, 1)
	go func() { replied <- r.Reply("scout", "done") }()
	<-waiting // the reply's write is at the slow disk
	read := make(chan struct{})
	go func() {
		defer close(read)
		r.Members()
		if p, err := r.Poll(context.Background(), "lead", o.Ticket, 0); err != nil || p.State != fleetstate.TicketWorking {
			t.Errorf("Poll during the slow write = %+v, %v; want the turn still working", p, err)
		}
		r.PollAll(context.Background(), "lead", 0)
	}()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		close(gate) // let the write go, so that the test ends
		t.Fatal("polls blocked behind a write to a slow disk")
	}
	select {
	case err := <-replied:
		t.Fatalf("Reply returned before its write did: %v", err)
	default:
	}
	close(gate)
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	if p, _ := r.Poll(context.Background(), "lead", o.Ticket, 0); p.Content != "done" {
		t.Fatalf("ticket after the write = %+v", p)
	}
}

// A brief and a reply far larger than a message of a replicated log (NATS
// carries at most 1 MiB by default) are kept whole: queued, across a
// restart, delivered, replied to, and held across another restart.
func TestLargeBriefAndReplySurviveRestarts(t *testing.T) {
	f := newFleet(t, nil)
	f.pull("scout")
	brief := largeText("brief", 3<<20)
	o, err := f.r.SendDetached("lead", "scout", brief)
	if err != nil {
		t.Fatalf("SendDetached of %d bytes: %v", len(brief), err)
	}
	f.restart(nil, "scout")
	if err := f.r.SetReady("scout", true); err != nil {
		t.Fatal(err)
	}
	if msg := f.next("scout"); msg.Content != brief {
		t.Fatalf("member got %d bytes after a restart; want the %d-byte brief whole", len(msg.Content), len(brief))
	}
	reply := largeText("reply", 2<<20+17)
	if err := f.r.Reply("scout", reply); err != nil {
		t.Fatalf("Reply of %d bytes: %v", len(reply), err)
	}
	f.restart(nil, "scout")
	if got := f.poll(o.Ticket); got.Kind != fleetstate.OutcomeReply || got.Content != reply {
		t.Fatalf("ticket after a restart = %s with %d bytes; want the %d-byte reply", got.Kind, len(got.Content), len(reply))
	}
	if err := f.r.Ack("lead", o.Ticket); err != nil {
		t.Fatal(err)
	}
	f.restart(nil, "scout")
	if _, err := f.r.Poll(context.Background(), "lead", o.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Fatalf("Poll of an acked ticket after a restart: %v; want %s", err, fleetstate.CodeUnknownTicket)
	}
}

// largeText is n bytes of varied text (lines numbered, so that a chunk
// lost, repeated or out of order shows).
func largeText(what string, n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s line %d: \"quoted\" <tag> & tab\t é\n", what, i)
	}
	return b.String()[:n]
}
