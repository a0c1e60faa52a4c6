// Package jsonstr appends strings as JSON, escaped byte for byte as
// encoding/json escapes them, without reflection: for the hot paths that
// write JSON by hand (the rendezvous's turn records, the MCP adapter's
// stdio responses) and must stay identical to what encoding/json would
// write, with its HTML escaping (Marshal) or without it (an Encoder with
// SetEscapeHTML(false)).
package jsonstr

import (
	"math/bits"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// The ASCII bytes that a JSON string holds as they are, one bit each:
// every byte from 0x20 but the quote, the backslash, and, with HTML
// escaping, <, > and &.
const (
	safeLowText uint64 = 0xFFFF_FFFF_0000_0000 &^ (1 << '"')       // bytes 0 to 63
	safeLow     uint64 = safeLowText &^ (1<<'&' | 1<<'<' | 1<<'>') // the same, escaping HTML
	safeHigh    uint64 = ^uint64(1 << ('\\' - 64))                 // bytes 64 to 127
)

// safe reports whether the ASCII byte c goes into a JSON string as it is,
// with HTML escaping or without: one test instead of six in the loop over
// every byte.
func safe(c byte, html bool) bool {
	if c >= 64 {
		return safeHigh>>(c-64)&1 != 0
	}
	if html {
		return safeLow>>c&1 != 0
	}
	return safeLowText>>c&1 != 0
}

// Eight bytes at a time. below and equal set the high bit of each byte of
// x that is below n (n <= 128) or equal to c (an ASCII byte): the classic
// has-less-than test. A borrow may set bits above the first byte that
// matches, never below it, so the lowest bit set marks the first match
// exactly, which is all the scans use.
const (
	ones  uint64 = 0x0101_0101_0101_0101
	highs uint64 = 0x8080_8080_8080_8080
)

func below(x uint64, n byte) uint64 { return (x - ones*uint64(n)) &^ x & highs }

func equal(x uint64, c byte) uint64 { return below(x^ones*uint64(c), 1) }

// word returns the eight bytes of s from i, the first lowest; the compiler
// makes it one load.
func word[S ~string | ~[]byte](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// safeRun returns the end of the run of safe ASCII bytes of s from i:
// whole words first, then byte by byte.
func safeRun[S ~string | ~[]byte](s S, i int, html bool) int {
	for ; i+8 <= len(s); i += 8 {
		x := word(s, i)
		m := x&highs | below(x, 0x20) | equal(x, '"') | equal(x, '\\')
		if html {
			m |= equal(x, '<') | equal(x, '>') | equal(x, '&')
		}
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(s) && s[i] < utf8.RuneSelf && safe(s[i], html) {
		i++
	}
	return i
}

// PlainRun returns the end of the run of bytes of b from i that a JSON
// string's text holds as they are and that mean themselves: printable
// ASCII but the quote and the backslash. A decoder copies such a run
// whole.
func PlainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := word(b, i)
		if m := x&highs | below(x, 0x20) | equal(x, '"') | equal(x, '\\'); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) {
		if c := b[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			break
		}
		i++
	}
	return i
}

// Append appends s as a JSON string, as encoding/json's Marshal writes
// it: quotes, backslashes and control characters escaped (\b, \f, \n, \r,
// \t short, the others as \u00XX); <, > and & (for HTML) and U+2028,
// U+2029 as \u; each invalid byte of UTF-8 as the character U+FFFD.
func Append[S ~string | ~[]byte](b []byte, s S) []byte { return appendString(b, s, true) }

// AppendText appends s as [Append] does, but for <, > and &, which it
// leaves as they are, as an encoding/json Encoder with SetEscapeHTML(false)
// writes them: one byte each rather than six, for text that never goes
// into a page.
func AppendText[S ~string | ~[]byte](b []byte, s S) []byte { return appendString(b, s, false) }

func appendString[S ~string | ~[]byte](b []byte, s S, html bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe(c, html) {
				i = safeRun(s, i+1, html)
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
