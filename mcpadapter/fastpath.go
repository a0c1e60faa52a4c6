package mcpadapter

// What the fast paths of both transports share (ServeStdio in stdio.go,
// the fast calls of an HTTP handler in fastcalls.go): running a call whose request
// parseCall read, and writing its response once, in the bytes mcp-go
// writes for it (see wire.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/jsonstr"
)

// respond runs one fast call of t with its decoded args and returns its
// JSON-RPC response, newline included, in a buffer of bufPool. id is the
// request's id as its JSON text; meta the result's _meta, nil before
// protocol version 2026-07-28 (see [appendCallResult]). While the call
// blocks, srv sends progress notifications for token, if not nil.
func (a *Adapter) respond(ctx context.Context, srv *server.MCPServer, t *tool, id, meta []byte, args any, token mcp.ProgressToken) (resp *[]byte) {
	defer func() {
		// What mcp-go's WithRecovery and its handling of a handler's
		// error answer: a JSON-RPC error, never decorated with _meta.
		if r := recover(); r != nil {
			msg, _ := json.Marshal(fmt.Sprintf("panic recovered in %s tool handler: %v", t.name, r))
			b := getBuf()
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
	data := getBuf()
	defer putBuf(data)
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
	resp = getBuf()
	// The text is data escaped, which at most doubles it: data is JSON,
	// where only quotes and backslashes need a second escape.
	*resp = slices.Grow((*resp)[:0], 2*len(*data)+len(id)+len(meta)+
		len(`{"jsonrpc":"2.0","id":,"result":{"_meta":,"content":[{"type":"text","text":""}],"isError":true,"resultType":"complete","structuredContent":}}`+"\n"))
	*resp = appendCallResult(*resp, id, meta, *data, isError)
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

// bufPool keeps the buffers of lines read, bodies read and responses
// written, up to maxPooledLine.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

// putBuf gives b back to bufPool; nil is allowed.
func putBuf(b *[]byte) {
	if b != nil && cap(*b) <= maxPooledLine {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// cancelledRequest returns the id, as the JSON text a fast call keeps it
// under, of the request that msg, a notifications/cancelled, cancels.
func cancelledRequest(msg []byte) (string, bool) {
	var n struct {
		Method string `json:"method"`
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || n.Method != string(mcp.MethodNotificationCancelled) {
		return "", false
	}
	switch id := n.Params.RequestID.(type) {
	case string:
		return strconv.Quote(id), true // fast ids are plain ASCII: their text is this
	case float64:
		return strconv.FormatFloat(id, 'f', -1, 64), true
	}
	return "", false
}

// fastCalls are the fast calls in flight of a stdio connection or an HTTP
// handler, by a key made of their request's id, so that a
// notifications/cancelled can cancel one. The zero value is ready; it is safe for concurrent use.
type fastCalls[K comparable] struct {
	mu     sync.Mutex
	closed bool                      // guarded by mu; no call starts once set
	calls  map[K]*context.CancelFunc // guarded by mu
	wg     sync.WaitGroup            // the calls; Add under mu while !closed
}

// start counts a call under key, which cancel cancels, unless the calls
// are closed; the call then runs done when it ends.
func (f *fastCalls[K]) start(key K, cancel context.CancelFunc) (done func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, false
	}
	if f.calls == nil {
		f.calls = map[K]*context.CancelFunc{}
	}
	entry := &cancel
	f.calls[key] = entry
	f.wg.Add(1)
	return func() {
		f.mu.Lock()
		// A later call may have reused the key.
		if f.calls[key] == entry {
			delete(f.calls, key)
		}
		f.mu.Unlock()
		cancel()
		f.wg.Done()
	}, true
}

// cancel cancels the call under key, if there is one.
func (f *fastCalls[K]) cancel(key K) {
	f.mu.Lock()
	cancel := f.calls[key]
	delete(f.calls, key)
	f.mu.Unlock()
	if cancel != nil {
		(*cancel)()
	}
}

// close stops new calls and cancels those in flight; wait then waits for
// them to end.
func (f *fastCalls[K]) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cancel := range f.calls {
		(*cancel)()
	}
}

func (f *fastCalls[K]) wait() { f.wg.Wait() }
