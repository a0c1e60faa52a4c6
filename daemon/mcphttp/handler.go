// Package mcphttp serves an [mcpadapter.Adapter]'s tools over MCP
// streamable HTTP, as the daemon's endpoint: callers known by their
// bearer token (or the operator's), requests refused from a non-local
// Host or Origin, request bodies bounded in size and per identity in
// flight, MCP sessions capped per identity and in all, and a revoked
// identity's requests and sessions ended. [Connections] follows the
// members' sessions and listening streams for the rendezvous, and
// [StatusPath] takes the status reports of the agents' hooks.
package mcphttp

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/door"
)

// Options configure [New].
type Options struct {
	// Tokens authenticates callers. Every request must carry
	// "Authorization: Bearer TOKEN" with a token from it.
	Tokens *auth.Tokens
	// Anonymous lets requests without an Authorization header through as
	// anonymous callers, who may use the store tools only. A request with
	// a wrong token is refused all the same.
	Anonymous bool
	// Path is where MCP is served. Empty means "/mcp".
	Path string
	// MaxRequestBytes bounds request bodies. A body past it is refused
	// while it is read (at once when its Content-Length says so) with 413
	// and a JSON-RPC error whose data has the code ERR_CONTENT_TOO_LARGE.
	// Zero means DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxBodyBytesPerToken bounds the bytes of request bodies one
	// identity has in flight (all the tokens of an agent together, and
	// all anonymous callers together): a POST's body counts, by its
	// Content-Length or else as MaxRequestBytes, from before it is read
	// until its request is answered. A request past it is answered 429
	// with Retry-After and a JSON-RPC error naming the limit, its body
	// unread. Zero means DefaultMaxBodyBytesPerToken; negative, no limit.
	MaxBodyBytesPerToken int64
	// OnStatus receives the status reports that agents' hooks POST to
	// StatusPath with their token. Nil means reports are accepted and
	// dropped.
	OnStatus func(mcpadapter.Identity, fleetstate.Status) error
	// OnUsage receives the usage that a status report carries, as the
	// rendezvous takes it (see [UsageReport]). Nil means usage is dropped.
	OnUsage func(id mcpadapter.Identity, reports []fleetstate.UsageReport) error
	// SessionIdleTTL, if positive, makes the server forget MCP sessions
	// (of the protocol versions that have them) idle that long: a client
	// killed without closing its session would otherwise be remembered
	// for ever. Listening streams get a heartbeat every third of it, so a
	// live one is never taken for idle. A member that holds no listening
	// stream and makes no call for this long, whatever its protocol
	// version, is disconnected from the rendezvous (see
	// [fleetstate.Rendezvous.Disconnect]): nothing else shows that it is
	// still there. The sweeper is a goroutine that
	// runs until [Handler.Close]. Zero means sessions are kept until
	// closed, and no sweeper runs.
	SessionIdleTTL time.Duration
	// MaxSessionsPerToken bounds the live MCP sessions (of the protocol
	// versions that have them) of one identity: all the tokens of an
	// agent together, and all anonymous callers together. An initialize
	// past it is answered 429 with a JSON-RPC error naming the limit.
	// Zero means DefaultMaxSessionsPerToken; negative, no limit.
	MaxSessionsPerToken int
	// MaxSessions bounds the live MCP sessions in all; an initialize past
	// it is answered 503. Zero means DefaultMaxSessions; negative, no
	// limit.
	MaxSessions int
	// NoFastPath sends every request through mcp-go's streamable-HTTP
	// server, as before the fast path (see [New]): for
	// comparing the two, and as a way back should a client need it.
	NoFastPath bool
	// Connections, if set, follows the members' MCP sessions and
	// listening streams: the same as the adapter's
	// [mcpadapter.Options].Connections, which the handler also feeds.
	Connections *Connections
	// Membership, if set, tells the handler of revoked tokens: the
	// requests of an identity that holds no token any more end at once
	// (its listening streams close), and its MCP sessions are ended and
	// no longer counted against the caps.
	Membership *auth.Membership
	// Operator, if set, is the daemon's operator token (see
	// [auth.NewOperatorToken]): a request that carries it calls the tools as
	// the lead named [mcpadapter.OperatorAgent], so that a person steers the fleet
	// through the lead's tools. Empty means the operator calls no tool.
	Operator string
}

// New returns a handler that serves srv, a's server, over MCP streamable HTTP with the caller's
// identity taken from its bearer token. Before authentication it refuses,
// with 403, a request that reached a loopback address under a Host or
// Origin that is not loopback (DNS rebinding); a request without a valid
// token gets 401. When a member's last listening stream closes (its
// process ended, however it ended), the member is disconnected from the
// rendezvous: see [fleetstate.Rendezvous.Disconnect]; so is a member that
// holds no stream and makes no call for [Options].SessionIdleTTL. A refused request
// is answered with "Connection: close", so that a caller without a token
// keeps no connection open. Live MCP sessions are capped per identity and
// in all (see [Options]); with a [auth.Membership], revoking an identity's
// tokens ends its requests and sessions at once.
//
// A tools/call of one of the adapter's tools under protocol version
// 2026-07-28, which has no sessions, takes a fast path: its body is read
// once, decoded once into the tool's arguments, and its result encoded
// once, in the bytes mcp-go would write (see [FastCalls]). Every other
// request (other methods, older protocols, whose sessions mcp-go keeps,
// calls with a progress token, and anything not understood completely)
// goes to mcp-go's streamable-HTTP server as it was sent.
//
// The caller closes the handler when it stops serving (see
// [Handler.Close]).
func New(a *mcpadapter.Adapter, srv *server.MCPServer, opts Options) *Handler {
	path := opts.Path
	if path == "" {
		path = "/mcp"
	}
	limit := opts.MaxRequestBytes
	if limit <= 0 {
		limit = DefaultMaxRequestBytes
	}
	caps := newSessionCaps(opts.MaxSessionsPerToken, opts.MaxSessions)
	httpOpts := []server.StreamableHTTPOption{
		server.WithEndpointPath(path),
		server.WithSessionIdManagerResolver(caps),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return mcpadapter.ContextWithIdentity(ctx, mcpadapter.IdentityFromContext(r.Context()))
		}),
	}
	if opts.SessionIdleTTL > 0 {
		httpOpts = append(httpOpts, server.WithSessionIdleTTL(opts.SessionIdleTTL),
			server.WithHeartbeatInterval(opts.SessionIdleTTL/3))
	}
	mcpHTTP := server.NewStreamableHTTPServer(srv, httpOpts...)
	status := statusHandler(opts.OnStatus, opts.OnUsage)
	budget := opts.MaxBodyBytesPerToken
	if budget == 0 {
		budget = DefaultMaxBodyBytesPerToken
	}
	bodies := newBodyBudget(budget)
	conns := opts.Connections
	h := &Handler{mcp: mcpHTTP, path: path, caps: caps, live: newLiveRequests(), conns: conns}
	if conns != nil {
		conns.mu.Lock()
		conns.idleTTL = opts.SessionIdleTTL
		conns.mu.Unlock()
	}
	lookup := func(token string) (mcpadapter.Identity, bool) {
		if opts.Operator != "" && subtle.ConstantTimeCompare([]byte(token), []byte(opts.Operator)) == 1 {
			return mcpadapter.Identity{Agent: mcpadapter.OperatorAgent, Role: mcpadapter.RoleLead}, true
		}
		if opts.Tokens == nil {
			return mcpadapter.Identity{}, false
		}
		return opts.Tokens.Lookup(token)
	}
	if !opts.NoFastPath {
		h.fast = newFastCalls(a, srv)
	}
	if opts.Membership != nil {
		h.unwatch = opts.Membership.OnRevoke(h.revoke)
	}
	h.serve = func(w http.ResponseWriter, r *http.Request) {
		if door.Rebound(r) {
			// A refused caller keeps no connection open.
			w.Header().Set("Connection", "close")
			http.Error(w, "forbidden: the Host or Origin of this request is not local", http.StatusForbidden)
			return
		}
		id := mcpadapter.Identity{}
		epoch := h.live.epoch()
		token := ""
		switch auth := r.Header.Get("Authorization"); {
		case auth == "" && opts.Anonymous:
		case auth == "":
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate"`)
			http.Error(w, "unauthorized: send Authorization: Bearer TOKEN (see fleetstate token add)", http.StatusUnauthorized)
			return
		default:
			var ok, found bool
			token, ok = door.Bearer(auth)
			if ok {
				id, found = lookup(token)
			}
			if !found {
				w.Header().Set("Connection", "close")
				w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate", error="invalid_token"`)
				http.Error(w, "unauthorized: unknown or revoked token", http.StatusUnauthorized)
				return
			}
		}
		if !id.Anonymous() {
			// The request ends when its identity's tokens are revoked.
			// A revocation between the lookup above and this registration
			// is caught by the epoch: the token is looked up again.
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			lr, changed := h.live.add(id, cancel, epoch)
			defer h.live.remove(id, lr)
			if changed {
				if again, found := lookup(token); !found || again != id {
					w.Header().Set("Connection", "close")
					w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate", error="invalid_token"`)
					http.Error(w, "unauthorized: unknown or revoked token", http.StatusUnauthorized)
					return
				}
			}
			r = r.WithContext(ctx)
		}
		var body []byte // an MCP POST's, read whole
		read := false
		switch {
		case r.Method == http.MethodPost && r.URL.Path != StatusPath && r.Body != nil && r.Body != http.NoBody:
			if r.ContentLength > limit {
				writeTooLarge(w, limit)
				return
			}
			size := r.ContentLength
			if size < 0 {
				size = limit
			}
			release, ok := bodies.reserve(id, size)
			if !ok {
				w.Header().Set("Connection", "close") // its body is not read
				writeBusy(w, budget)
				return
			}
			defer release()
			buf := getBuf()
			defer putBuf(buf)
			var err error
			*buf, err = readAll((*buf)[:0], http.MaxBytesReader(w, r.Body, limit), min(r.ContentLength, limit))
			if over := (*http.MaxBytesError)(nil); errors.As(err, &over) {
				writeTooLarge(w, limit)
				return
			}
			if err != nil {
				// mcp-go answers the reading's error.
				r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(*buf), errReader{err}))
			} else {
				body, read = *buf, true
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
		case r.Body != nil:
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if r.URL.Path == StatusPath {
			status(w, r, id)
			return
		}
		if conns != nil && id.Role == mcpadapter.RoleMember && !id.Anonymous() && !isListen(r) && r.Method != http.MethodDelete {
			// A member's calls show it is there (see connections).
			conns.callStarted(id.Agent)
			defer conns.callEnded(id.Agent)
		}
		if read && h.fast != nil && h.fast.serve(w, r, id, body) {
			return
		}
		if acceptBareCancel(w, r) {
			return
		}
		if conns != nil && r.Method == http.MethodDelete && !conns.mayEnd(r.Header.Get("Mcp-Session-Id"), id) {
			http.Error(w, "forbidden: the session belongs to another agent", http.StatusForbidden)
			return
		}
		if conns != nil && id.Role == mcpadapter.RoleMember && !id.Anonymous() && isListen(r) {
			// A member's listening stream is its connection: when the
			// last one closes, the member is gone.
			sid := r.Header.Get("Mcp-Session-Id")
			sw := &streamWriter{ResponseWriter: w, open: func() { conns.streamOpened(id.Agent, sid) }}
			defer func() {
				if sw.opened {
					conns.streamClosed(id.Agent, sid)
				}
			}()
			w = sw
		}
		ctx := mcpadapter.ContextWithIdentity(r.Context(), id)
		if r.Method == http.MethodPost {
			// Only an initialize makes mcp-go mint a session ID: that is
			// where the caps count, and refuse.
			sr := &sessionRequest{caps: caps, id: id}
			ctx = context.WithValue(ctx, sessionRequestKey{}, sr)
			w = &sessionWriter{ResponseWriter: w, sr: sr}
		}
		mcpHTTP.ServeHTTP(w, r.WithContext(ctx))
	}
	return h
}

// Handler is the HTTP handler of an adapter's MCP server, as
// [New] returns it. It is safe for concurrent use. Until
// Close it may hold a goroutine (the session sweeper, with
// [Options].SessionIdleTTL) and a subscription to revocations (with
// [Options].Membership).
type Handler struct {
	serve   http.HandlerFunc
	mcp     *server.StreamableHTTPServer
	path    string
	caps    *sessionCaps
	live    *liveRequests
	unwatch func()       // nil without a auth.Membership
	fast    *FastCalls   // nil: every request goes to mcp-go
	conns   *Connections // nil without a rendezvous

	closeOnce sync.Once
}

// FastCalls returns the handler's fast path, nil when it has none.
func (h *Handler) FastCalls() *FastCalls { return h.fast }

// ServeHTTP serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve(w, r) }

// Close ends the listening streams, so that an HTTP server's Shutdown
// need not wait for them; stops the session sweeper and the members' idle
// timers; and stops listening to revocations. Requests that come after
// Close find no session. Close the rendezvous first, so that the streams ending
// disconnects no member. Close is idempotent.
func (h *Handler) Close() error {
	var err error
	h.closeOnce.Do(func() {
		if h.unwatch != nil {
			h.unwatch()
		}
		if h.conns != nil {
			h.conns.stopIdle()
		}
		err = h.mcp.Shutdown(context.Background())
	})
	return err
}

// revoke ends what id has open: its requests (listening streams among
// them) and its MCP sessions, which stop counting against the caps.
func (h *Handler) revoke(id mcpadapter.Identity) {
	h.live.end(id)
	for _, sid := range h.caps.releaseAll(id) {
		endSession(h.mcp, h.path, sid, id)
	}
}

// liveRequests holds a cancel function for every request in progress of
// an identified caller, so that revoking the caller's tokens ends them.
type liveRequests struct {
	mu   sync.Mutex
	gen  uint64                                            // guarded by mu; counts revocations
	byID map[mcpadapter.Identity]map[*liveRequest]struct{} // guarded by mu
}

type liveRequest struct{ cancel context.CancelFunc }

func newLiveRequests() *liveRequests {
	return &liveRequests{byID: map[mcpadapter.Identity]map[*liveRequest]struct{}{}}
}

// epoch returns the count of revocations so far.
func (l *liveRequests) epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// add registers a request of id and reports whether a revocation happened
// since epoch.
func (l *liveRequests) add(id mcpadapter.Identity, cancel context.CancelFunc, epoch uint64) (*liveRequest, bool) {
	lr := &liveRequest{cancel: cancel}
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.byID[id]
	if set == nil {
		set = map[*liveRequest]struct{}{}
		l.byID[id] = set
	}
	set[lr] = struct{}{}
	return lr, l.gen != epoch
}

func (l *liveRequests) remove(id mcpadapter.Identity, lr *liveRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if set := l.byID[id]; set != nil {
		delete(set, lr)
		if len(set) == 0 {
			delete(l.byID, id)
		}
	}
}

// end cancels every request of id.
func (l *liveRequests) end(id mcpadapter.Identity) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	for lr := range l.byID[id] {
		lr.cancel()
	}
}

// acceptBareCancel answers 202 Accepted to a notifications/cancelled that
// carries no _meta, under protocol version 2026-07-28. mcp-go refuses such
// a notification with 400, and a client that gets 400 for it (the official
// Go SDK v1.8.0 does) drops its whole session. The cancellation itself does
// not need the notification: under that protocol every request is its own
// HTTP exchange, and the client aborting it cancels the call's context.
func acceptBareCancel(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "notifications/cancelled" {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var n struct {
		Method string `json:"method"`
		ID     any    `json:"id"`
		Params struct {
			Meta json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &n) != nil || n.Method != "notifications/cancelled" || n.ID != nil || len(n.Params.Meta) > 0 {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}
