package events

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
)

// feedFleet returns a rendezvous with the member scout, closed at the
// test's end.
func feedFleet(t *testing.T) *fleetstate.Rendezvous {
	t.Helper()
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rv.Close() })
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	return rv
}

// caughtUp waits until f has read the events rv published.
func caughtUp(t *testing.T, f *feed, rv *fleetstate.Rendezvous) {
	t.Helper()
	seq := rv.Snapshot().Seq
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		at, ch := f.seq, f.changed
		f.mu.Unlock()
		if at >= seq {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the feed read up to %d; want %d", at, seq)
		}
	}
}

// Every stream shares one encoding of each event.
func TestFeedEncodesOnce(t *testing.T) {
	rv := feedFleet(t)
	f := newFeed(rv)
	const streams, events = 50, 10
	var ss []*stream
	for range streams {
		ss = append(ss, f.join(fleetstate.DefaultEventBuffer, DefaultBufferBytes))
	}
	caughtUp(t, f, rv)
	f.mu.Lock()
	before := f.encodes
	f.mu.Unlock()
	for range events {
		if _, err := rv.SendDetached("lead", "scout", strings.Repeat("<", 1<<10)); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp(t, f, rv)
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.encodes - before; got != events {
		t.Errorf("%d events to %d streams encoded %d times; want %d", events, streams, got, events)
	}
	for i, s := range ss {
		if len(s.queue) != events || s.queue[0] != ss[0].queue[0] {
			t.Fatalf("stream %d queued %d frames (first %p); want %d, the first shared with stream 0 (%p)", i, len(s.queue), s.queue[0], events, ss[0].queue[0])
		}
	}
	if data := ss[0].queue[0].data; bytes.Contains(data, []byte(`\u003c`)) || !bytes.Contains(data, []byte("<<<<")) {
		t.Errorf("frame %.80s…; want its \"<\" as one byte", data)
	}
}

// A stream that does not read holds at most its bound in bytes of
// clipped frames however large the events, and the next frame it sends
// after the bound counts the ones dropped.
func TestFeedStalledStreamBytesBounded(t *testing.T) {
	rv := feedFleet(t)
	f := newFeed(rv)
	const maxBytes, briefs, brief = 32 << 10, 40, 1 << 20
	s := f.join(fleetstate.DefaultEventBuffer, maxBytes)
	caughtUp(t, f, rv)
	sent := rv.Snapshot().Seq
	for range briefs {
		if _, err := rv.SendDetached("lead", "scout", strings.Repeat("x", brief)); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp(t, f, rv)
	f.mu.Lock()
	held, n, total := s.bytes, len(s.queue), 0
	for _, fr := range s.queue {
		total += cap(fr.data)
		if len(fr.data) > 2*SnapshotClip {
			t.Errorf("a frame of %d bytes; want the event clipped to about %d", len(fr.data), SnapshotClip)
		}
	}
	f.mu.Unlock()
	if held > maxBytes || total > maxBytes || n == 0 || n == briefs {
		t.Fatalf("the stalled stream holds %d frames of %d bytes (%d allocated); want some, at most %d bytes", n, held, total, maxBytes)
	}
	var out bytes.Buffer
	if !writeQueued(&out, f, s, &sent, func() bool { return true }) {
		t.Fatal("writeQueued ended the stream")
	}
	if strings.Contains(out.String(), `"gap"`) {
		t.Fatalf("the frames queued before the bound carry a gap: %.200s", out.String())
	}
	if _, err := rv.SendDetached("lead", "scout", "small"); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, f, rv)
	out.Reset()
	writeQueued(&out, f, s, &sent, func() bool { return true })
	if want := `data: {"gap":` + strconv.Itoa(briefs-n) + `,"seq":`; !strings.HasPrefix(out.String(), "event: event\n"+want) {
		t.Fatalf("next event %.120q; want it to start %q", out.String(), want)
	}
}
