package mcphttp

// What one token holder's request bodies may cost the daemon. A body is
// read whole before it is decoded (mcp-go does so too), and decoding
// multiplies it: a body refused only once parsed would cost several times
// its size first. So a body past the limit is refused while it is read
// (at once, when its Content-Length says so), and the bodies one
// identity has in flight together are bounded.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/fleetstate/fleetstate"
)

// requestEnvelope is the room a request's body has beside the largest
// content the store accepts: the JSON-RPC envelope, the other arguments,
// and the escapes that JSON adds to a text (a quote, a backslash, a new
// line take two bytes).
const requestEnvelope = 1 << 20

// DefaultMaxRequestBytes bounds the body of one HTTP request: the largest
// file content the store accepts by default, and a mebibyte for the
// envelope and escapes. A content near the limit that JSON escaping makes
// longer than that is refused as too large.
const DefaultMaxRequestBytes = fleetstate.DefaultMaxContentSize + requestEnvelope

// DefaultMaxBodyBytesPerToken bounds the bytes of request bodies that one
// identity has in flight at once: two bodies of the largest size, and a
// mebibyte of small ones beside them (a waiting fleet_next, say).
const DefaultMaxBodyBytesPerToken = 2*DefaultMaxRequestBytes + 1<<20

// retryBusy is the Retry-After, in seconds, of a request refused because
// its identity has too many bytes in flight.
const retryBusy = 1

// bodyBudget counts the bytes of request bodies each identity has in
// flight. It is safe for concurrent use.
type bodyBudget struct {
	max int64 // negative: no limit

	mu   sync.Mutex
	used map[mcpadapter.Identity]int64 // guarded by mu; identities with bytes in flight only
}

func newBodyBudget(max int64) *bodyBudget {
	return &bodyBudget{max: max, used: map[mcpadapter.Identity]int64{}}
}

// reserve counts n bytes for id and returns the function that uncounts
// them, or reports false, counting nothing, when they would take id past
// the budget.
func (b *bodyBudget) reserve(id mcpadapter.Identity, n int64) (release func(), ok bool) {
	if b.max < 0 {
		return func() {}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used[id]+n > b.max {
		return nil, false
	}
	b.used[id] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.used[id] -= n; b.used[id] <= 0 {
				delete(b.used, id)
			}
		})
	}, true
}

// writeTooLarge answers a request whose body is past limit: 413, and a
// JSON-RPC error (id null: the request was not read) whose data is the
// {error, message} of a tool's failure, with ERR_CONTENT_TOO_LARGE. The
// connection is closed, since the rest of the body is not read.
func writeTooLarge(w http.ResponseWriter, limit int64) {
	msg := fmt.Sprintf("fleetstate: request body over %d bytes: the content limit (%d bytes) and %d for the envelope",
		limit, limit-requestEnvelope, requestEnvelope)
	if limit <= requestEnvelope {
		msg = fmt.Sprintf("fleetstate: request body over %d bytes", limit)
	}
	w.Header().Set("Connection", "close")
	writeRPCError(w, http.StatusRequestEntityTooLarge, string(fleetstate.CodeContentTooLarge)+": "+msg,
		map[string]any{"error": fleetstate.CodeContentTooLarge, "message": msg})
}

// writeBusy answers a request refused because its identity has max bytes
// of bodies in flight: 429 with Retry-After, and a JSON-RPC error naming
// the limit.
func writeBusy(w http.ResponseWriter, max int64) {
	w.Header().Set("Retry-After", strconv.Itoa(retryBusy))
	writeRPCError(w, http.StatusTooManyRequests, fmt.Sprintf(
		"fleetstate: request limit: at most %d bytes of request bodies in flight per token; retry when your earlier requests have been answered", max), nil)
}

// writeRPCError answers status with a JSON-RPC error of id null; data, if
// not nil, is the error's data.
func writeRPCError(w http.ResponseWriter, status int, msg string, data any) {
	e := map[string]any{"code": -32000, "message": msg}
	if data != nil {
		e["data"] = data
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": e})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// bodyPool keeps the buffers of request bodies read, up to maxPooledBody.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledBody is the largest buffer bodyPool keeps: larger ones, of
// rare large puts, go to the collector.
const maxPooledBody = 1 << 20

func getBuf() *[]byte { return bodyPool.Get().(*[]byte) }

// putBuf gives b back to bodyPool.
func putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBody {
		*b = (*b)[:0]
		bodyPool.Put(b)
	}
}
