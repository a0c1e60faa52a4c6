package fleetstate

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// appendRecord appends the JSON of rec to b, as encoding/json would write
// it (the same fields, names and omissions; strings escaped alike), without
// reflection: a turn's record is written at each of its state changes, and
// reflection made most of a round trip's cost. TestAppendRecordIsJSON holds
// it to encoding/json.
func appendRecord(b []byte, rec *turnRecord) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, rec.ID)
	b = append(b, `,"ticket":`...)
	b = appendJSONString(b, rec.Ticket)
	b = append(b, `,"lead":`...)
	b = appendJSONString(b, rec.Lead)
	b = append(b, `,"member":`...)
	b = appendJSONString(b, rec.Member)
	b = append(b, `,"brief":`...)
	b = appendJSONString(b, rec.Brief)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, rec.Seq, 10)
	b = append(b, `,"created":`...)
	b = appendJSONTime(b, rec.Created)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(rec.State))
	if rec.Question != "" {
		b = append(b, `,"question":`...)
		b = appendJSONString(b, rec.Question)
	}
	if rec.Asked != nil {
		b = append(b, `,"asked":`...)
		b = appendJSONTime(b, *rec.Asked)
	}
	if rec.Answer != nil {
		b = append(b, `,"answer":`...)
		b = appendJSONString(b, *rec.Answer)
	}
	if o := rec.Held; o != nil {
		b = append(b, `,"held":{"outcome":`...)
		b = appendJSONString(b, string(o.Kind))
		for _, f := range [...]struct{ name, v string }{
			{`,"turn_id":`, o.TurnID}, {`,"ticket":`, o.Ticket}, {`,"from":`, o.From}, {`,"content":`, o.Content},
		} {
			if f.v != "" {
				b = append(b, f.name...)
				b = appendJSONString(b, f.v)
			}
		}
		if o.Partial {
			b = append(b, `,"partial":true`...)
		}
		if o.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, string(o.Reason))
		}
		if o.State != "" {
			b = append(b, `,"state":`...)
			b = appendJSONString(b, string(o.State))
		}
		if o.Returned {
			b = append(b, `,"returned":true`...)
		}
		b = append(b, '}')
	}
	if rec.Opened != nil {
		b = append(b, `,"opened":`...)
		b = appendJSONTime(b, *rec.Opened)
	}
	return append(b, '}')
}

// appendJSONTime appends t as encoding/json writes a time: RFC 3339 with
// nanoseconds, quoted.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// The ASCII bytes that a JSON string holds as they are, one bit each:
// every byte from 0x20 but the quote, the backslash, and <, > and &.
const (
	jsonSafeLow  uint64 = 0xFFFF_FFFF_0000_0000 &^ (1<<'"' | 1<<'&' | 1<<'<' | 1<<'>') // bytes 0 to 63
	jsonSafeHigh uint64 = ^uint64(1 << ('\\' - 64))                                    // bytes 64 to 127
)

// jsonSafe reports whether the ASCII byte c goes into a JSON string as it
// is: one test instead of six in the loop over every byte of a record.
func jsonSafe(c byte) bool {
	if c < 64 {
		return jsonSafeLow>>c&1 != 0
	}
	return jsonSafeHigh>>(c-64)&1 != 0
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes and control characters; <, > and & (for
// HTML); U+2028 and U+2029; invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe(c) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
