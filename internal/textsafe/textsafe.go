// Package textsafe shows text from agents to people without letting it
// hide anything: control characters, line breaks, bidirectional marks,
// zero-width and other invisible characters, and bytes that are not
// UTF-8 are written as escapes (`\n`, `\u202e`, `\xff`), so that what a
// terminal, a page or a notification shows is all the text holds, in the
// order it holds it. Every view of the fleet (fleetstate watch, the
// dashboard, the command line) shows a permission request's input
// through [Escape]; the dashboard's copy in JavaScript is held to it by a
// test.
//
// [Escape] is reversible: [Unescape] returns the original text, so two
// different texts never look the same. [EscapeText] keeps line breaks
// and tabs, for prose such as an agent's reply, where the layout is part
// of the reading.
package textsafe

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Hidden reports whether r is escaped by [Escape]: a character that is
// not a letter, mark, number, punctuation or symbol, other than the
// ASCII space (controls, format characters such as U+202E and U+200B,
// line and paragraph separators, spaces other than U+0020, private-use,
// surrogate and unassigned code points), or one that renders as nothing
// (default-ignorable code points such as U+3164, and variation
// selectors). The backslash is escaped too, but is not hidden.
func Hidden(r rune) bool {
	return !unicode.IsPrint(r) || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// Escape returns s with every hidden character (see [Hidden]) written as
// an escape: `\n`, `\t` and `\r` for those three, `\uXXXX` or
// `\UXXXXXXXX` for the others, `\xNN` for each byte that is not part of
// valid UTF-8, and `\\` for the backslash itself. The result holds no
// hidden character and no line break, and [Unescape] reverses it.
func Escape(s string) string {
	return escape(s, false)
}

// EscapeText is [Escape] for prose: line breaks (`\n`) and tabs stay as
// they are, and backslashes are not doubled, so that the text reads as
// it was written; every other hidden character is escaped as Escape
// escapes it. It is not reversible: a text that holds `\u202e` spelled
// out reads as one that holds the character.
func EscapeText(s string) string {
	return escape(s, true)
}

func escape(s string, prose bool) string {
	clean := true
	for _, r := range s {
		if r == '\\' && !prose || r == utf8.RuneError || Hidden(r) && !(prose && (r == '\n' || r == '\t')) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case prose && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\\':
			if !prose {
				b.WriteByte('\\')
			}
			b.WriteByte('\\')
		case r == '\n' && !prose:
			b.WriteString(`\n`)
		case r == '\t' && !prose:
			b.WriteString(`\t`)
		case r == '\r' && !prose:
			b.WriteString(`\r`)
		case Hidden(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case Hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
	}
	return b.String()
}

var errBadEscape = errors.New("textsafe: not the output of Escape")

// Unescape returns the text that [Escape] turned into s, or an error if
// no text escapes to s.
func Unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", errBadEscape
		}
		hex := 0
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'x':
			hex = 2
		case 'u':
			hex = 4
		case 'U':
			hex = 8
		default:
			return "", errBadEscape
		}
		i += 2
		if hex == 0 {
			continue
		}
		if i+hex > len(s) {
			return "", errBadEscape
		}
		v, err := strconv.ParseUint(s[i:i+hex], 16, 32)
		if err != nil {
			return "", errBadEscape
		}
		i += hex
		if hex == 2 {
			b.WriteByte(byte(v))
			continue
		}
		b.WriteRune(rune(v))
	}
	return b.String(), nil
}

// Clip returns the first n characters of [Escape](s) and, when that cuts
// anything off, a [Mark] that says how much: "… (+1234 more characters)".
// An escape is never cut in two: a clip ends before it or after it. The
// count is of the escaped text's characters.
func Clip(s string, n int) string {
	head, rest := Cut(s, n)
	if rest == 0 {
		return head
	}
	return head + Mark(rest)
}

// Quote is [Clip] with the escaped text in double quotes and the mark,
// if any, after them: "git status\n"… (+93 more characters).
func Quote(s string, n int) string {
	head, rest := Cut(s, n)
	if rest == 0 {
		return `"` + head + `"`
	}
	return `"` + head + `"` + Mark(rest)
}

// Cut returns the first n characters of [Escape](s), never half an
// escape, and how many characters of the escaped text it left out.
func Cut(s string, n int) (head string, rest int) {
	e := Escape(s)
	total := utf8.RuneCountInString(e)
	if total <= n {
		return e, 0
	}
	cut, count := 0, 0
	for i, w := 0, 0; i < len(e); i += w {
		if e[i] == '\\' {
			w = escapeLen(e[i:])
		} else {
			_, w = utf8.DecodeRuneInString(e[i:])
		}
		c := utf8.RuneCountInString(e[i : i+w])
		if count+c > n {
			break
		}
		count += c
		cut = i + w
	}
	return e[:cut], total - count
}

// ClipBytes returns s when it has at most n bytes, and otherwise a copy
// of its longest prefix of at most n bytes that ends at a character
// boundary: a copy, not a slice, since a slice would keep the whole of s
// alive for as long as the clip lasts. It is for what a view is sent,
// before [Escape] makes it readable.
func ClipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

// Mark is what a view writes in place of the rest characters it left
// out of a text.
func Mark(rest int) string {
	if rest == 1 {
		return "… (+1 more character)"
	}
	return fmt.Sprintf("… (+%d more characters)", rest)
}

// escapeLen is the length of the escape at the start of e, which starts
// with a backslash and is the output of Escape.
func escapeLen(e string) int {
	if len(e) < 2 {
		return len(e)
	}
	n := 2
	switch e[1] {
	case 'x':
		n = 4
	case 'u':
		n = 6
	case 'U':
		n = 10
	}
	return min(n, len(e))
}
