package mcphttp

// The fast path of the handler: a POST of a tools/call under protocol
// version 2026-07-28, served without mcp-go's streamable-HTTP server,
// which decodes such a request, in part or whole, some nine times (mcp-go
// v1.2.1: the envelope twice, the _meta three times, the params twice for
// the header checks, the whole call) and encodes its result twice. The
// call is read and answered by the adapter's [mcpadapter.Wire]; this file
// decides which requests it takes.
//
// Why only that protocol: it has no sessions. mcp-go serves each of its
// requests on a session of its own that nothing else sees, ignores
// Mcp-Session-Id, and keeps no idle clock for it, so that a request served
// elsewhere misses nothing of mcp-go's state. A request of an older
// protocol belongs to a session whose idle clock mcp-go keeps, unexported:
// those all go to mcp-go, as before.
//
// What the fast path takes, mcp-go would have served in the same way: the
// checks below are the ones mcp-go makes of such a request (content type,
// protocol version in the header and in _meta, the Mcp-Method and Mcp-Name
// headers, no Last-Event-ID, client capabilities that decode), made as
// a filter. Anything they do not pass, and anything Wire.Read does not
// understand completely, goes to mcp-go with its body unchanged, so that
// every refusal is mcp-go's own, byte for byte. So does a call with a
// progress token: its notifications make mcp-go answer with an event
// stream. The fast path's answer is always what mcp-go answers a call
// without notifications: 200, application/json, one JSON-RPC response, or
// nothing once the client is gone.

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate/internal/mcpwire"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// modernVersion is the protocol version whose requests the fast path
// takes: the first without sessions, and the newest mcp-go speaks.
const modernVersion = mcp.ProtocolVersion20260728

// FastCalls is the fast path of one handler: it answers itself the calls
// described above, and leaves every other request to mcp-go's
// streamable-HTTP server. It is safe for concurrent use.
type FastCalls struct {
	wire  *mcpadapter.Wire
	meta  []byte // the _meta of srv's 2026-07-28 results, as mcp-go writes it
	calls mcpwire.Calls[fastCall]
}

// fastCall names a call in flight: its caller and its request's id, as
// JSON text.
type fastCall struct {
	id  mcpadapter.Identity
	req string
}

// newFastCalls returns the fast path of srv, a's server with more tools
// perhaps (see [mcpadapter.Adapter.Wire]), or nil if srv's results cannot
// be told in advance.
func newFastCalls(a *mcpadapter.Adapter, srv *server.MCPServer) *FastCalls {
	meta := resultMeta(srv)
	if meta == nil {
		return nil
	}
	return &FastCalls{wire: a.Wire(srv), meta: meta}
}

// discoverProbe is the smallest server/discover of protocol 2026-07-28.
const discoverProbe = `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"` +
	mcp.MetaKeyProtocolVersion + `":"` + modernVersion + `","` + mcp.MetaKeyClientCapabilities + `":{}}}}`

// resultMeta returns the _meta with which srv stamps every result of
// protocol version 2026-07-28 (its identity, which mcp-go keeps
// unexported), as mcp-go encodes it: the _meta of its answer to a
// server/discover. It returns nil if the answer has none.
func resultMeta(srv *server.MCPServer) []byte {
	data, err := json.Marshal(srv.HandleMessage(context.Background(), json.RawMessage(discoverProbe)))
	if err != nil {
		return nil
	}
	var resp struct {
		Result struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"result"`
	}
	info := []byte(nil)
	if json.Unmarshal(data, &resp) == nil {
		info = resp.Result.Meta[mcp.MetaKeyServerInfo]
	}
	if len(resp.Result.Meta) != 1 || info == nil {
		return nil
	}
	return append([]byte(`{"`+mcp.MetaKeyServerInfo+`":`), append(info, '}')...)
}

// serve serves r, a POST of the caller id whose body the handler read
// whole (and bounded), if it is a call the fast path takes, and reports
// whether it did: its answer is 200 and application/json in one write,
// unless the client is gone meanwhile (mcp-go writes nothing either).
// Otherwise the caller passes r, whose Body still reads body, on to
// mcp-go. A notifications/cancelled of id cancels id's fast call of that
// request id, and goes on to mcp-go. Only 2026-07-28 calls and
// cancellations are looked at: that protocol names a request's method in a
// header, and its clients are the only ones with fast calls.
func (f *FastCalls) serve(w http.ResponseWriter, r *http.Request, id mcpadapter.Identity, body []byte) bool {
	h := r.Header
	method := h.Get(mcp.HeaderMethod)
	cancelled := method == string(mcp.MethodNotificationCancelled)
	if h.Get(mcp.HeaderProtocolVersion) != modernVersion || method != string(mcp.MethodToolsCall) && !cancelled {
		return false
	}
	if cancelled {
		if req, ok := mcpwire.CancelledRequest(body); ok {
			// Only the caller's own calls: mcp-go keys the calls of
			// protocol 2026-07-28 by their request id alone, across
			// callers.
			f.calls.Cancel(fastCall{id: id, req: req})
		}
		return false
	}
	req, ok := f.take(h, body)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(mcpadapter.ContextWithIdentity(r.Context(), id))
	end, _ := f.calls.Start(fastCall{id: id, req: string(req.ID)}, cancel) // never closed
	resp, done := f.wire.Respond(ctx, req, f.meta, nil)
	end()
	defer done()
	if r.Context().Err() != nil {
		return true // the client is gone: mcp-go writes nothing either
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp) // one write, as mcp-go's encoder makes: net/http frames it alike
	return true
}

// InFlight returns how many calls the fast path has in flight; a nil
// FastCalls (no fast path) has none.
func (f *FastCalls) InFlight() int {
	if f == nil {
		return 0
	}
	return f.calls.Len()
}

// take reads body, with the request's header h (that of a 2026-07-28
// tools/call: see serve), as a call the fast path takes, and reports
// whether it is one.
func (f *FastCalls) take(h http.Header, body []byte) (mcpadapter.Call, bool) {
	if ct := h.Get("Content-Type"); ct != "application/json" && !isJSON(ct) || h.Get(mcp.HeaderLastEventID) != "" {
		return mcpadapter.Call{}, false
	}
	req, ok := f.wire.Read(body, true)
	if !ok || req.Version != modernVersion || !req.Caps || req.Progress != nil || h.Get(mcp.HeaderName) != req.Name {
		return mcpadapter.Call{}, false
	}
	return req, true
}

// isJSON reports whether the content type ct is JSON, as mcp-go reads it.
func isJSON(ct string) bool {
	mediaType, _, err := mime.ParseMediaType(ct)
	return err == nil && mediaType == "application/json"
}
