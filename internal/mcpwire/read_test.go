package mcpwire

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestReaderLongStrings: strings longer than the reader's short-line bound
// (64 KiB of text), where it looks for the closing quote before it decodes,
// decode as encoding/json decodes them, whatever precedes that quote; and
// a string the line does not close is not understood.
func TestReaderLongStrings(t *testing.T) {
	long := strings.Repeat("fleetstate peer benchmark.\n", 3000)
	for _, tc := range []struct{ name, text string }{
		{"escapes", strconv.Quote(long)},
		{"escaped quotes", `"` + strings.Repeat(`a\"b\\`, 20000) + `\\"`},
		{"backslashes before the quote", `"\n` + strings.Repeat("x", 70000) + `\\\\\"\\"`},
		{"non-ASCII", `"é` + strings.Repeat("x\u00e9\\u00e9", 10000) + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want string
			if err := json.Unmarshal([]byte(tc.text), &want); err != nil {
				t.Fatal(err)
			}
			r := &reader{b: []byte(tc.text + ` , "next"`)}
			got, ok := r.str()
			if !ok || got != want {
				t.Fatalf("str: %v, %d bytes; want %d bytes", ok, len(got), len(want))
			}
			if !r.byte(',') {
				t.Fatalf("no comma after the string, at %d", r.i)
			}
			if next, ok := r.str(); !ok || next != "next" {
				t.Errorf("after the string: %q, %v", next, ok)
			}
			r = &reader{b: []byte(tc.text[:len(tc.text)-1])}
			if _, ok := r.str(); ok {
				t.Error("took a string without its closing quote")
			}
		})
	}
}

// FuzzStringSameAsJSON: a string the reader takes is valid JSON and
// decodes, as encoding/json decodes it, to what the reader returned.
func FuzzStringSameAsJSON(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `"a\"b\\"`, `"\/\b\f\n\r\t"`, `"x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		r := &reader{b: text}
		got, ok := r.str()
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(text[:r.i], &want); err != nil {
			t.Fatalf("took %q, which encoding/json refuses: %v", text[:r.i], err)
		}
		if got != want {
			t.Errorf("%q: read %q; encoding/json %q", text[:r.i], got, want)
		}
	})
}
