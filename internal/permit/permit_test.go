package permit

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	req := Request{ID: "perm-1", Member: "bob", Key: "k", Tool: "Bash", Input: `{"command":"ls"}`,
		Cwd: "/w", Asked: now, Deadline: now.Add(time.Minute),
		Decision: &Decision{Behavior: Deny, Message: "no", By: "operator", Time: now}}
	rec, err := Encode(&req)
	if err != nil {
		t.Fatal(err)
	}
	got, isReq, valid := Decode(rec)
	if !isReq || !valid {
		t.Fatalf("Decode(%s) = %v, %v; want a valid request", rec, isReq, valid)
	}
	if got.ID != req.ID || got.Member != req.Member || got.Key != req.Key || got.Tool != req.Tool ||
		got.Input != req.Input || !got.Deadline.Equal(req.Deadline) || got.Decision == nil || *got.Decision != *req.Decision {
		t.Errorf("round trip: got %+v, want %+v", got, req)
	}
}

func TestDecodeTellsKindsApart(t *testing.T) {
	for _, c := range []struct {
		data         string
		isReq, valid bool
	}{
		{`{"id":"t1","ticket":"x","state":"queued"}`, false, false}, // a turn's record
		{`not json`, false, false},
		{`{"kind":"permission","id":"p","member":"bob"}`, true, false}, // no tool
		{`{"kind":"permission","id":"p","tool":"Bash"}`, true, false},  // no member
		{`{"kind":"permission","id":"p","member":"bob","tool":"Bash","asked":3}`, true, false},
		{`{"kind":"permission","id":"p","member":"bob","tool":"Bash"}`, true, true},
	} {
		_, isReq, valid := Decode([]byte(c.data))
		if isReq != c.isReq || valid != c.valid {
			t.Errorf("Decode(%s) = %v, %v; want %v, %v", c.data, isReq, valid, c.isReq, c.valid)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"permission","id":"p","member":"bob","tool":"Bash"}`))
	f.Add([]byte(`{"id":"t"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, isReq, valid := Decode(data)
		if valid && (!isReq || req.ID == "" || req.Tool == "" || req.Member == "") {
			t.Fatalf("Decode(%q) = %+v valid without an ID, tool or member", data, req)
		}
		if !valid {
			return
		}
		rec, err := Encode(&req)
		if err != nil {
			t.Fatal(err)
		}
		again, _, ok := Decode(rec)
		if !ok || again.ID != req.ID || again.Tool != req.Tool || again.Member != req.Member {
			t.Fatalf("re-encoded %q decodes to %+v, %v", rec, again, ok)
		}
	})
}

func TestDeskKnowsARequestUntilItsDeadline(t *testing.T) {
	var d Desk
	fired := make(chan struct{})
	now := time.Now()
	e := NewEntry(Request{ID: "p1", Member: "bob", Key: "k", Tool: "Bash", Asked: now, Deadline: now.Add(time.Millisecond)})
	d.Add(e, func() { close(fired) })
	if d.Get("p1") != e || d.ByKey("bob", "k") != e || d.ByKey("amy", "k") != nil || d.ByKey("bob", "") != nil {
		t.Fatal("the desk does not find the request it was given")
	}
	if n := d.PendingOf("bob"); n != 1 {
		t.Fatalf("PendingOf(bob) = %d, want 1", n)
	}
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the deadline did not fire")
	}
	if !d.Holds(e) {
		t.Fatal("the desk forgot the request before End")
	}
	if !d.End(e) {
		t.Fatal("End of a pending request did not report it undecided")
	}
	select {
	case <-e.Done:
	default:
		t.Fatal("Done is open after End")
	}
	if d.Get("p1") != nil || d.ByKey("bob", "k") != nil || d.Holds(e) || d.Pending() != nil {
		t.Fatal("the desk still knows an ended request")
	}
}

func TestDeskPendingOldestFirstAndDecided(t *testing.T) {
	var d Desk
	now := time.Now()
	var es []*Entry
	for i, id := range []string{"c", "a", "b"} {
		e := NewEntry(Request{ID: id, Member: "bob", Tool: "T", Asked: now.Add(time.Duration(2-i) * time.Second), Deadline: now.Add(time.Hour)})
		d.Add(e, func() {})
		es = append(es, e)
	}
	defer d.Stop()
	got := d.Pending()
	if len(got) != 3 || got[0].ID != "b" || got[1].ID != "a" || got[2].ID != "c" {
		t.Fatalf("Pending() = %v, want b, a, c", got)
	}
	if old := d.Decide(es[0], Decision{Behavior: Allow, By: "operator"}); old != "" {
		t.Fatalf("Decide forgot %s; want none forgotten", old)
	}
	if es[0].Pending() || d.PendingOf("bob") != 2 || len(d.Pending()) != 2 {
		t.Fatal("a decided request still counts as pending")
	}
	if d.End(es[0]) {
		t.Fatal("End of a decided request reported it undecided")
	}
	var cleaned []string
	d.Clean(func(e *Entry) { cleaned = append(cleaned, e.ID) })
	if len(cleaned) != 2 || d.Get("a") != nil || d.Get("b") != nil {
		t.Fatalf("Clean ended %v and left %v", cleaned, d.Pending())
	}
}

// A decided request is kept without its input, and a member's decided
// requests are bounded: past MaxDecided the oldest decided is forgotten,
// and returned so that its record is released.
func TestDeskDecidedBounded(t *testing.T) {
	var d Desk
	defer d.Stop()
	now := time.Now()
	input := `{"command":"` + strings.Repeat("x", 1<<10) + `"}`
	var forgotten []string
	for i := range MaxDecided + 5 {
		e := NewEntry(Request{ID: fmt.Sprint("p", i), Member: "bob", Key: fmt.Sprint("k", i), Tool: "Bash", Input: input, Cwd: "/src",
			Asked: now, Deadline: now.Add(time.Hour)})
		if old := d.Add(e, func() {}); old != "" {
			t.Fatalf("Add of a pending request forgot %s", old)
		}
		if old := d.Decide(e, Decision{Behavior: Deny, Message: "no", By: "operator"}); old != "" {
			forgotten = append(forgotten, old)
		}
		if e.Input != "" || e.Cwd != "" || e.Key == "" || e.Decision == nil {
			t.Fatalf("decided request kept as %+v; want its key and decision, no input or cwd", e.Request)
		}
	}
	if want := []string{"p0", "p1", "p2", "p3", "p4"}; fmt.Sprint(forgotten) != fmt.Sprint(want) {
		t.Fatalf("forgotten %v; want %v", forgotten, want)
	}
	if d.Get("p4") != nil || d.ByKey("bob", "k4") != nil || d.ByKey("bob", "k5") == nil || len(d.byID) != MaxDecided {
		t.Fatalf("the desk knows %d requests (p4: %v, k5: %v); want the last %d decided", len(d.byID), d.Get("p4"), d.ByKey("bob", "k5"), MaxDecided)
	}
	// Another member's decided requests do not count against bob's.
	alice := NewEntry(Request{ID: "a0", Member: "alice", Tool: "Bash", Asked: now, Deadline: now.Add(time.Hour), Decision: &Decision{Behavior: Allow}})
	if old := d.Add(alice, func() {}); old != "" || d.Get("a0") == nil {
		t.Fatalf("Add of alice's decided request forgot %v", old)
	}
	// A decided request restored from a record is kept without its input.
	restored := NewEntry(Request{ID: "r", Member: "carol", Tool: "Bash", Input: input, Decision: &Decision{Behavior: Allow}})
	if restored.Input != "" {
		t.Fatal("a restored decided request kept its input")
	}
	// Ending a decided request takes it out of its member's count.
	if d.End(d.Get("p10")) || len(d.decided["bob"]) != MaxDecided-1 {
		t.Fatalf("bob has %d decided after an End; want %d", len(d.decided["bob"]), MaxDecided-1)
	}
}

func TestCheck(t *testing.T) {
	ok := Request{Tool: "Bash", Key: "k", Input: `{"command":"ls"}`, Timeout: time.Minute}
	if err := Check(&ok, time.Hour); err != nil {
		t.Fatalf("Check(%+v) = %v", ok, err)
	}
	for _, bad := range []Request{
		{},
		{Tool: strings.Repeat("t", MaxTool+1)},
		{Tool: "Bash", Key: strings.Repeat("k", MaxKey+1)},
		{Tool: "Bash", Input: "{"},
		{Tool: "Bash", Timeout: -time.Second},
		{Tool: "Bash", Timeout: 2 * time.Hour},
	} {
		if err := Check(&bad, time.Hour); err == nil {
			t.Errorf("Check passed %+v", bad)
		}
	}
}
