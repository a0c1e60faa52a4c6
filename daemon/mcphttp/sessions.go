package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/mark3labs/mcp-go/server"
)

// Defaults of the caps on live MCP sessions (see [Options]). An idle
// session holds about 11 KB in the daemon (BenchmarkIdleSession, see
// BENCHMARKS.md), so the total cap bounds what sessions can take to about
// 45 MB, and one token to about 0.7 MB. An agent needs one session per
// client process it runs, so 64 leave room for many restarts within the
// idle TTL.
const (
	DefaultMaxSessionsPerToken = 64
	DefaultMaxSessions         = 4096
)

// sessionCaps counts the live MCP sessions (of the protocol versions that
// have them) per identity and in total, and refuses a new one past either
// cap. Anonymous callers all count as the zero mcpadapter.Identity, one bucket.
//
// A session is counted from the moment mcp-go mints its ID for an
// initialize request (the request-bound [server.SessionIdManager] of
// sessionRequest reserves the slot and binds the ID in one step, before
// the answer is written) until mcp-go terminates it: on the client's HTTP
// DELETE, or when the idle sweeper forgets it. Both go through Terminate.
type sessionCaps struct {
	perID, total int // < 0: no limit
	base         server.StatelessGeneratingSessionIdManager

	mu    sync.Mutex
	byID  map[mcpadapter.Identity]map[string]struct{} // guarded by mu; the live session IDs of each identity
	n     int                                         // guarded by mu; live sessions in all
	owner map[string]mcpadapter.Identity              // guarded by mu; live session IDs and who opened them
}

func newSessionCaps(perID, total int) *sessionCaps {
	if perID == 0 {
		perID = DefaultMaxSessionsPerToken
	}
	if total == 0 {
		total = DefaultMaxSessions
	}
	return &sessionCaps{perID: perID, total: total, byID: map[mcpadapter.Identity]map[string]struct{}{}, owner: map[string]mcpadapter.Identity{}}
}

// limitError is a refusal for a cap: the HTTP status and the message of
// the JSON-RPC error in the body.
type limitError struct {
	status int
	msg    string
}

// open counts a new session sid of id, unless a cap is reached.
func (c *sessionCaps) open(id mcpadapter.Identity, sid string) *limitError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perID >= 0 && len(c.byID[id]) >= c.perID {
		return &limitError{http.StatusTooManyRequests, fmt.Sprintf(
			"fleetstate: session limit: at most %d MCP sessions per token (--max-sessions-per-token); end the sessions you no longer use (HTTP DELETE)", c.perID)}
	}
	if c.total >= 0 && c.n >= c.total {
		return &limitError{http.StatusServiceUnavailable, fmt.Sprintf(
			"fleetstate: session limit: at most %d MCP sessions in all (--max-sessions); try again when idle sessions have been forgotten", c.total)}
	}
	if _, dup := c.owner[sid]; dup {
		c.releaseLocked(sid) // never minted twice; counted once if it were
	}
	set := c.byID[id]
	if set == nil {
		set = map[string]struct{}{}
		c.byID[id] = set
	}
	set[sid] = struct{}{}
	c.n++
	c.owner[sid] = id
	return nil
}

// release uncounts the session sid; an ID it does not count is ignored.
func (c *sessionCaps) release(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(sid)
}

func (c *sessionCaps) releaseLocked(sid string) {
	id, ok := c.owner[sid]
	if !ok {
		return
	}
	delete(c.owner, sid)
	c.n--
	delete(c.byID[id], sid)
	if len(c.byID[id]) == 0 {
		delete(c.byID, id)
	}
}

// releaseAll uncounts every session of id and returns their IDs.
func (c *sessionCaps) releaseAll(id mcpadapter.Identity) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.byID[id]))
	for sid := range c.byID[id] {
		out = append(out, sid)
	}
	for _, sid := range out {
		c.releaseLocked(sid)
	}
	return out
}

// counts returns the sessions of id and in all.
func (c *sessionCaps) counts(id mcpadapter.Identity) (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID[id]), c.n
}

// The unbound manager: session IDs minted outside an initialize (a GET
// stream's own session, which lasts as long as its connection) are not
// counted; Terminate, from a DELETE or the idle sweeper, uncounts.

func (c *sessionCaps) Generate() string { return c.base.Generate() }

func (c *sessionCaps) Validate(sid string) (bool, error) { return c.base.Validate(sid) }

func (c *sessionCaps) Terminate(sid string) (bool, error) {
	c.release(sid)
	return c.base.Terminate(sid)
}

// ResolveSessionIdManager returns the manager bound to r's sessionRequest,
// if it has one, so that an initialize counts for the caller.
func (c *sessionCaps) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if sr, ok := r.Context().Value(sessionRequestKey{}).(*sessionRequest); ok {
			return sr
		}
	}
	return c
}

type sessionRequestKey struct{}

// sessionRequest is one POST request's view of the caps: the session ID
// mcp-go mints for it (only an initialize gets one) is counted for the
// caller, or refused. A refused initialize gets the empty ID, so mcp-go
// keeps nothing of it, and sessionWriter replaces its answer with the
// refusal.
type sessionRequest struct {
	caps *sessionCaps
	id   mcpadapter.Identity

	mu      sync.Mutex
	refusal *limitError // guarded by mu
}

func (sr *sessionRequest) Generate() string {
	sid := sr.caps.base.Generate()
	if err := sr.caps.open(sr.id, sid); err != nil {
		sr.mu.Lock()
		sr.refusal = err
		sr.mu.Unlock()
		return ""
	}
	return sid
}

func (sr *sessionRequest) Validate(sid string) (bool, error) { return sr.caps.Validate(sid) }

func (sr *sessionRequest) Terminate(sid string) (bool, error) { return sr.caps.Terminate(sid) }

func (sr *sessionRequest) refused() *limitError {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.refusal
}

// sessionWriter answers with the refusal of its request, if the caps
// refused its session, in place of what mcp-go writes.
type sessionWriter struct {
	http.ResponseWriter
	sr      *sessionRequest
	written bool
}

// swallow reports whether the answer is the refusal, writing it once.
func (w *sessionWriter) swallow() bool {
	e := w.sr.refused()
	if e == nil {
		return false
	}
	if !w.written {
		w.written = true
		writeLimit(w.ResponseWriter, e)
	}
	return true
}

func (w *sessionWriter) WriteHeader(status int) {
	if !w.swallow() {
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *sessionWriter) Write(p []byte) (int, error) {
	if w.swallow() {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *sessionWriter) Flush() {
	if w.swallow() {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeLimit answers a refusal: its HTTP status, and a JSON-RPC error
// (id null: the refusal is of the transport, not of one request).
func writeLimit(w http.ResponseWriter, e *limitError) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": -32000, "message": e.msg},
	})
	h := w.Header()
	h.Del("Mcp-Session-Id")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// discardWriter is the response of a request the handler makes to mcp-go
// itself (ending a revoked identity's sessions).
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// endSession makes mcp-go forget the session sid of id, as the client's
// DELETE would.
func endSession(mcpHTTP http.Handler, path, sid string, id mcpadapter.Identity) {
	r, err := http.NewRequestWithContext(mcpadapter.ContextWithIdentity(context.Background(), id), http.MethodDelete, path, nil)
	if err != nil {
		return
	}
	r.Header.Set("Mcp-Session-Id", sid)
	mcpHTTP.ServeHTTP(&discardWriter{}, r)
}
