package fleetstatetest

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
)

// A JournalFleet is one fleet of a backend of [fleetstate.Journal], fresh
// for each test of [TestJournal].
type JournalFleet interface {
	// Own takes the fleet's ownership, as a process does when it opens
	// a rendezvous, and returns the journal that holds it. While another
	// journal holds it, Own fails with [fleetstate.ErrFleetOwned].
	Own(t TB) (fleetstate.Journal, error)
	// Expire ends the ownership of j as the backend ends that of a
	// process that stopped renewing it (a lease running out), without
	// telling j: another Own may then succeed, and j must be fenced out.
	// It reports false when the backend has no ownership that ends from
	// outside; the suite then skips its test of fencing.
	Expire(t TB, j fleetstate.Journal) bool
}

// TestJournal runs the contract of a [fleetstate.Journal] on fleets from
// newFleet, one per test: Load returns the last record saved or held of
// each turn not released since, whatever its characters and size;
// Release forgets a turn (by the next Flush) and Reset every turn; Close hands the records over to the next
// owner; one journal owns a fleet at a time, and one whose ownership
// passed to another fails every later write, Save with
// [fleetstate.CodeUnavailable], and changes nothing the new owner sees.
//
// The journals are closed when the test ends.
func TestJournal(t *testing.T, newFleet func(t *testing.T) JournalFleet) {
	for _, tc := range journalSuite {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, newFleet(t)) })
	}
}

var journalSuite = []struct {
	name string
	test func(t *testing.T, f JournalFleet)
}{
	{"LoadEmpty", testJournalLoadEmpty},
	{"LastRecordPerTurn", testJournalLastRecordPerTurn},
	{"ReleaseForgets", testJournalReleaseForgets},
	{"HoldKeepsTheRecord", testJournalHold},
	{"ResetForgetsAll", testJournalResetForgetsAll},
	{"OpaqueRecords", testJournalOpaqueRecords},
	{"CloseHandsOver", testJournalCloseHandsOver},
	{"OneOwner", testJournalOneOwner},
	{"FencedAfterOwnershipLoss", testJournalFenced},
}

// owned is a journal of a test, closed when the test ends unless the
// test closed it.
type owned struct {
	fleetstate.Journal
	closed bool
}

// own takes f's ownership, failing t if it cannot.
func own(t *testing.T, f JournalFleet) *owned {
	t.Helper()
	j, err := f.Own(t)
	if err != nil {
		t.Fatalf("Own: %v", err)
	}
	o := &owned{Journal: j}
	t.Cleanup(func() {
		if !o.closed {
			o.Journal.Close()
		}
	})
	return o
}

// close closes o, handing the fleet over.
func (o *owned) close(t *testing.T) {
	t.Helper()
	o.closed = true
	if err := o.Journal.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// jctx is the context of one call of a test to a journal.
func jctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// record returns the record of turn id carrying v, as the rendezvous
// writes records: a JSON object whose "id" is the turn's ID.
func record(id, v string) []byte {
	rec, err := json.Marshal(struct {
		ID string `json:"id"`
		V  string `json:"v"`
	}{id, v})
	if err != nil {
		panic(err)
	}
	return rec
}

// valueOf returns what a record carries.
func valueOf(t *testing.T, rec []byte) string {
	t.Helper()
	var r struct {
		V string `json:"v"`
	}
	if err := json.Unmarshal(rec, &r); err != nil {
		t.Fatalf("a record read back is not the one written: %q: %v", clip(string(rec)), err)
	}
	return r.V
}

func save(t *testing.T, j fleetstate.Journal, id, v string) {
	t.Helper()
	if err := j.Save(jctx(t), id, record(id, v)); err != nil {
		t.Fatalf("Save(%s, %q): %v", id, clip(v), err)
	}
}

// saveEach saves each of vs as the record of the turn of the same index
// in ids.
func saveEach(t *testing.T, j fleetstate.Journal, ids []string, vs ...string) {
	t.Helper()
	for i, v := range vs {
		save(t, j, ids[i], v)
	}
}

// release releases turn id, and flushes: a journal may put the release
// off until then.
func release(t *testing.T, j fleetstate.Journal, id string) {
	t.Helper()
	if err := j.Release(jctx(t), id); err != nil {
		t.Fatalf("Release(%s): %v", id, err)
	}
	flush(t, j)
}

func flush(t *testing.T, j fleetstate.Journal) {
	t.Helper()
	if err := j.Flush(jctx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func hold(t *testing.T, j fleetstate.Journal, id, v string, saved bool) {
	t.Helper()
	if err := j.Hold(jctx(t), id, record(id, v), saved); err != nil {
		t.Fatalf("Hold(%s, %q): %v", id, clip(v), err)
	}
}

// wantRecords fails t unless Load of j returns exactly want, in any order.
func wantRecords(t *testing.T, j fleetstate.Journal, want ...string) {
	t.Helper()
	recs, err := j.Load(jctx(t))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got := make([]string, len(recs))
	for i, r := range recs {
		got[i] = valueOf(t, r)
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Load = %q; want %q", clipAll(got), clipAll(want))
	}
}

func clipAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clip(s)
	}
	return out
}

// turnIDs returns n turn IDs, as the rendezvous makes them.
func turnIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	return ids
}

func testJournalLoadEmpty(t *testing.T, f JournalFleet) {
	wantRecords(t, own(t, f))
}

func testJournalLastRecordPerTurn(t *testing.T, f JournalFleet) {
	j := own(t, f)
	id := turnIDs(3)
	saveEach(t, j, id, "a queued", "b queued")
	save(t, j, id[0], "a delivered")
	wantRecords(t, j, "a delivered", "b queued")
	save(t, j, id[0], "a replied")
	save(t, j, id[2], "c queued")
	save(t, j, id[1], "b delivered")
	wantRecords(t, j, "a replied", "b delivered", "c queued")
}

func testJournalReleaseForgets(t *testing.T, f JournalFleet) {
	j := own(t, f)
	id := turnIDs(3)
	saveEach(t, j, id, "a", "b", "c")
	release(t, j, id[1])
	wantRecords(t, j, "a", "c")
	release(t, j, id[0])
	release(t, j, id[2])
	wantRecords(t, j)
	// A turn released and saved again is a turn like any other.
	save(t, j, id[1], "b again")
	wantRecords(t, j, "b again")
}

func testJournalResetForgetsAll(t *testing.T, f JournalFleet) {
	j := own(t, f)
	if err := j.Reset(jctx(t)); err != nil {
		t.Fatalf("Reset of an empty journal: %v", err)
	}
	id := turnIDs(4)
	saveEach(t, j, id, "a", "b", "c")
	release(t, j, id[1])
	if err := j.Reset(jctx(t)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	wantRecords(t, j)
	save(t, j, id[3], "d after the reset")
	wantRecords(t, j, "d after the reset")
}

// A record is bytes: any byte, and sizes past what one message of a
// replicated engine holds (1 MiB by default in NATS), kept whole.
func testJournalOpaqueRecords(t *testing.T, f JournalFleet) {
	j := own(t, f)
	var binary []rune
	for r := range rune(512) {
		binary = append(binary, r)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), (2<<20)/16+1)
	id := turnIDs(3)
	saveEach(t, j, id, string(binary), string(big), "small, then big")
	wantRecords(t, j, string(binary), string(big), "small, then big")
	save(t, j, id[1], "big, then small")
	save(t, j, id[2], string(big[1:]))
	wantRecords(t, j, string(binary), "big, then small", string(big[1:]))
	release(t, j, id[2])
	wantRecords(t, j, string(binary), "big, then small")
}

func testJournalCloseHandsOver(t *testing.T, f JournalFleet) {
	j := own(t, f)
	id := turnIDs(3)
	save(t, j, id[0], "a")
	save(t, j, id[0], "a, last")
	save(t, j, id[1], "b")
	save(t, j, id[2], "c")
	release(t, j, id[1])
	j.close(t)
	next := own(t, f)
	wantRecords(t, next, "a, last", "c")
	// The next owner writes, and hands over, in turn.
	save(t, next, id[2], "c, by the next owner")
	next.close(t)
	wantRecords(t, own(t, f), "a, last", "c, by the next owner")
}

func testJournalOneOwner(t *testing.T, f JournalFleet) {
	j := own(t, f)
	save(t, j, turnIDs(1)[0], "a")
	second, err := f.Own(t)
	if err == nil {
		second.Close()
		t.Fatalf("a second Own of an owned fleet succeeded; want %s", fleetstate.CodeFleetOwned)
	}
	if fleetstate.CodeOf(err) != fleetstate.CodeFleetOwned {
		t.Fatalf("a second Own of an owned fleet: %v; want %s", err, fleetstate.CodeFleetOwned)
	}
	wantRecords(t, j, "a")
	j.close(t)
	wantRecords(t, own(t, f), "a")
}

// A journal whose ownership passed to another without its knowing fails
// every later write, and none of them changes what the new owner sees.
func testJournalFenced(t *testing.T, f JournalFleet) {
	old := own(t, f)
	id := turnIDs(3)
	saveEach(t, old, id, "a", "b")
	if !f.Expire(t, old.Journal) {
		t.Skip("the backend's ownership does not end from outside")
	}
	next := own(t, f)
	wantRecords(t, next, "a", "b")
	save(t, next, id[0], "a, by the next owner")

	err := old.Save(jctx(t), id[2], record(id[2], "c, by the old owner"))
	if fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("Save after the ownership passed: %v; want %s", err, fleetstate.CodeUnavailable)
	}
	if err := old.Save(jctx(t), id[1], record(id[1], "b, by the old owner")); err == nil {
		t.Fatalf("Save of a turn after the ownership passed succeeded; want it fenced out")
	}
	// Release may not wait to hear that it was refused; Reset is a
	// write like any other. Neither may change anything.
	_ = old.Release(jctx(t), id[1])
	_ = old.Flush(jctx(t))
	if err := old.Reset(jctx(t)); err == nil {
		t.Errorf("Reset after the ownership passed succeeded; want it fenced out")
	}
	wantRecords(t, next, "a, by the next owner", "b")
	next.close(t)
	wantRecords(t, own(t, f), "a, by the next owner", "b")
}

// A held record is a record like any other to Load, after the Flush that
// may write it; one held as saved keeps the record saved; a release
// forgets it.
func testJournalHold(t *testing.T, f JournalFleet) {
	j := own(t, f)
	id := turnIDs(3)
	saveEach(t, j, id, "a replied", "b replied, held until then", "c queued")
	hold(t, j, id[0], "a replied, held until then", false)
	hold(t, j, id[1], "b replied, held until then", true)
	flush(t, j)
	wantRecords(t, j, "a replied, held until then", "b replied, held until then", "c queued")
	// Seen again by a re-poll: saved once more, then held again.
	save(t, j, id[0], "a replied, polled again")
	wantRecords(t, j, "a replied, polled again", "b replied, held until then", "c queued")
	release(t, j, id[1])
	wantRecords(t, j, "a replied, polled again", "c queued")
	j.close(t)
	wantRecords(t, own(t, f), "a replied, polled again", "c queued")
}
