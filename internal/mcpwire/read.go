// Package mcpwire reads and writes the JSON of the MCP tool calls that
// the adapter's fast paths serve without mcp-go: a reader of the one
// request shape they take (a JSON-RPC tools/call whose arguments are
// strings, booleans and numbers), a writer of the one response shape they
// answer, and the bookkeeping of calls in flight. Both transports use it:
// stdio (mcpadapter.Adapter.ServeStdio) and streamable HTTP under protocol
// version 2026-07-28 (daemon/mcphttp's fast path, through mcpadapter.Wire),
// whose requests carry the protocol version and the client's capabilities
// in _meta and whose results carry the server's identity and a
// resultType.
//
// It is kept by hand, not left to encoding/json, because bench/peer (a
// TypeScript client over stdio) measured a stdio path decoded and encoded
// by encoding/json at 0.43 to 0.81 of this one's end-to-end throughput,
// 0.43 to 0.67 at 64 KiB (commit 2e9ab9a); measured again on a later
// tree, the codec was 1.55 to 2.14 times as fast (BENCHMARKS.md).
//
// The reader is strict and partial by design: it accepts only input whose
// meaning is beyond doubt, and reports anything else as not understood, so
// that the caller hands the line to mcp-go unchanged and the client gets
// mcp-go's answer (a parse error, an unknown tool, an invalid argument)
// exactly as before. Not understood are: invalid JSON, duplicate names,
// names the shape does not have, invalid UTF-8, lone surrogates, ids that
// are neither a short integer nor a plain ASCII string, and arguments that
// the tool's fields refuse (unknown, null, of the wrong kind, missing,
// below their minimum). The writer escapes strings as encoding/json does
// (internal/jsonstr), so that a response is byte for byte what mcp-go
// writes for the same result. FuzzParseCall and FuzzStdioSameAsMCPGo
// (mcpadapter) and FuzzHTTPFastPath (daemon/mcphttp) hold the two
// together.
//
// No unsafe: a decoded string that needs a buffer of its own is built in
// a strings.Builder, whose String is that buffer without a copy.
package mcpwire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fleetstate/fleetstate/internal/jsonstr"
	"github.com/mark3labs/mcp-go/mcp"
)

// maxDepth bounds the nesting the reader skips through (in _meta).
const maxDepth = 32

// Field is an argument of a tool as the reader checks it.
type Field struct {
	Name     string
	Kind     string // JSON Schema type: string, boolean or number
	Required bool
	Min      *float64 // for numbers
}

// Tool is what the reader needs to know of a tool to decode its
// arguments.
type Tool struct {
	Fields  []Field
	NewArgs func() any // a pointer to a struct with a pointer field per Field
	Index   []int      // of each Field in NewArgs's struct
}

// Call is a tools/call as ParseCall read it.
type Call struct {
	ID       []byte // the id's JSON text: a short integer or a plain string
	Name     string // the tool's
	Args     any    // decoded, a value of the tool's NewArgs
	Progress []byte // the progress token's JSON text; nil if absent

	// Read only when ParseCall is asked for the _meta of protocol
	// version 2026-07-28.
	Version string // the protocol version in _meta; "" if absent
	Caps    bool   // client capabilities, an object that mcp-go decodes, are in _meta
}

// reader reads JSON from b. Every method reports false for input it does
// not understand; the reader's position is then meaningless.
type reader struct {
	b []byte
	i int
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// byte consumes c after white space.
func (r *reader) byte(c byte) bool {
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// peek returns the next byte after white space, or 0 at the end.
func (r *reader) peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// object reads an object, calling member for each name with the reader at
// its value; member reads the value. Duplicate names are not understood.
func (r *reader) object(member func(name string) bool) bool {
	if !r.byte('{') {
		return false
	}
	if r.byte('}') {
		return true
	}
	// Names are few in what the fast path takes; a hostile object with
	// many is checked through a map, never in quadratic time.
	var few []string
	var many map[string]bool
	for {
		name, ok := r.str()
		if !ok || !r.byte(':') {
			return false
		}
		if many == nil && len(few) == 8 {
			many = make(map[string]bool)
			for _, s := range few {
				many[s] = true
			}
		}
		if many != nil {
			if many[name] {
				return false
			}
			many[name] = true
		} else {
			for _, s := range few {
				if s == name {
					return false
				}
			}
			few = append(few, name)
		}
		if !member(name) {
			return false
		}
		if r.byte(',') {
			continue
		}
		return r.byte('}')
	}
}

// str reads a string and returns its value.
func (r *reader) str() (string, bool) {
	if r.peek() != '"' {
		return "", false
	}
	r.i++
	start := r.i
	// The common case: no escapes, all ASCII.
	if r.i = jsonstr.PlainRun(r.b, r.i); r.i < len(r.b) && r.b[r.i] == '"' {
		s := string(r.b[start:r.i])
		r.i++
		return s, true
	}
	// The value is at most as long as its text: one allocation, however
	// long the string. A short rest of the line bounds it well enough;
	// otherwise the text ends at the first quote after an even number of
	// backslashes (the plain run before r.i has none).
	size := len(r.b) - start
	if size > 64<<10 {
		for j := r.i; ; j++ {
			q := bytes.IndexByte(r.b[j:], '"')
			if q < 0 {
				break
			}
			j += q
			k := j
			for k > r.i && r.b[k-1] == '\\' {
				k--
			}
			if (j-k)%2 == 0 {
				size = j - start
				break
			}
		}
	}
	// buf's String is its buffer, without a copy of what may be the
	// whole content of a file.
	var buf strings.Builder
	buf.Grow(size)
	buf.Write(r.b[start:r.i])
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return buf.String(), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if r.i+1 >= len(r.b) {
				return "", false
			}
			e := r.b[r.i+1]
			r.i += 2
			switch e {
			case '"', '\\', '/':
				buf.WriteByte(e)
			case 'b':
				buf.WriteByte('\b')
			case 'f':
				buf.WriteByte('\f')
			case 'n':
				buf.WriteByte('\n')
			case 'r':
				buf.WriteByte('\r')
			case 't':
				buf.WriteByte('\t')
			case 'u':
				r1, ok := r.hex4()
				if !ok {
					return "", false
				}
				if r1 >= 0xd800 && r1 < 0xe000 {
					// Only a high surrogate followed by a low one is
					// understood.
					if r1 >= 0xdc00 || r.i+1 >= len(r.b) || r.b[r.i] != '\\' || r.b[r.i+1] != 'u' {
						return "", false
					}
					r.i += 2
					r2, ok := r.hex4()
					if !ok || r2 < 0xdc00 || r2 >= 0xe000 {
						return "", false
					}
					r1 = 0x10000 + (r1-0xd800)<<10 + (r2 - 0xdc00)
				}
				buf.WriteRune(r1)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			// Copy a run of plain bytes whole.
			j := jsonstr.PlainRun(r.b, r.i+1)
			buf.Write(r.b[r.i:j])
			r.i = j
		default:
			// Copy a run of non-ASCII bytes whole, once it is valid.
			j := r.i
			for j < len(r.b) && r.b[j] >= utf8.RuneSelf {
				j++
			}
			if !utf8.Valid(r.b[r.i:j]) {
				return "", false
			}
			buf.Write(r.b[r.i:j])
			r.i = j
		}
	}
	return "", false
}

func (r *reader) hex4() (rune, bool) {
	if r.i+4 > len(r.b) {
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

// number reads a number and returns its text.
func (r *reader) number() ([]byte, bool) {
	r.ws()
	start := r.i
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.b) && r.b[r.i] == '0':
		r.i++
	case r.i < len(r.b) && r.b[r.i] >= '1' && r.b[r.i] <= '9':
		r.digits()
	default:
		return nil, false
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if r.digits() == 0 {
			return nil, false
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if r.digits() == 0 {
			return nil, false
		}
	}
	return r.b[start:r.i], true
}

func (r *reader) digits() int {
	n := 0
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
		n++
	}
	return n
}

// literal consumes word (true, false, null).
func (r *reader) literal(word string) bool {
	r.ws()
	if len(r.b)-r.i >= len(word) && string(r.b[r.i:r.i+len(word)]) == word {
		r.i += len(word)
		return true
	}
	return false
}

// skip reads any value and returns its text.
func (r *reader) skip(depth int) ([]byte, bool) {
	if depth > maxDepth {
		return nil, false
	}
	r.ws()
	start := r.i
	ok := false
	switch r.peek() {
	case '"':
		_, ok = r.str()
	case '{':
		ok = r.object(func(string) bool { _, ok := r.skip(depth + 1); return ok })
	case '[':
		r.i++
		if ok = r.byte(']'); !ok {
			for {
				if _, ok = r.skip(depth + 1); !ok {
					break
				}
				if r.byte(',') {
					continue
				}
				ok = r.byte(']')
				break
			}
		}
	case 't':
		ok = r.literal("true")
	case 'f':
		ok = r.literal("false")
	case 'n':
		ok = r.literal("null")
	default:
		// mcp-go decodes what the fast path skips (in _meta) into
		// generic values: a number out of float64's range fails there.
		var text []byte
		if text, ok = r.number(); ok {
			_, ok = parseNumber(text)
		}
	}
	return r.b[start:r.i], ok
}

// requestID reads an id the fast path answers with its own text: an
// integer of at most 15 digits (which mcp-go's float64 keeps exactly) or a
// string of printable ASCII that encoding/json writes back unchanged.
func (r *reader) requestID() ([]byte, bool) {
	switch c := r.peek(); {
	case c == '"':
		start := r.i
		s, ok := r.str()
		if !ok || r.i-start != len(s)+2 {
			return nil, false // an escape
		}
		for i := range len(s) {
			if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
				return nil, false
			}
		}
		return r.b[start:r.i], true
	case c == '-' || c >= '0' && c <= '9':
		n, ok := r.number()
		digits := len(n)
		if len(n) > 0 && n[0] == '-' {
			digits--
		}
		for _, c := range n {
			if c < '0' && c != '-' || c > '9' {
				return nil, false // a fraction or an exponent
			}
		}
		if !ok || digits > 15 || string(n) == "-0" {
			return nil, false
		}
		return n, true
	}
	return nil, false
}

// ParseCall reads line as a tools/call of a tool that tool returns (nil:
// not one the fast path serves), its arguments decoded. The line is read
// once: params are read in place, before the method is known (it is
// checked at the end), and arguments are decoded as they are read when the
// tool's name came before them, as clients send it; otherwise they are
// skipped and decoded after.
//
// In _meta only a progress token is understood, and with modern (the HTTP
// fast path) also the members a 2026-07-28 request carries: the protocol
// version (a string), the client's capabilities (an object that decodes
// as mcp-go's ClientCapabilities), and the client's name and log level,
// which mcp-go reads without failing whatever they hold and which change
// nothing in a tool call's answer. The caller checks the version. Any
// other metadata (trace context, a task) is mcp-go's to read.
func ParseCall(line []byte, tool func(name string) *Tool, modern bool) (Call, bool) {
	var c Call
	var t *Tool
	r := &reader{b: line}
	var method, version string
	var late []byte // arguments before the name
	hasParams := false
	params := func() bool {
		return r.object(func(name string) bool {
			var ok bool
			switch name {
			case "name":
				var s string
				if s, ok = r.str(); ok {
					c.Name, t = s, tool(s)
					ok = t != nil
				}
			case "arguments":
				if r.peek() != '{' {
					return false
				}
				if t == nil {
					late, ok = r.skip(0)
					return ok
				}
				c.Args = t.NewArgs()
				ok = readArgs(r, t, c.Args)
			case "_meta":
				ok = r.object(func(name string) bool {
					var ok bool
					switch {
					case name == "progressToken":
						switch r.peek() {
						case '"':
							c.Progress, ok = r.skip(0)
						default:
							c.Progress, ok = r.requestID()
						}
					case !modern:
					case name == mcp.MetaKeyProtocolVersion:
						c.Version, ok = r.str()
					case name == mcp.MetaKeyClientCapabilities:
						var caps []byte
						if r.peek() == '{' {
							caps, ok = r.skip(0)
						}
						c.Caps = ok && clientCapabilities(caps)
						ok = c.Caps
					case name == mcp.MetaKeyClientInfo, name == mcp.MetaKeyLogLevel:
						_, ok = r.skip(0)
					}
					return ok
				})
			}
			return ok
		})
	}
	ok := r.object(func(name string) bool {
		var ok bool
		switch name {
		case "jsonrpc":
			version, ok = r.str()
		case "id":
			c.ID, ok = r.requestID()
		case "method":
			method, ok = r.str()
		case "params":
			hasParams = true
			ok = params()
		}
		return ok
	})
	r.ws()
	if !ok || r.i != len(line) || version != "2.0" || method != "tools/call" || c.ID == nil || !hasParams || t == nil {
		return c, false
	}
	if c.Args == nil {
		c.Args = t.NewArgs()
		var ar *reader
		if late != nil {
			ar = &reader{b: late}
		}
		if !readArgs(ar, t, c.Args) {
			return c, false
		}
	}
	return c, true
}

// clientCapabilities reports whether text, an object, decodes as the
// client capabilities of a 2026-07-28 request (without that the request is
// refused, by mcp-go). mcp-go decodes them as a generic value first, which
// it encodes again and decodes into its type; the reader has refused
// numbers out of float64's range already, so decoding into the type at
// once accepts no more than that (with duplicate keys, less: such a
// request goes to mcp-go, which answers it).
func clientCapabilities(text []byte) bool {
	var caps mcp.ClientCapabilities
	return json.Unmarshal(text, &caps) == nil
}

// parseNumber returns the value of a number the reader read; a number out
// of float64's range is not understood.
func parseNumber(text []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(text), 64)
	return f, err == nil
}

// readArgs decodes the arguments object r is at (nil: none) into dst as
// mcpadapter's decodeArgs would, reading it once, and reports whether it
// could. Arguments decodeArgs refuses are not understood here either: the
// caller then hands the whole line to mcp-go, whose decodeArgs refuses
// them with its own message.
func readArgs(r *reader, t *Tool, dst any) bool {
	fields, index := t.Fields, t.Index
	v := reflect.ValueOf(dst).Elem()
	if r != nil {
		ok := r.object(func(name string) bool {
			i := slices.IndexFunc(fields, func(f Field) bool { return f.Name == name })
			if i < 0 {
				return false
			}
			fv := v.Field(index[i])
			switch fields[i].Kind {
			case "string":
				s, ok := r.str()
				if !ok {
					return false
				}
				fv.Set(reflect.ValueOf(&s))
			case "boolean":
				var b bool
				switch {
				case r.literal("true"):
					b = true
				case r.literal("false"):
				default:
					return false
				}
				fv.Set(reflect.ValueOf(&b))
			case "number":
				text, ok := r.number()
				if !ok {
					return false
				}
				n, ok := parseNumber(text)
				if !ok || fields[i].Min != nil && n < *fields[i].Min {
					return false
				}
				fv.Set(reflect.ValueOf(&n))
			default:
				return false
			}
			return true
		})
		if !ok {
			return false
		}
	}
	for i, f := range fields {
		if f.Required && v.Field(index[i]).IsNil() {
			return false
		}
	}
	return true
}
