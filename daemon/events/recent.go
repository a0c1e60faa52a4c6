package events

import (
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/textsafe"
)

// Recent is how many of the last events the snapshot of an event
// stream carries in its "recent" list, so that a view that connects
// shows what happened just before instead of an empty list.
const Recent = 50

// recentCatchUp bounds the wait of a new stream for the feed to have
// read the events its snapshot counts: the feed reads them from its own
// subscription a moment later than the rendezvous published them.
const recentCatchUp = 100 * time.Millisecond

// StreamSnapshot is the data of an event stream's "snapshot" event: the
// fleet's [fleetstate.Snapshot] and, in Recent, up to [Recent] of
// the events published before it, oldest first, each content clipped as
// the snapshot's are.
type StreamSnapshot struct {
	fleetstate.Snapshot
	Recent []fleetstate.Event `json:"recent"`
}

// clipEvent returns e with each text an agent or a person wrote clipped
// to clip bytes (see textsafe.ClipBytes): its content or its outcome's content
// (ContentBytes then says how long it is), its permission request's
// input (the request's InputBytes says how long), cwd and decision's
// message. e's own outcome and request are not changed, and the result
// shares no string longer than clip with e.
func clipEvent(e fleetstate.Event, clip int) fleetstate.Event {
	if len(e.Content) > clip {
		e.Content, e.ContentBytes = textsafe.ClipBytes(e.Content, clip), len(e.Content)
	}
	if p := e.Permission; p != nil && (len(p.Input) > clip || len(p.Cwd) > clip || p.Decision != nil && len(p.Decision.Message) > clip) {
		c := *p
		if len(c.Input) > clip {
			c.Input, c.InputBytes = textsafe.ClipBytes(p.Input, clip), len(p.Input)
		}
		if len(c.Cwd) > clip {
			c.Cwd = textsafe.ClipBytes(c.Cwd, clip)
		}
		if d := c.Decision; d != nil && len(d.Message) > clip {
			dc := *d
			dc.Message = textsafe.ClipBytes(d.Message, clip)
			c.Decision = &dc
		}
		e.Permission = &c
	}
	if e.Outcome != nil && len(e.Outcome.Content) > clip {
		o := *e.Outcome
		o.Content, e.ContentBytes = textsafe.ClipBytes(o.Content, clip), len(o.Content)
		e.Outcome = &o
	}
	return e
}
