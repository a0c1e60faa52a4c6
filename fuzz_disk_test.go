package fleetstate_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// Fuzz targets for the parsers of what the store and the rendezvous read
// back: status names, current_run.txt, and the turn records the rendezvous
// restores at start. Any of those may be damaged or written by someone
// else; none may crash the process or let a bad value through. The seed
// corpora are in testdata/fuzz.

func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"idle", "WORKING", "Blocked", "unknown", "", "idle\x00", "İDLE", "ıdle"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := fleetstate.ParseStatus(s)
		if err != nil {
			wantCode(t, err, fleetstate.CodeInvalidArgument)
			if st != fleetstate.StatusUnknown {
				t.Fatalf("ParseStatus(%q) = %v with an error", s, st)
			}
			return
		}
		if !strings.EqualFold(st.String(), s) || len(s) != len(st.String()) {
			t.Fatalf("ParseStatus(%q) = %v", s, st)
		}
	})
}

// FuzzSessionFile: whatever current_run.txt holds, the current session is
// a canonical UUID with a name, or there is none; a put goes into that
// session's folder or fails cleanly.
func FuzzSessionFile(f *testing.F) {
	f.Add([]byte(fuzzSession + ":::name\n"))
	f.Add([]byte(fuzzSession + ":::"))
	f.Add([]byte("../../etc:::x"))
	f.Add([]byte(strings.ToUpper(fuzzSession) + ":::x"))
	f.Add([]byte(fuzzSession + "/../..:::x"))
	f.Add([]byte(":::"))
	f.Add([]byte(fuzzSession + ":::a:::b\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := afero.NewMemMapFs()
		st := open(t, fsys, "/state", nil)
		if err := afero.WriteFile(fsys, "/state/current_run.txt", data, 0o600); err != nil {
			t.Fatal(err)
		}
		sess, err := st.CurrentSession()
		if err != nil {
			wantErr(t, st, err, fleetstate.CodeNoActiveSession)
			_, err := st.Put("scout", "f", []byte("x"), false)
			wantErr(t, st, err, fleetstate.CodeNoActiveSession)
			return
		}
		if !isLowerUUID(sess.ID) {
			t.Fatalf("current session %q from %q", sess.ID, data)
		}
		id, err := st.Put("scout", "f", []byte("x"), false)
		if err != nil {
			t.Fatalf("Put in session %q: %v", sess.ID, err)
		}
		if !exists(t, fsys, filepath.Join("/state", sess.ID, "scout", "f")) || id.Session() != sess.ID {
			t.Fatalf("Put went to %v, not to /state/%s", id, sess.ID)
		}
	})
}

// FuzzRestoreTurns writes a damaged or forged turn record where the
// rendezvous keeps them and starts a rendezvous on it: it starts, and what
// it restored behaves: polls, deliveries and acks work or fail with a
// code, and nothing is delivered twice.
func FuzzRestoreTurns(f *testing.F) {
	f.Add("slot-x.jsonl", []byte("\n"+`{"id":"turn-1","ticket":"ticket-1","lead":"lead","member":"scout","brief":"b","seq":1,"state":"queued"}`))
	f.Add("slot-x.jsonl", []byte("\n"+`{"id":"turn-1","ticket":"ticket-1","lead":"lead","member":"scout","brief":"b","seq":1,"state":"done","held":{"outcome":"reply","content":"r"}}`+"\n{}"))
	f.Add("turn-1.json", []byte(`{"id":"turn-1","ticket":"ticket-1","lead":"lead","member":"../x","brief":"b","seq":-5,"state":"question","question":"q"}`))
	f.Add("slot-y.jsonl", []byte("\n"+`{"id":"turn-2","ticket":"ticket-2","lead":"","member":"","state":"working"}`+"\n"+`{"id":"turn-2","tick`))
	f.Add("slot-z.jsonl", []byte("\n"+`{"id":"turn-3","ticket":"ticket-3","lead":"lead","member":"scout","state":"bogus","held":null}`))
	f.Add("slot-w.jsonl", []byte("\n"+`{"id":"turn-4","ticket":"ticket-4","lead":"lead","member":"scout","state":"done"}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if name == "" || strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." || !utf8.ValidString(name) {
			name = "slot-fuzz.jsonl"
		}
		fsys := afero.NewMemMapFs()
		st := open(t, fsys, "/state", nil)
		dir := "/state/.fleetstate/rendezvous/turns"
		if err := fsys.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(fsys, filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := fleetstate.NewRendezvous(st, nil)
		if err != nil {
			wantErr(t, st, err, fleetstate.CodeInternal)
			return
		}
		defer r.Close()
		ctx := context.Background()
		_ = r.AddMember("scout", nil)
		all, err := r.PollAll(ctx, "lead", 0)
		if err != nil {
			t.Fatalf("PollAll: %v", err)
		}
		for _, o := range all {
			if o.Ticket == "" {
				t.Fatalf("restored outcome without a ticket: %+v", o)
			}
			if _, err := r.Poll(ctx, "lead", o.Ticket, 0); err != nil {
				t.Fatalf("Poll(%s) of a listed ticket: %v", o.Ticket, err)
			}
			if err := r.Ack("lead", o.Ticket); err != nil {
				wantCode(t, err, fleetstate.CodeTicketOpen)
			}
			if o.State != fleetstate.TicketQueued && o.State != fleetstate.TicketWorking &&
				o.State != fleetstate.TicketQuestion && o.State != fleetstate.TicketDone {
				t.Fatalf("restored ticket in state %q", o.State)
			}
		}
		seen := map[string]bool{}
		for {
			msg, ok, err := r.Next(ctx, "scout", 0)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if !ok {
				break
			}
			if seen[msg.TurnID] {
				t.Fatalf("turn %s delivered twice", msg.TurnID)
			}
			seen[msg.TurnID] = true
			if err := r.Reply("scout", "done"); err != nil {
				t.Fatalf("Reply: %v", err)
			}
		}
		if _, err := r.SendDetached("lead", "scout", "after"); err != nil {
			t.Fatalf("SendDetached after the restore: %v", err)
		}
	})
}
