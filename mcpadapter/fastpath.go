package mcpadapter

// What the fast paths of both transports share (ServeStdio in stdio.go,
// the HTTP fast path of daemon/mcphttp, through Wire): running a call whose
// request parseCall read, and writing its response once, in the bytes mcp-go
// writes for it (see internal/mcpwire).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/jsonstr"
	"github.com/fleetstate/fleetstate/internal/mcpwire"
)

// respond runs one fast call of t with its decoded args and returns its
// JSON-RPC response, newline included, in a buffer of mcpwire's pool. id is the
// request's id as its JSON text; meta the result's _meta, nil before
// protocol version 2026-07-28 (see [mcpwire.AppendCallResult]). While the call
// blocks, srv sends progress notifications for token, if not nil.
func (a *Adapter) respond(ctx context.Context, srv *server.MCPServer, t *tool, id, meta []byte, args any, token mcp.ProgressToken) (resp *[]byte) {
	defer func() {
		// What mcp-go's WithRecovery and its handling of a handler's
		// error answer: a JSON-RPC error, never decorated with _meta.
		if r := recover(); r != nil {
			msg, _ := json.Marshal(fmt.Sprintf("panic recovered in %s tool handler: %v", t.name, r))
			b := mcpwire.GetBuf()
			*b = append(*b, `{"jsonrpc":"2.0","id":`...)
			*b = append(*b, id...)
			*b = append(*b, `,"error":{"code":`+strconv.Itoa(mcp.INTERNAL_ERROR)+`,"message":`...)
			*b = append(*b, msg...)
			*b = append(*b, "}}\n"...)
			resp = b
		}
	}()
	a.direct.Add(1)
	v, err := a.invoke(ctx, t, args, nil, srv, token)
	data := mcpwire.GetBuf()
	defer mcpwire.PutBuf(data)
	isError := err != nil
	if isError {
		v = errorBodyOf(err)
	}
	var ok bool
	if *data, ok = appendValue((*data)[:0], v); !ok {
		msg := "mcpadapter: encode result: " + string(*data)
		*data, _ = appendValue((*data)[:0], errorBody{Error: fleetstate.CodeInternal, Message: msg})
		isError = true
	}
	resp = mcpwire.GetBuf()
	// The text is data escaped, which at most doubles it: data is JSON,
	// where only quotes and backslashes need a second escape.
	*resp = slices.Grow((*resp)[:0], 2*len(*data)+len(id)+len(meta)+
		len(`{"jsonrpc":"2.0","id":,"result":{"_meta":,"content":[{"type":"text","text":""}],"isError":true,"resultType":"complete","structuredContent":}}`+"\n"))
	*resp = mcpwire.AppendCallResult(*resp, id, meta, *data, isError)
	return resp
}

// appendValue appends v as json.Marshal encodes it; the values of the hot
// tools without reflection. On a failure it reports false and leaves the
// error's text in b.
//
// Its bytes are json.Marshal's on the Go release that runs it: a string
// that [jsonstr.Append] would write otherwise (invalid UTF-8, before Go
// 1.27) is left to json.Marshal. The JSON of v is then valid UTF-8 on
// every release, so that the response's text, v's JSON escaped again, is
// mcp-go's too.
func appendValue(b []byte, v any) ([]byte, bool) {
	switch m := v.(type) {
	case map[string]string:
		if len(m) == 1 { // put's and get's
			for k, s := range m {
				if !appendable(k) || !appendable(s) {
					break
				}
				b = append(b, '{')
				b = jsonstr.Append(b, k)
				b = append(b, ':')
				b = jsonstr.Append(b, s)
				return append(b, '}'), true
			}
		}
	case errorBody:
		if !appendable(string(m.Error)) || !appendable(m.Message) {
			break
		}
		b = append(b, `{"error":`...)
		b = jsonstr.Append(b, string(m.Error))
		b = append(b, `,"message":`...)
		b = jsonstr.Append(b, m.Message)
		return append(b, '}'), true
	}
	data, err := json.Marshal(v)
	if err != nil {
		return append(b, err.Error()...), false
	}
	return append(b, data...), true
}

// rawReplacement reports whether this release's encoding/json writes each
// invalid byte of UTF-8 as the character U+FFFD, as [jsonstr.Append] does
// (Go 1.27 on), rather than as the escape \ufffd (Go 1.26).
var rawReplacement = func() bool {
	b, _ := json.Marshal("\xff")
	return string(b) == "\"\uFFFD\""
}()

// appendable reports whether jsonstr.Append writes s as json.Marshal does
// on this release.
func appendable(s string) bool { return rawReplacement || utf8.ValidString(s) }

// Wire reads and answers, without mcp-go, the plain tools/call requests
// of one server that a transport serves itself (ServeStdio, and the HTTP
// fast path of daemon/mcphttp), in the bytes mcp-go would write. It is
// safe for concurrent use.
type Wire struct {
	a     *Adapter
	srv   *server.MCPServer
	tools map[string]*tool
}

// Wire returns the wire of srv, a's server (see [Adapter.NewServer]) with
// more tools perhaps: it serves those of a's tools that srv has when it is
// made, and leaves the others to mcp-go, which answers that it does not
// know them.
func (a *Adapter) Wire(srv *server.MCPServer) *Wire {
	tools := make(map[string]*tool, len(a.byName))
	for name, t := range a.byName {
		if srv.GetTool(name) != nil {
			tools[name] = t
		}
	}
	return &Wire{a: a, srv: srv, tools: tools}
}

// Read reads msg, one JSON-RPC message, as a tools/call of one of w's
// tools whose arguments decode completely (modern: with the _meta of
// protocol 2026-07-28), and reports whether it is one. What it does not
// take is mcp-go's to serve, unchanged.
func (w *Wire) Read(msg []byte, modern bool) (Call, bool) { return parseCall(msg, w.tools, modern) }

// Respond runs c in ctx and returns its JSON-RPC response, newline
// included; done, called once resp is written, recycles it. meta is the
// result's _meta under protocol 2026-07-28, nil before; while the call
// blocks, progress notifications go to token if it is not nil.
func (w *Wire) Respond(ctx context.Context, c Call, meta []byte, token mcp.ProgressToken) (resp []byte, done func()) {
	b := w.a.respond(ctx, w.srv, c.tool, c.ID, meta, c.Args, token)
	return *b, func() { mcpwire.PutBuf(b) }
}

// Call is a tools/call that [Wire.Read] read: the request as
// internal/mcpwire reads it, and the tool it names.
type Call struct {
	mcpwire.Call
	tool *tool
}

// parseCall reads line with [mcpwire.ParseCall] as a call of one of tools.
func parseCall(line []byte, tools map[string]*tool, modern bool) (Call, bool) {
	c, ok := mcpwire.ParseCall(line, func(name string) *mcpwire.Tool {
		if t := tools[name]; t != nil {
			return &t.wire
		}
		return nil
	}, modern)
	return Call{Call: c, tool: tools[c.Name]}, ok
}
