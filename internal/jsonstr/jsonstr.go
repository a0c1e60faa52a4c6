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

// Eight bytes at a time (SWAR), for the common run of bytes that go as
// they are: lsb has the low bit of every byte set, msb the high bit.
const (
	lsb uint64 = 0x0101_0101_0101_0101
	msb uint64 = 0x8080_8080_8080_8080
)

// hasByte reports whether a byte of w is c: zero bytes of w^c found with
// the borrow trick, which has no false negatives.
func hasByte(w uint64, c byte) bool {
	x := w ^ lsb*uint64(c)
	return (x-lsb)&^x&msb != 0
}

// plain8 reports whether the eight bytes of w (little endian) all go into
// a JSON string as they are: ASCII from 0x20, none of " \\ < > &. A false
// answer only sends them through the loop byte by byte.
func plain8(w uint64) bool {
	if w&msb != 0 || (w-lsb*0x20)&^w&msb != 0 { // a byte ≥ 0x80, or < 0x20
		return false
	}
	return !hasByte(w, '"') && !hasByte(w, '\\') && !hasByte(w, '<') && !hasByte(w, '>') && !hasByte(w, '&')
}

// Append appends s as a JSON string: quotes, backslashes and control
// characters escaped (\b, \f, \n, \r, \t short, the others as \u00XX); <, >
// and & (for HTML) and U+2028, U+2029 as \u; each invalid byte of UTF-8 as
// the character U+FFFD.
func Append[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain8(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
			continue
		}
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
