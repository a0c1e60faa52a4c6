// Package events serves /events: the fleet's events as server-sent events
// to a lead, the operator or a dashboard login. One feed per handler
// clips and encodes each event once for every stream; a stalled stream
// holds a bounded number of events and bytes; a new stream starts with a
// snapshot and the recent events.
package events

import (
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/door"
	"github.com/fleetstate/fleetstate/internal/textsafe"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// Path is where the daemon serves the fleet's events.
const Path = "/events"

// DefaultHeartbeat is how often an idle event stream gets a comment
// line, so that proxies and clients see it alive, and how often the
// watcher's credentials are looked at again.
const DefaultHeartbeat = 15 * time.Second

// SnapshotClip is how many bytes of each ticket's brief and content, and
// of each permission request's input, the snapshot of an event stream
// carries (see clipSnapshot), and of each content, input, cwd and
// message the events that follow carry (see clipEvent): a view shows the
// start of each, marked clipped with its full length, and a lead's
// fleet_poll of the ticket, or the permission requests' list, returns it
// whole.
const SnapshotClip = 4 << 10

// Options configure [Handler].
type Options struct {
	// Tokens lets a lead's bearer token watch. Members may not.
	Tokens *auth.Tokens
	// Operator is a bearer token that may watch too: the daemon's
	// operator token, readable by whoever can read the state directory
	// (see [auth.OperatorToken]). Empty means none.
	Operator string
	// Authorize, if set, is another way in, such as a dashboard's login
	// cookie.
	Authorize func(*http.Request) bool
	// Heartbeat is the period of keep-alive comments and of the second
	// look at the watcher's token. Zero means DefaultHeartbeat.
	Heartbeat time.Duration
	// Buffer bounds the events a stream holds for a client that reads
	// too slowly. Zero means fleetstate.DefaultEventBuffer.
	Buffer int
	// BufferBytes bounds the bytes of encoded events a stream holds for
	// a client that reads too slowly. Zero means
	// DefaultBufferBytes.
	BufferBytes int
	// Membership, if set, tells the handler of revoked tokens: every open
	// stream looks at its watcher's credentials again as soon as an
	// identity loses its last token, so that a revoked lead's stream (by
	// its bearer token or its dashboard login) ends within the
	// membership's poll instead of at the next heartbeat. The handler
	// listens to it for as long as the membership lives.
	Membership *auth.Membership
}

// Handler serves rv's events as server-sent events to a lead, the
// operator or a caller Authorize admits: first the fleet's snapshot, as
// "event: snapshot" with the JSON of a [StreamSnapshot] (the recent events
// with it) clipped to [SnapshotClip] bytes of each brief and content, then each
// event as "event: event" with the JSON of a [fleetstate.Event], its
// contents clipped so too. The JSON is not HTML-escaped ("<" is one
// byte). Each event is encoded once for every stream of the handler. A
// watcher that reads too slowly loses events (their number is in the
// next event's gap) and never slows the fleet; its stream holds at most
// [Options].Buffer events and BufferBytes bytes of them. The stream ends when the rendezvous
// closes, when the client goes, or when its token is revoked: within
// the poll of [Options].Membership, else within a heartbeat. The
// credentials are also looked at before each event is written, so that
// no event published after a revocation that [auth.Tokens.Lookup] sees (at
// most [auth.TokenRecheck] after the token file changed) reaches the revoked
// watcher.
func Handler(rv *fleetstate.Rendezvous, o Options) http.Handler {
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Buffer <= 0 {
		o.Buffer = fleetstate.DefaultEventBuffer
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = DefaultBufferBytes
	}
	revoked := newBroadcast()
	events := newFeed(rv)
	if o.Membership != nil {
		o.Membership.OnRevoke(func(mcpadapter.Identity) { revoked.fire() })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if door.Rebound(r) {
			http.Error(w, "forbidden: the Host or Origin of this request is not local", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		allowed := func() bool {
			if o.Authorize != nil && o.Authorize(r) {
				return true
			}
			token, ok := door.Bearer(r.Header.Get("Authorization"))
			if !ok {
				return false
			}
			if o.Operator != "" && subtle.ConstantTimeCompare([]byte(token), []byte(o.Operator)) == 1 {
				return true
			}
			if o.Tokens == nil {
				return false
			}
			id, found := o.Tokens.Lookup(token)
			return found && id.Role == mcpadapter.RoleLead
		}
		// Taken before the first look, so that a revocation between the
		// look and the stream's first wait is not missed.
		wake := revoked.wait()
		if !allowed() {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate"`)
			http.Error(w, "unauthorized: the events are for a lead's token, the operator token or a dashboard login", http.StatusUnauthorized)
			return
		}
		flusher, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		// Joined before the snapshot is taken: the frames up to the
		// snapshot's seq are skipped, and none after it is missed.
		sub := events.join(o.Buffer, o.BufferBytes)
		defer events.leave(sub)
		snap := rv.Snapshot()
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		first := StreamSnapshot{clipSnapshot(snap, SnapshotClip), events.upTo(snap.Seq, SnapshotClip)}
		if writeSSE(w, "snapshot", first) != nil {
			return
		}
		flusher.Flush()
		sent := snap.Seq // of the last event the client has, in the snapshot or since
		beat := time.NewTicker(o.Heartbeat)
		defer beat.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-wake:
				wake = revoked.wait()
				if !allowed() {
					return
				}
				continue
			case <-sub.ready:
				if !writeQueued(w, events, sub, &sent, allowed) {
					return
				}
			case <-beat.C:
				if !allowed() {
					return
				}
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
					return
				}
			}
			flusher.Flush()
		}
	})
}

// broadcast wakes every waiter at once, as often as it fires. It is safe
// for concurrent use.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu; closed and replaced by fire
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// wait returns a channel closed at the next fire.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// fire wakes the waiters of now.
func (b *broadcast) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}

// writeQueued writes the frames sub queued after the event sent, with the
// gap before each, and moves sent on. It reports false when the stream
// is to end: the feed ended, allowed says no, or a write failed.
func writeQueued(w io.Writer, events *feed, sub *stream, sent *uint64, allowed func() bool) bool {
	for {
		fr, ended := events.next(sub)
		if fr == nil {
			return !ended
		}
		if fr.seq <= *sent {
			continue // in the snapshot
		}
		if !allowed() || writeFrame(w, fr, fr.seq-*sent-1) != nil {
			return false
		}
		*sent = fr.seq
	}
}

// writeSSE writes one server-sent event whose data is v's JSON (one line:
// JSON escapes new lines), not HTML-escaped.
func writeSSE(w http.ResponseWriter, event string, v any) error {
	data, err := encodeJSON(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "event: %s\ndata: ", event); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n\n")
	return err
}

// clipSnapshot returns a copy of s in which every ticket's Brief and
// Content longer than n bytes is cut to at most n bytes, at a character
// boundary, with its full length in BriefBytes or ContentBytes: what a
// connect costs does not grow with the contents. A negative n is zero. s
// is unchanged.
func clipSnapshot(s fleetstate.Snapshot, n int) fleetstate.Snapshot {
	n = max(n, 0)
	tickets := make([]fleetstate.TicketInfo, len(s.Tickets))
	for i, t := range s.Tickets {
		if len(t.Brief) > n {
			t.Brief, t.BriefBytes = textsafe.ClipBytes(t.Brief, n), len(t.Brief)
		}
		if len(t.Content) > n {
			t.Content, t.ContentBytes = textsafe.ClipBytes(t.Content, n), len(t.Content)
		}
		tickets[i] = t
	}
	s.Tickets = tickets
	if len(s.Permissions) > 0 {
		perms := make([]fleetstate.PermissionRequest, len(s.Permissions))
		for i, p := range s.Permissions {
			if len(p.Input) > n {
				p.Input, p.InputBytes = textsafe.ClipBytes(p.Input, n), len(p.Input)
			}
			perms[i] = p
		}
		s.Permissions = perms
	}
	return s
}
