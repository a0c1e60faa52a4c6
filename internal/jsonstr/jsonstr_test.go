package jsonstr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSafe: the bit tables say what the six tests they replaced said,
// and without HTML escaping what the three.
func TestSafe(t *testing.T) {
	for c := range byte(utf8.RuneSelf) {
		text := c >= 0x20 && c != '"' && c != '\\'
		html := text && c != '<' && c != '>' && c != '&'
		if got := safe(c, true); got != html {
			t.Errorf("safe(%#x, true) = %v; want %v", c, got, html)
		}
		if got := safe(c, false); got != text {
			t.Errorf("safe(%#x, false) = %v; want %v", c, got, text)
		}
	}
}

type named string

// mirrored reports whether this Go release's encoding/json writes invalid
// UTF-8 as Append does, as the character U+FFFD itself (Go 1.27 on); Go
// 1.26 writes it escaped, as \ufffd.
func mirrored() bool {
	b, _ := json.Marshal("\xff")
	return string(b) == "\"\uFFFD\""
}

// FuzzAppend: Append writes what encoding/json writes, for a string, its
// bytes and a named string type alike: the same bytes for valid UTF-8 (and
// for any string on a release that Append mirrors); for invalid UTF-8, on
// every release, valid JSON that decodes to the string that
// encoding/json's JSON decodes to.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "\x00\x01\x1f\b\f\n\r\t\\\"/", "é😀\u2028\u2029", "\xff\xfe bad \xc3", "\ud7ff\ue000", "a\xe2\x80", "0123456789abcdef\"0123456<89abcdef>&\\\x1f\x7f\x80é0123456789\u2028abcdefgh"} {
		f.Add(s)
	}
	exact := mirrored()
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		var text bytes.Buffer
		enc := json.NewEncoder(&text)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		wantText := bytes.TrimSuffix(text.Bytes(), []byte("\n"))
		var wantValue string
		if err := json.Unmarshal(want, &wantValue); err != nil {
			t.Fatal(err)
		}
		check := func(form string, got, want []byte) {
			t.Helper()
			if utf8.ValidString(s) || exact {
				if !bytes.Equal(got, want) {
					t.Errorf("Append(%s) = %s; want %s", form, got, want)
				}
				return
			}
			var value string
			if err := json.Unmarshal(got, &value); err != nil || value != wantValue {
				t.Errorf("Append(%s) = %s, which decodes to %q, %v; want %q, as %s does", form, got, value, err, wantValue, want)
			}
		}
		check(fmt.Sprintf("%q", s), Append(nil, s), want)
		check(fmt.Sprintf("[]byte(%q)", s), Append(nil, []byte(s)), want)
		check(fmt.Sprintf("named(%q)", s), Append(nil, named(s)), want)
		check(fmt.Sprintf("text %q", s), AppendText(nil, s), wantText)
		check(fmt.Sprintf("text []byte(%q)", s), AppendText(nil, []byte(s)), wantText)
	})
}

// FuzzRuns: the word-at-a-time scans end where byte-by-byte ones end.
func FuzzRuns(f *testing.F) {
	for _, s := range []string{"", "plain text, long enough for words", "0123456\"89abcdef", "abcdefgh\\ijklmnop", "abcdefghijklmno\x1fp", "abcdefghijkl<mnop&q>", "abcdefghijklmnopé", "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x20\x21"} {
		f.Add(s, 0)
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, from int) {
		if from < 0 || from > len(s) {
			return
		}
		plain := from
		for plain < len(s) && s[plain] >= 0x20 && s[plain] < utf8.RuneSelf && s[plain] != '"' && s[plain] != '\\' {
			plain++
		}
		if got := PlainRun([]byte(s), from); got != plain {
			t.Errorf("PlainRun(%q, %d) = %d; want %d", s, from, got, plain)
		}
		for _, html := range []bool{true, false} {
			safeEnd := from
			for safeEnd < len(s) && s[safeEnd] < utf8.RuneSelf && safe(s[safeEnd], html) {
				safeEnd++
			}
			if got := safeRun(s, from, html); got != safeEnd {
				t.Errorf("safeRun(%q, %d, %v) = %d; want %d", s, from, html, got, safeEnd)
			}
			if got := safeRun([]byte(s), from, html); got != safeEnd {
				t.Errorf("safeRun([]byte(%q), %d, %v) = %d; want %d", s, from, html, got, safeEnd)
			}
		}
	})
}

// TestRunsEveryByte: each byte value, at each place of a word, stops the
// scans exactly when the byte-by-byte tests say it should.
func TestRunsEveryByte(t *testing.T) {
	for c := range 256 {
		for at := range 16 {
			b := bytes.Repeat([]byte{'a'}, 24)
			b[at] = byte(c)
			isPlain := c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\'
			wantPlain := at
			if isPlain {
				wantPlain = len(b)
			}
			if got := PlainRun(b, 0); got != wantPlain {
				t.Errorf("PlainRun with %#x at %d = %d; want %d", c, at, got, wantPlain)
			}
			for _, html := range []bool{true, false} {
				wantSafe := at
				if c < utf8.RuneSelf && safe(byte(c), html) {
					wantSafe = len(b)
				}
				if got := safeRun(b, 0, html); got != wantSafe {
					t.Errorf("safeRun with %#x at %d, html %v = %d; want %d", c, at, html, got, wantSafe)
				}
			}
		}
	}
}

// BenchmarkAppend: a short name, a long text with a line break every 17
// bytes, and 64 KiB of bench/peer's content (a line break every 27 bytes)
// escaped as the stdio server escapes a get's result: once, then that JSON
// again as text.
func BenchmarkAppend(b *testing.B) {
	for _, s := range []string{"turn-0b6f3c1e-5d7a-4c2e-9f3b-2a1d4e5f6a7b", string(bytes.Repeat([]byte("plain text, line\n"), 4096))} {
		b.Run(strconv.Itoa(len(s)), func(b *testing.B) {
			buf := make([]byte, 0, 2*len(s)+2)
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				buf = Append(buf[:0], s)
			}
		})
	}
	b.Run("peer-64KiB-twice", func(b *testing.B) {
		s := strings.Repeat("fleetstate peer benchmark.\n", 64<<10/27+1)[:64<<10]
		buf := make([]byte, 0, 4*len(s))
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			once := Append(buf[:0], s)
			Append(once[len(once):], once)
		}
	})
}
