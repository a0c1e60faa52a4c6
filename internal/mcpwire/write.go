package mcpwire

import (
	"sync"

	"github.com/fleetstate/fleetstate/internal/jsonstr"
)

// AppendCallResult appends the JSON-RPC response of id whose result carries
// data (the JSON of the result's value) as structured content and as text,
// in the shape and order mcp-go writes for a tool's result: its result is a map,
// so its keys are sorted. A non-nil meta is the result's _meta, and makes
// the result one of protocol version 2026-07-28, which mcp-go stamps with
// the server's identity (meta) and resultType "complete".
func AppendCallResult(b, id, meta, data []byte, isError bool) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{`...)
	if meta != nil {
		b = append(b, `"_meta":`...)
		b = append(b, meta...)
		b = append(b, ',')
	}
	b = append(b, `"content":[{"type":"text","text":`...)
	b = jsonstr.Append(b, data)
	b = append(b, `}],`...)
	if isError {
		b = append(b, `"isError":true,`...)
	}
	if meta != nil {
		b = append(b, `"resultType":"complete",`...)
	}
	b = append(b, `"structuredContent":`...)
	b = append(b, data...)
	return append(b, "}}\n"...)
}

// MaxPooledLine bounds the line and response buffers kept for reuse;
// longer ones get buffers of their own. A put or get of 64 KiB has a line
// of about 70 KiB and a response of about 140 KiB (the content is in it
// twice, once escaped twice): below the bound, so that such calls reuse
// their buffers instead of growing new ones, which at that size cost more
// in copies and collections than the decoding does. The pools are
// emptied by the collector as usual, so an idle server keeps none.
const MaxPooledLine = 1 << 20

// bufPool keeps the buffers of lines read, bodies read and responses
// written, up to MaxPooledLine.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// GetBuf returns an empty buffer of the pool.
func GetBuf() *[]byte { return bufPool.Get().(*[]byte) }

// PutBuf gives b back to bufPool; nil is allowed.
func PutBuf(b *[]byte) {
	if b != nil && cap(*b) <= MaxPooledLine {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}
