package mcpadapter

// The fast path of an HTTP handler: a POST of a tools/call under
// protocol version 2026-07-28, served without mcp-go's streamable-HTTP
// server, which decodes such a request, in part or whole, some nine times
// (mcp-go v1.2.1: the envelope twice, the _meta three times, the params
// twice for the header checks, the whole call) and encodes its result
// twice.
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
// a filter. Anything they do not pass, and anything parseCall does not
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

	"github.com/fleetstate/fleetstate/internal/mcpwire"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// modernVersion is the protocol version whose requests the HTTP fast path
// takes: the first without sessions, and the newest mcp-go speaks.
const modernVersion = mcp.ProtocolVersion20260728

// FastCalls is the fast path of one HTTP handler of a server: it answers
// itself the calls described above, and leaves every other request to
// mcp-go's streamable-HTTP server. It knows nothing of HTTP but the
// request's header fields and body. It is safe for concurrent use.
type FastCalls struct {
	a     *Adapter
	srv   *server.MCPServer
	meta  []byte // the _meta of srv's 2026-07-28 results, as mcp-go writes it
	tools map[string]*tool
	calls mcpwire.Calls[fastCall]
}

// fastCall names a call in flight: its caller and its request's id, as
// JSON text.
type fastCall struct {
	id  Identity
	req string
}

// FastCalls returns the fast path of srv, or nil if srv's results cannot
// be told in advance. srv is a's server (see [Adapter.NewServer]), with
// more tools perhaps: the fast path serves those of a's tools that srv
// has when it is made, and leaves the others to mcp-go, which answers
// that it does not know them.
func (a *Adapter) FastCalls(srv *server.MCPServer) *FastCalls {
	meta := resultMeta(srv)
	if meta == nil {
		return nil
	}
	return &FastCalls{a: a, srv: srv, meta: meta, tools: a.fastTools(srv)}
}

// Header is what the fast path reads of a request's header fields
// (an http.Header has it).
type Header interface{ Get(key string) string }

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

// Serve answers body, the whole (and bounded) body of a POST of the
// caller id with the header fields h, if it is a call the fast path
// takes: resp is the response to write, 200 and application/json, in one
// write, unless ctx ended meanwhile (the client is gone: mcp-go writes
// nothing either); done, called after, recycles resp. Otherwise served is
// false and the request goes to mcp-go as it came. A
// notifications/cancelled of id cancels id's fast call of that request
// id, and goes on to mcp-go. Only 2026-07-28 calls and cancellations are
// looked at: that protocol names a request's method in a header, and its
// clients are the only ones with fast calls.
func (f *FastCalls) Serve(ctx context.Context, h Header, id Identity, body []byte) (resp []byte, done func(), served bool) {
	method := h.Get(mcp.HeaderMethod)
	cancelled := method == string(mcp.MethodNotificationCancelled)
	if h.Get(mcp.HeaderProtocolVersion) != modernVersion || method != string(mcp.MethodToolsCall) && !cancelled {
		return nil, nil, false
	}
	if cancelled {
		f.cancel(id, body)
		return nil, nil, false
	}
	req, ok := f.take(h, body)
	if !ok {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(ContextWithIdentity(ctx, id))
	end, _ := f.calls.Start(fastCall{id: id, req: string(req.ID)}, cancel) // never closed
	defer end()
	buf := f.a.respond(ctx, f.srv, req.tool, req.ID, f.meta, req.Args, nil)
	return *buf, func() { mcpwire.PutBuf(buf) }, true
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
func (f *FastCalls) take(h Header, body []byte) (callRequest, bool) {
	if ct := h.Get("Content-Type"); ct != "application/json" && !isJSON(ct) || h.Get(mcp.HeaderLastEventID) != "" {
		return callRequest{}, false
	}
	req, ok := parseCall(body, f.tools, true)
	if !ok || req.Version != modernVersion || !req.Caps || req.Progress != nil || h.Get(mcp.HeaderName) != req.tool.name {
		return callRequest{}, false
	}
	return req, true
}

// isJSON reports whether the content type ct is JSON, as mcp-go reads it.
func isJSON(ct string) bool {
	mediaType, _, err := mime.ParseMediaType(ct)
	return err == nil && mediaType == "application/json"
}

// cancel cancels the fast call of id that msg, a notifications/cancelled,
// names. Only the caller's own calls: mcp-go keys the calls of protocol
// 2026-07-28 by their request id alone, across callers.
func (f *FastCalls) cancel(id Identity, msg []byte) {
	if req, ok := mcpwire.CancelledRequest(msg); ok {
		f.calls.Cancel(fastCall{id: id, req: req})
	}
}
