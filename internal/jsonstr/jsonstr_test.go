package jsonstr

import (
	"bytes"
	"encoding/json"
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
	for _, s := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "\x00\x01\x1f\b\f\n\r\t\\\"/", "é😀\u2028\u2029", "\xff\xfe bad \xc3", "\ud7ff\ue000", "a\xe2\x80"} {
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
