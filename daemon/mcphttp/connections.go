package mcphttp

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
)

// Connections tells the rendezvous when a member's connection is gone, so
// that a turn the member can no longer finish ends as member_gone instead
// of staying open for ever (see [fleetstate.Rendezvous.Disconnect]).
//
// What a transport can observe of a member's connection:
//
//   - its MCP session, under the protocol versions that have sessions
//     (stdio, and streamable HTTP before 2026-07-28): it ends when the
//     client closes it (an HTTP DELETE of the session) or the stdio input
//     ends;
//   - its listening stream: the standalone GET stream of streamable HTTP
//     before 2026-07-28, or a subscriptions/listen request after. The
//     stream is open for as long as the client runs, and the kernel closes
//     it when the client's process dies, however it dies.
//
// A member is disconnected when its last listening stream closes, or when
// its last session ends while it holds no stream. A member that holds no
// stream has nothing but its calls to show it is there: it is also
// disconnected when, holding no stream, it has made no call for the idle
// session TTL (see [Options].SessionIdleTTL), as its session would be
// forgotten. That covers a session the server forgets on its own, and a
// client under protocol 2026-07-28, whose calls are each a connection of
// their own (a call it abandons is a cancellation, its question
// withdrawn, not a departure).
//
// A listening stream that opens makes its member ready: a member whose
// client reconnected after a restart of the daemon is there, even before
// it calls.
//
// A member whose connection went keeps its open turn for the rendezvous's
// presence window: it may come back through another daemon of the fleet,
// with a new MCP session, and finish its turn there.
//
// One member, one connection: the first fleet call of a newer MCP session
// of a member supersedes the session that called before, and the older
// session's later fleet calls get ERR_SUPERSEDED. If the older session
// still holds a listening stream, two live connections hold one member
// token (a misconfiguration, such as one agent started twice): the
// member's open turn, which the older session may have taken, ends failed
// member_gone, so that a reply never lands on a turn its connection did
// not take; this makes it loud and loses nothing silently. An older
// session without a stream (one whose stream closed, or one that never
// listened) is a connection that went, or that nothing shows to be there:
// the newer session is the member come back, and takes its turn over.
// Sessionless calls (the 2026-07-28 protocol without a stream) cannot be
// told apart and are not superseded.
type Connections struct {
	rv *fleetstate.Rendezvous

	// sessions and currentOf index owners and current the other way, so
	// that the end of a session walks no map: members and sessions grow
	// with the fleet, and the lock is every call's.
	mu        sync.Mutex
	streams   map[string]int // guarded by mu; open listening streams by member
	streamsOf map[string]int // guarded by mu; open listening streams by MCP session, for those with one
	// came and went time the listening streams of sessions: when each
	// session's first stream opened, and when its last one closed.
	// Guarded by mu.
	came, went map[string]time.Time
	// closed is closed and replaced when a session's last stream closes.
	closed chan struct{} // guarded by mu
	// grace is how long a member's new session waits, at its first fleet
	// call, for the stream of its old session to be seen closing, and how
	// much sooner than that close the new session's own stream may have
	// opened: the server notices a connection that died with a daemon
	// between it and the client a moment later than the client does.
	grace      time.Duration
	owners     map[string]mcpadapter.Identity // guarded by mu; who opened each MCP session, by session ID
	sessions   map[mcpadapter.Identity]int    // guarded by mu; how many sessions of owners each identity opened
	current    map[string]string              // guarded by mu; the session of each member that made the last fleet call
	currentOf  map[string][]string            // guarded by mu; current inverted: the members whose current session it is, by session
	superseded map[string]bool                // guarded by mu; sessions a newer session of their member replaced
	returned   map[string][]string            // guarded by mu; tickets of outcomes a lead's call returned, by connection
	// idleTTL is how long a member that holds no stream stays connected
	// after its last call ended; zero: for ever. Set before serving.
	idleTTL time.Duration
	calls   map[string]int         // guarded by mu; calls of each member in progress
	idle    map[string]*time.Timer // guarded by mu; by member: disconnects it idleTTL after its last call
	stopped bool                   // guarded by mu; no idle timer is armed any more
}

// NewConnections returns the connections of the members and leads of rv,
// for an adapter (see [mcpadapter.Options].Connections) and the HTTP
// handler that serves it ([Options].Connections).
func NewConnections(rv *fleetstate.Rendezvous) *Connections {
	return &Connections{rv: rv, streams: map[string]int{}, streamsOf: map[string]int{}, came: map[string]time.Time{}, went: map[string]time.Time{}, closed: make(chan struct{}), grace: reconnectGrace, owners: map[string]mcpadapter.Identity{}, sessions: map[mcpadapter.Identity]int{},
		current: map[string]string{}, currentOf: map[string][]string{}, superseded: map[string]bool{}, returned: map[string][]string{}, calls: map[string]int{}, idle: map[string]*time.Timer{}}
}

// A lead's connection and the outcomes it was returned.
//
// The outcome a blocking fleet_send (or fleet_cancel) returned stays held on
// its ticket until the connection that carried it calls again: that call
// shows the response arrived (unless that call acks or cancels the very
// ticket: then the call after it does). Another connection of the same lead proves
// nothing about it. (Servers run the rendezvous with HoldReturned, so that
// only this, an ack or the end of the hold releases them.) A connection is
// the MCP session; calls without one cannot be told apart, and what they
// were returned stays for the hold.

// ReturnedTo notes that the call on connection key returned o.
func (c *Connections) ReturnedTo(key string, o fleetstate.Outcome) {
	switch o.Kind {
	case fleetstate.OutcomeReply, fleetstate.OutcomeTurnDone, fleetstate.OutcomeFailed:
	default:
		return
	}
	if o.Ticket == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.returned[key] = append(c.returned[key], o.Ticket)
}

// Streams returns how many listening streams of member are open.
func (c *Connections) Streams(member string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[member]
}

// SetReconnectGrace sets how long a member's new session waits, at its
// first fleet call, for the stream of its old session to be seen closing
// (one second by default). Call it before serving.
func (c *Connections) SetReconnectGrace(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grace = d
}

// Received releases what earlier calls on connection key returned to
// lead, but for the ticket the new call names (this one): that call acks
// it, as a lead is told to, or cancels it again, and must find it; it is
// released at the connection's next call instead.
func (c *Connections) Received(key, lead, this string) {
	c.mu.Lock()
	tickets := c.returned[key]
	delete(c.returned, key)
	if this != "" && slices.Contains(tickets, this) {
		c.returned[key] = []string{this}
	}
	c.mu.Unlock()
	for _, tk := range tickets {
		if tk != this {
			_ = c.rv.Ack(lead, tk) // acked meanwhile, or cleaned: nothing to release
		}
	}
}

// reconnectGrace is connections.grace by default.
const reconnectGrace = time.Second

// Claim lets session sid of member make a fleet call, superseding the
// member's session that called before; a superseded session is refused.
// While the older session's listening stream is still open, the call
// waits for it to close, at most c.grace: a member whose connection died
// with a daemon comes back before the server notices.
func (c *Connections) Claim(ctx context.Context, member, sid string) error {
	if sid == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline := time.Now().Add(c.grace)
	for {
		if c.superseded[sid] {
			return &fleetstate.Error{Code: fleetstate.CodeSuperseded, Op: "call",
				Err: fmt.Errorf("a newer connection of member %s took over; start a new session to take work again", member)}
		}
		cur := c.current[member]
		if cur == sid {
			return nil
		}
		wait := time.Until(deadline)
		if cur == "" || c.streamsOf[cur] == 0 || wait <= 0 || ctx.Err() != nil {
			break
		}
		closed := c.closed
		c.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-closed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		c.mu.Lock()
	}
	cur := c.current[member]
	c.current[member] = sid
	c.currentOf[sid] = append(c.currentOf[sid], member)
	if cur != "" {
		c.currentOf[cur] = slices.DeleteFunc(c.currentOf[cur], func(m string) bool { return m == member })
		if len(c.currentOf[cur]) == 0 {
			delete(c.currentOf, cur)
		}
		c.superseded[cur] = true
		if !c.cameBack(sid, cur) {
			// The older session may still be there: its open turn can
			// no longer be told apart from the newer one's.
			_ = c.rv.Drop(member)
		}
		// The member is there, through the newer session.
		_ = c.rv.SetReady(member, true)
	}
	return nil
}

// cameBack reports whether session sid of a member is the member come
// back after its session old went: old holds no listening stream, and if
// it held one, sid held none until just before it closed (c.grace). An
// old session that never listened shows nothing of its client: the newer
// session is taken for the member. A session that listened beside old
// for longer is a second connection. c.mu must be held.
func (c *Connections) cameBack(sid, old string) bool {
	if c.streamsOf[old] > 0 {
		return false
	}
	went, ok := c.went[old]
	if !ok {
		return true
	}
	came, ok := c.came[sid]
	return !ok || came.After(went.Add(-c.grace))
}

// Hooks returns the session hooks that feed c: the MCP server of the
// adapter whose Options.Connections is c serves with them.
func (c *Connections) Hooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		id, set := mcpadapter.IdentityOf(ctx)
		if !set || id.Anonymous() {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.forget(s.SessionID())
		c.owners[s.SessionID()] = id
		c.sessions[id]++
	})
	h.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) {
		c.mu.Lock()
		defer c.mu.Unlock()
		sid := s.SessionID()
		delete(c.superseded, sid)
		delete(c.came, sid)
		delete(c.went, sid)
		delete(c.returned, sid) // not released: the outcomes stay held until acked
		for _, member := range c.currentOf[sid] {
			delete(c.current, member)
		}
		delete(c.currentOf, sid)
		owner, ok := c.owners[sid]
		if !ok {
			return
		}
		id, set := mcpadapter.IdentityOf(ctx)
		if set && id != owner {
			return // mayEnd refuses this before the session ends; kept as a second line
		}
		c.forget(sid)
		// A session the server forgets on its own was idle for the
		// session TTL: its member's idle timer (see callEnded) tells.
		if set && owner.Role == mcpadapter.RoleMember && c.streams[owner.Agent] == 0 && !c.hasSession(owner) {
			_ = c.rv.Disconnect(owner.Agent) // an unknown member or a closed rendezvous has nothing to end
		}
	})
	return h
}

// mayEnd reports whether the caller id may end the MCP session sid. A
// session ID is no credential: only the agent that opened a session ends
// it, so that nobody can end another's session, nor hide its departure.
func (c *Connections) mayEnd(sid string, id mcpadapter.Identity) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	owner, ok := c.owners[sid]
	return !ok || owner == id
}

// forget uncounts the session sid's owner. c.mu must be held.
func (c *Connections) forget(sid string) {
	owner, ok := c.owners[sid]
	if !ok {
		return
	}
	delete(c.owners, sid)
	if c.sessions[owner]--; c.sessions[owner] <= 0 {
		delete(c.sessions, owner)
	}
}

// hasSession reports whether id holds a session. c.mu must be held.
func (c *Connections) hasSession(id mcpadapter.Identity) bool { return c.sessions[id] > 0 }

// streamOpened counts a listening stream of member, opened in the MCP
// session sid ("" for none).
func (c *Connections) streamOpened(member, sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streams[member]++
	if sid != "" {
		c.streamsOf[sid]++
		if _, ok := c.came[sid]; !ok {
			c.came[sid] = time.Now()
		}
	}
	_ = c.rv.SetReady(member, true) // a member the rendezvous does not know has nothing to be ready for
}

// streamClosed counts a closed stream; the last one disconnects the
// member. The lock is held across Disconnect so that a stream opening at
// the same moment is counted after it, never lost between the two.
func (c *Connections) streamClosed(member, sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sid != "" {
		if c.streamsOf[sid]--; c.streamsOf[sid] <= 0 {
			delete(c.streamsOf, sid)
			c.went[sid] = time.Now()
			close(c.closed)
			c.closed = make(chan struct{})
		}
	}
	c.streams[member]--
	if c.streams[member] > 0 {
		return
	}
	delete(c.streams, member)
	_ = c.rv.Disconnect(member)
}

// callStarted counts a call of member in progress: while it lasts, and
// for idleTTL after the last one, the member is there.
func (c *Connections) callStarted(member string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[member]++
	if tm := c.idle[member]; tm != nil {
		tm.Stop()
		delete(c.idle, member)
	}
}

// callEnded uncounts a call of member; after the last one, a member that
// holds no stream and calls nothing for idleTTL is disconnected.
func (c *Connections) callEnded(member string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls[member]--; c.calls[member] > 0 {
		return
	}
	delete(c.calls, member)
	if c.idleTTL <= 0 || c.stopped {
		return
	}
	var tm *time.Timer
	tm = time.AfterFunc(c.idleTTL, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.idle[member] != tm {
			return // a call came meanwhile
		}
		delete(c.idle, member)
		if c.streams[member] == 0 {
			_ = c.rv.Disconnect(member) // an unknown member or a closed rendezvous has nothing to end
		}
	})
	c.idle[member] = tm
}

// stopIdle stops the idle timers, for good.
func (c *Connections) stopIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for member, tm := range c.idle {
		tm.Stop()
		delete(c.idle, member)
	}
}

// isListen reports whether r opens a listening stream: the standalone GET
// stream, or a subscriptions/listen request (whose method the protocol
// repeats in the Mcp-Method header).
func isListen(r *http.Request) bool {
	return r.Method == http.MethodGet ||
		r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen"
}

// streamWriter watches a response that may become a listening stream: the
// stream counts as open from the first flush of a successful event stream,
// so that a refused or failed request is never taken for a connection.
type streamWriter struct {
	http.ResponseWriter
	status int
	opened bool
	open   func()
}

func (w *streamWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *streamWriter) Flush() {
	if !w.opened && w.status == http.StatusOK &&
		strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		w.opened = true
		w.open()
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
