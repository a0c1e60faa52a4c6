package mcpadapter

import (
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
)

// RecentEvents is how many of the last events the snapshot of an event
// stream carries in its "recent" list, so that a view that connects
// shows what happened just before instead of an empty list.
const RecentEvents = 50

// recentCatchUp bounds the wait of a new stream for the recorder to have
// read the events its snapshot counts: the recorder reads them from its
// own subscription a moment later than the rendezvous published them.
const recentCatchUp = 100 * time.Millisecond

// StreamSnapshot is the data of an event stream's "snapshot" event: the
// fleet's [fleetstate.Snapshot] and, in Recent, up to [RecentEvents] of
// the events published before it, oldest first, each content clipped as
// the snapshot's are.
type StreamSnapshot struct {
	fleetstate.Snapshot
	Recent []fleetstate.Event `json:"recent"`
}

// recentEvents keeps the last events of a rendezvous, read from a
// subscription of its own, for as long as the rendezvous lives. It is safe
// for concurrent use.
type recentEvents struct {
	mu      sync.Mutex
	ring    []fleetstate.Event // guarded by mu; the last RecentEvents, oldest first
	seq     uint64             // guarded by mu; of the last event read
	changed chan struct{}      // guarded by mu; closed and replaced when seq moves
}

// recordRecent starts keeping rv's last n events. The reading ends when
// rv closes (which closes the subscription).
func recordRecent(rv *fleetstate.Rendezvous, n int) *recentEvents {
	sub, snap := rv.Subscribe(4 * n)
	r := &recentEvents{seq: snap.Seq, changed: make(chan struct{})}
	go func() {
		for e := range sub.Events() {
			// Kept clipped, as copies: the ring must not pin whole
			// contents (50 replies of up to 16 MiB) for as long as the
			// rendezvous lives.
			e = clipEvent(e, SnapshotClip)
			r.mu.Lock()
			e.Gap = 0
			if len(r.ring) == n {
				r.ring = append(r.ring[:0], r.ring[1:]...)
			}
			r.ring = append(r.ring, e)
			r.seq = e.Seq
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	return r
}

// upTo returns the kept events up to and including seq, clipped to clip
// bytes of content each, after waiting up to recentCatchUp for the
// recorder to have read that far.
func (r *recentEvents) upTo(seq uint64, clip int) []fleetstate.Event {
	deadline := time.NewTimer(recentCatchUp)
	defer deadline.Stop()
	r.mu.Lock()
	for r.seq < seq {
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			r.mu.Lock()
			seq = min(seq, r.seq) // a late recorder: what it has
			continue
		}
		r.mu.Lock()
	}
	defer r.mu.Unlock()
	out := []fleetstate.Event{}
	for _, e := range r.ring {
		if e.Seq > seq {
			break
		}
		out = append(out, clipEvent(e, clip))
	}
	return out
}

// clipEvent returns e with its content, its outcome's content and its
// permission request's input clipped to clip bytes (see clipText; the
// request's InputBytes says how long its input is); e's own outcome and
// request are not changed.
func clipEvent(e fleetstate.Event, clip int) fleetstate.Event {
	if len(e.Content) > clip {
		e.Content = clipText(e.Content, clip)
	}
	if p := e.Permission; p != nil && len(p.Input) > clip {
		c := *p
		c.Input, c.InputBytes = clipText(p.Input, clip), len(p.Input)
		e.Permission = &c
	}
	if e.Outcome != nil && len(e.Outcome.Content) > clip {
		o := *e.Outcome
		o.Content = clipText(o.Content, clip)
		e.Outcome = &o
	}
	return e
}
