package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
)

// DefaultBufferBytes is how many bytes of encoded events an event
// stream holds for a client that reads too slowly, beside its bound in
// events: past either, the stream drops events and counts them in the
// gap of the next one it sends.
const DefaultBufferBytes = 1 << 20

// feedBuffer is the feed's own subscription's buffer, in events. The feed
// only clips, encodes and queues, so it falls behind only when the
// machine does; then every stream sees the gap.
const feedBuffer = 4 * fleetstate.DefaultEventBuffer

// A frame is one event as every stream sends it: clipped to
// [SnapshotClip] bytes of content (see clipEvent) and encoded once. Its
// data is shared by the streams and never written to.
type frame struct {
	seq  uint64
	data []byte // the event's JSON object, without a gap
}

// feed reads the events of a rendezvous once for every event stream of
// one [Handler]: each event is clipped and encoded once, into a
// frame that the streams' queues share, and the last [Recent] are
// kept, clipped, for the snapshots. What a stream holds is bounded in
// events and in bytes, and holds no whole content. It is safe for
// concurrent use.
type feed struct {
	mu      sync.Mutex
	ring    []fleetstate.Event   // guarded by mu; the last Recent, clipped, oldest first
	seq     uint64               // guarded by mu; of the last event read
	changed chan struct{}        // guarded by mu; closed and replaced when seq moves
	streams map[*stream]struct{} // guarded by mu
	ended   bool                 // guarded by mu; the rendezvous closed
	encodes int                  // guarded by mu; events encoded, for tests
}

// stream is the queue of one event stream.
type stream struct {
	maxEvents, maxBytes int
	queue               []*frame      // guarded by feed.mu; oldest first
	bytes               int           // guarded by feed.mu; allocated for the frames in queue
	ready               chan struct{} // capacity 1: a frame was queued, or the feed ended
}

// newFeed starts reading rv's events. The reading ends when rv closes
// (which closes the subscription).
func newFeed(rv *fleetstate.Rendezvous) *feed {
	sub, snap := rv.Subscribe(feedBuffer)
	f := &feed{seq: snap.Seq, changed: make(chan struct{}), streams: map[*stream]struct{}{}}
	go f.run(sub)
	return f
}

func (f *feed) run(sub *fleetstate.Subscription) {
	for e := range sub.Events() {
		// Clipped copies only: neither the ring nor a stalled stream may
		// pin whole contents (a brief or a reply of up to 16 MiB).
		e = clipEvent(e, SnapshotClip)
		e.Gap = 0
		data, err := encodeJSON(e)
		f.mu.Lock()
		if len(f.ring) == Recent {
			f.ring = append(f.ring[:0], f.ring[1:]...)
		}
		f.ring = append(f.ring, e)
		f.seq = e.Seq
		close(f.changed)
		f.changed = make(chan struct{})
		if err == nil { // an event always encodes; a frame that did not is a gap
			f.encodes++
			fr := &frame{seq: e.Seq, data: bytes.Clone(data)} // of its own length
			for s := range f.streams {
				s.push(fr)
			}
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = true
	for s := range f.streams {
		s.wake()
	}
}

// join returns a new stream that queues every frame read from now on, up
// to maxEvents of them and maxBytes of their data.
func (f *feed) join(maxEvents, maxBytes int) *stream {
	s := &stream{maxEvents: maxEvents, maxBytes: maxBytes, ready: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams[s] = struct{}{}
	if f.ended {
		s.wake()
	}
	return s
}

// leave forgets s and what it queued.
func (f *feed) leave(s *stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.streams, s)
	s.queue, s.bytes = nil, 0
}

// next takes the oldest frame s queued; nil when there is none, and then
// ended says whether the feed ended.
func (f *feed) next(s *stream) (fr *frame, ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(s.queue) == 0 {
		return nil, f.ended
	}
	fr = s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	if len(s.queue) == 0 {
		s.queue = nil
	}
	s.bytes -= cap(fr.data)
	return fr, false
}

// push queues fr unless s holds its bound already: then fr is dropped,
// and the seq of the next frame s sends tells the gap. feed.mu must be
// held.
func (s *stream) push(fr *frame) {
	if len(s.queue) >= s.maxEvents || s.bytes+cap(fr.data) > s.maxBytes {
		return
	}
	s.queue = append(s.queue, fr)
	s.bytes += cap(fr.data)
	s.wake()
}

func (s *stream) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// upTo returns the kept events up to and including seq, clipped to clip
// bytes of content each, after waiting up to recentCatchUp for the feed
// to have read that far.
func (f *feed) upTo(seq uint64, clip int) []fleetstate.Event {
	deadline := time.NewTimer(recentCatchUp)
	defer deadline.Stop()
	f.mu.Lock()
	for f.seq < seq && !f.ended {
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			f.mu.Lock()
			seq = min(seq, f.seq) // a late feed: what it has
			continue
		}
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	out := []fleetstate.Event{}
	for _, e := range f.ring {
		if e.Seq > seq {
			break
		}
		out = append(out, clipEvent(e, clip))
	}
	return out
}

// writeFrame writes fr as a server-sent "event", with gap, the events
// missed just before it, spliced into its JSON object as the first field.
func writeFrame(w io.Writer, fr *frame, gap uint64) error {
	head := "event: event\ndata: "
	data := fr.data
	if gap > 0 {
		head += fmt.Sprintf(`{"gap":%d,`, gap)
		data = data[1:]
	}
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n\n")
	return err
}

// encodeJSON returns v's JSON on one line, without HTML escaping: a "<"
// stays one byte. New lines, and U+2028 and U+2029, are escaped as JSON
// always does, so the text is one server-sent data line.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
