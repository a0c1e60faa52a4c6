package fleetstate_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// journalFleet is a store on fsys with a session, and a way to open a
// rendezvous on it with one pull member, scout, as after a restart.
func journalFleet(t *testing.T, fsys afero.Fs, dir string) (turns string, open func() *fleetstate.Rendezvous) {
	t.Helper()
	st, err := fleetstate.Open(fsys, dir, &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.NewSession("journal"); err != nil {
		t.Fatal(err)
	}
	var cur *fleetstate.Rendezvous
	open = func() *fleetstate.Rendezvous {
		t.Helper()
		if cur != nil {
			fleetstate.Crash(cur) // as a process killed before the next one starts
		}
		st, err := fleetstate.Open(fsys, dir, &fleetstate.Options{NoGitIgnore: true})
		if err != nil {
			t.Fatal(err)
		}
		rv, err := fleetstate.NewRendezvous(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rv.Close() })
		if err := rv.AddMember("scout", nil); err != nil {
			t.Fatal(err)
		}
		cur = rv
		return rv
	}
	return filepath.Join(st.Dir(), ".fleetstate", "rendezvous", "turns"), open
}

func journalFiles(t *testing.T, fsys afero.Fs, turns string) []string {
	t.Helper()
	names, err := afero.Glob(fsys, filepath.Join(turns, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func journalNext(t *testing.T, rv *fleetstate.Rendezvous) fleetstate.Message {
	t.Helper()
	msg, ok, err := rv.Next(context.Background(), "scout", 0)
	if err != nil || !ok {
		t.Fatalf("Next = %+v, %v, %v; want a message", msg, ok, err)
	}
	return msg
}

// A record cut short by a crash in the middle of an append is skipped: the
// turn is restored as it was before, and a later record still reads.
func TestJournalTornRecord(t *testing.T) {
	fsys := afero.NewMemMapFs()
	turns, open := journalFleet(t, fsys, "/state")
	rv := open()
	o, err := rv.SendDetached("lead", "scout", "once only")
	if err != nil {
		t.Fatal(err)
	}
	journalNext(t, rv)
	files := journalFiles(t, fsys, turns)
	if len(files) != 1 {
		t.Fatalf("turn files %v; want one slot", files)
	}
	f, err := fsys.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	torn := `{"id":"` + o.TurnID + `","ticket":"` + o.Ticket + `","state":"que`
	if _, err := f.Write([]byte("\n" + torn)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	rv2 := open()
	if p, err := rv2.Poll(context.Background(), "lead", o.Ticket, 0); err != nil || p.State != fleetstate.TicketWorking {
		t.Fatalf("ticket after a torn record = %+v, %v; want working", p, err)
	}
	if msg, ok, err := rv2.Next(context.Background(), "scout", 0); ok || err != nil {
		t.Fatalf("delivered again after a torn record: %+v, %v", msg, err)
	}
	// Next ended the open turn as turn_done; that record follows the torn
	// one and is what a third rendezvous reads.
	rv3 := open()
	if p, err := rv3.Poll(context.Background(), "lead", o.Ticket, 0); err != nil || p.Kind != fleetstate.OutcomeTurnDone {
		t.Fatalf("ticket after a record following a torn one = %+v, %v; want turn_done", p, err)
	}
}

// In the steady state a round trip reuses one slot file; Close removes the
// free slots, so that nothing is left once every outcome was collected.
func TestJournalSlotReuse(t *testing.T) {
	fsys, dir := afero.NewOsFs(), filepath.Join(t.TempDir(), "state")
	turns, open := journalFleet(t, fsys, dir)
	rv := open()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, ok, err := rv.Next(ctx, "scout", time.Minute); err != nil {
				return
			} else if ok {
				if err := rv.Reply("scout", "done"); err != nil {
					panic(err)
				}
			}
		}
	}()
	var last fleetstate.Outcome
	for i := range 5 {
		o, err := rv.Send(ctx, "lead", "scout", "round trip")
		if err != nil || o.Kind != fleetstate.OutcomeReply {
			t.Fatalf("Send %d = %+v, %v; want a reply", i, o, err)
		}
		if files := journalFiles(t, fsys, turns); len(files) != 1 {
			t.Fatalf("turn files after %d round trips: %v; want one slot", i+1, files)
		}
		last = o
	}
	// The last outcome stays held until the lead's next call; the ack is
	// that call.
	if err := rv.Ack("lead", last.Ticket); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	rv.Close()
	if files := journalFiles(t, fsys, turns); len(files) != 0 {
		t.Fatalf("turn files after Close: %v; want none", files)
	}
	// The next rendezvous has nothing to restore.
	if all, err := open().PollAll(context.Background(), "lead", 0); err != nil || len(all) != 0 {
		t.Fatalf("tickets after a restart = %+v, %v; want none", all, err)
	}
}

// A record written by a version before slots (one file TURN_ID.json
// holding one record) is restored, delivered once, and removed when its
// turn is over rather than reused.
func TestJournalLegacyRecord(t *testing.T) {
	fsys := afero.NewMemMapFs()
	turns, open := journalFleet(t, fsys, "/state")
	rec := map[string]any{
		"id": "turn-0b4f6c1e-9a43-4f7e-8d2a-5c1b2e3f4a5b", "ticket": "ticket-1d9e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6",
		"lead": "lead", "member": "scout", "brief": "from before", "seq": 1,
		"created": time.Now().UTC(), "state": "queued",
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll(turns, 0o700); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(turns, rec["id"].(string)+".json")
	if err := afero.WriteFile(fsys, legacy, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rv := open()
	if msg := journalNext(t, rv); msg.Content != "from before" {
		t.Fatalf("Next = %+v; want the legacy message", msg)
	}
	if err := rv.Reply("scout", "answered"); err != nil {
		t.Fatal(err)
	}
	if p, err := open().Poll(context.Background(), "lead", rec["ticket"].(string), 0); err != nil || p.Content != "answered" {
		t.Fatalf("held reply after a restart = %+v, %v", p, err)
	}
	if err := rv.Ack("lead", rec["ticket"].(string)); err != nil {
		t.Fatal(err)
	}
	if files := journalFiles(t, fsys, turns); len(files) != 0 {
		t.Fatalf("turn files after the legacy turn was acked: %v; want none", files)
	}
}

// A turn whose records outgrow a slot has it rewritten whole, and every
// state still reads back after a restart.
func TestJournalLargeTurn(t *testing.T) {
	fsys := afero.NewMemMapFs()
	turns, open := journalFleet(t, fsys, "/state")
	rv := open()
	brief := strings.Repeat("a long brief. ", 10_000) // 140 KB: past a slot's size at once
	o, err := rv.SendDetached("lead", "scout", brief)
	if err != nil {
		t.Fatal(err)
	}
	if msg := journalNext(t, rv); msg.Content != brief {
		t.Fatalf("Next brought %d bytes; want %d", len(msg.Content), len(brief))
	}
	rv = open()
	if p, err := rv.Poll(context.Background(), "lead", o.Ticket, 0); err != nil || p.State != fleetstate.TicketWorking {
		t.Fatalf("after a restart = %+v, %v; want working", p.State, err)
	}
	if err := rv.Reply("scout", "short"); err != nil {
		t.Fatal(err)
	}
	rv = open()
	if p, err := rv.Poll(context.Background(), "lead", o.Ticket, 0); err != nil || p.Content != "short" {
		t.Fatalf("held reply after a restart = %+v, %v", p.Content, err)
	}
	if err := rv.Ack("lead", o.Ticket); err != nil {
		t.Fatal(err)
	}
	if files := journalFiles(t, fsys, turns); len(files) != 0 {
		t.Fatalf("turn files after a large turn was acked: %v; want none (too large to reuse)", files)
	}
}

// Free slots left by a rendezvous that died are swept by the next one once
// they are old; recent ones may belong to a live rendezvous and stay.
func TestJournalSweepsOldFreeSlots(t *testing.T) {
	fsys := afero.NewMemMapFs()
	turns, open := journalFleet(t, fsys, "/state")
	if err := fsys.MkdirAll(turns, 0o700); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(turns, "slot-old.jsonl")
	recent := filepath.Join(turns, "slot-recent.jsonl")
	torn := filepath.Join(turns, "slot-torn.jsonl")
	for _, p := range []string{old, recent, torn} {
		content := "\n{\"id\":\"turn-x\",\"ticket\":\"ticket-x\",\"state\":\"done\"}\n{}"
		if p == torn {
			content = "\n{\"id\":\"turn-y\",\"tic"
		}
		if err := afero.WriteFile(fsys, p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-time.Hour)
	for _, p := range []string{old, torn} {
		if err := fsys.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}
	open()
	files := journalFiles(t, fsys, turns)
	if len(files) != 1 || files[0] != recent {
		t.Fatalf("turn files after a restart: %v; want only %s", files, recent)
	}
}
