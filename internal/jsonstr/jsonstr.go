// Package jsonstr appends strings as JSON, escaped byte for byte as
// encoding/json's Marshal escapes them, without reflection: for the hot
// paths that write JSON by hand (the rendezvous's turn records, the MCP
// adapter's stdio responses) and must stay identical to what
// encoding/json would write.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// The ASCII bytes that a JSON string holds as they are, one bit each:
// every byte from 0x20 but the quote, the backslash, and <, > and &.
const (
	safeLow  uint64 = 0xFFFF_FFFF_0000_0000 &^ (1<<'"' | 1<<'&' | 1<<'<' | 1<<'>') // bytes 0 to 63
	safeHigh uint64 = ^uint64(1 << ('\\' - 64))                                    // bytes 64 to 127
)

// safe reports whether the ASCII byte c goes into a JSON string as it is:
// one test instead of six in the loop over every byte.
func safe(c byte) bool {
	if c < 64 {
		return safeLow>>c&1 != 0
	}
	return safeHigh>>(c-64)&1 != 0
}

// Append appends s as a JSON string: quotes, backslashes and control
// characters escaped (\b, \f, \n, \r, \t short, the others as \u00XX); <, >
// and & (for HTML) and U+2028, U+2029 as \u; each invalid byte of UTF-8 as
// the character U+FFFD.
func Append[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe(c) {
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
		var r rune
		var n int
		switch v := any(s).(type) {
		case string:
			r, n = utf8.DecodeRuneInString(v[i:])
		case []byte:
			r, n = utf8.DecodeRune(v[i:])
		default: // a named type of either
			r, n = utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		}
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i += n
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += n
			start = i
			continue
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
