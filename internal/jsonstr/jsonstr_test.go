package jsonstr

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"
)

// TestSafe: the bit table says what the six tests it replaced said.
func TestSafe(t *testing.T) {
	for c := range byte(utf8.RuneSelf) {
		want := c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
		if got := safe(c); got != want {
			t.Errorf("safe(%#x) = %v; want %v", c, got, want)
		}
	}
}

type named string

// FuzzAppend: Append writes what encoding/json writes, for a string, its
// bytes and a named string type alike.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "\x00\x01\x1f\b\f\n\r\t\\\"/", "é😀\u2028\u2029", "\xff\xfe bad \xc3", "\ud7ff\ue000", "a\xe2\x80", "0123456789abcdef\"0123456<89abcdef>&\\\x1f\x7f\x80é0123456789\u2028abcdefgh"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); !bytes.Equal(got, want) {
			t.Errorf("Append(%q) = %s; want %s", s, got, want)
		}
		if got := Append(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("Append([]byte(%q)) = %s; want %s", s, got, want)
		}
		if got := Append(nil, named(s)); !bytes.Equal(got, want) {
			t.Errorf("Append(named(%q)) = %s; want %s", s, got, want)
		}
	})
}

// TestPlain8: the eight-byte test agrees with the byte table for every
// byte value in every position, among plain bytes.
func TestPlain8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := uint64(0x6161616161616161) // "aaaaaaaa"
			w = w&^(0xFF<<(8*pos)) | uint64(c)<<(8*pos)
			want := c < utf8.RuneSelf && safe(byte(c))
			if got := plain8(w); got != want {
				t.Errorf("plain8 with %#x at byte %d = %v; want %v", c, pos, got, want)
			}
		}
	}
}

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
}
