package textsafe_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fleetstate/fleetstate/internal/textsafe"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "git status", "git status"},
		{"unicode letters", "café 東京 ✓", "café 東京 ✓"},
		{"newlines", "git status\n\n; rm -rf ~/work", `git status\n\n; rm -rf ~/work`},
		{"tab and return", "a\tb\rc", `a\tb\rc`},
		{"terminal escape", "ok\x1b]0;x\x07", `ok\u001b]0;x\u0007`},
		{"right-to-left override", "echo \u202egnp.exe", `echo \u202egnp.exe`},
		{"isolates and marks", "\u2066a\u2069\u200e\u200f", `\u2066a\u2069\u200e\u200f`},
		{"zero-width", "r\u200bm\u200c\u200d\ufeff", `r\u200bm\u200c\u200d\ufeff`},
		{"invisible fillers", "\u3164\u115f\ufe0f", `\u3164\u115f\ufe0f`},
		{"other spaces", "a\u00a0b\u2028c", `a\u00a0b\u2028c`},
		{"tag characters", "x\U000e0041", `x\U000e0041`},
		{"backslash", `C:\temp\n`, `C:\\temp\\n`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"replacement character", "a\ufffdb", "a\ufffdb"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := textsafe.Escape(c.in); got != c.want {
				t.Errorf("Escape(%q) = %q; want %q", c.in, got, c.want)
			}
			if got, err := textsafe.Unescape(c.want); err != nil || got != c.in {
				t.Errorf("Unescape(%q) = %q, %v; want %q", c.want, got, err, c.in)
			}
		})
	}
}

func TestEscapeText(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"lines and tabs stay", "all green\n\t12 tests", "all green\n\t12 tests"},
		{"backslash stays", `C:\temp`, `C:\temp`},
		{"controls escaped", "ok\x1b[2J\rdone\u202e", `ok\u001b[2J\u000ddone\u202e`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := textsafe.EscapeText(c.in); got != c.want {
				t.Errorf("EscapeText(%q) = %q; want %q", c.in, got, c.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "ls", 10, "ls"},
		{"exact", "abcd", 4, "abcd"},
		{"clipped", "abcdef", 4, "abcd… (+2 more characters)"},
		{"one more", "abcde", 4, "abcd… (+1 more character)"},
		{"an escape is not cut", "abc\ndef", 4, `abc… (+5 more characters)`},
		{"an escape fits", "abc\ndef", 5, `abc\n… (+3 more characters)`},
		{"newlines counted escaped", "git status" + strings.Repeat("\n", 40) + "; rm -rf ~/work", 12,
			`git status\n… (+93 more characters)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := textsafe.Clip(c.in, c.n); got != c.want {
				t.Errorf("Clip(%q, %d) = %q; want %q", c.in, c.n, got, c.want)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	if got, want := textsafe.Quote("ls -l", 10), `"ls -l"`; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if got, want := textsafe.Quote("git status\n\n; rm -rf ~/work", 12), `"git status\n"… (+17 more characters)`; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestUnescapeRefuses(t *testing.T) {
	for _, in := range []string{`\`, `a\q`, `\u12`, `\xzz`, `\U0000`} {
		if got, err := textsafe.Unescape(in); err == nil {
			t.Errorf("Unescape(%q) = %q; want an error", in, got)
		}
	}
}

// FuzzEscape holds what every view relies on: nothing Escape or Clip
// writes is hidden or breaks a line, and Escape loses nothing.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "git status\n\n; rm -rf ~", "\u202e\u2066\u200b\x1b[0m", "a\xff\\n", "\U000e0041\u3164"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		e := textsafe.Escape(s)
		if !utf8.ValidString(e) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, e)
		}
		for _, r := range e {
			if textsafe.Hidden(r) {
				t.Fatalf("Escape(%q) = %q holds %U", s, e, r)
			}
		}
		if back, err := textsafe.Unescape(e); err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
		for _, r := range textsafe.EscapeText(s) {
			if textsafe.Hidden(r) && r != '\n' && r != '\t' {
				t.Fatalf("EscapeText(%q) holds %U", s, r)
			}
		}
		n = max(n%200, 0)
		c := textsafe.Clip(s, n)
		for _, r := range c {
			if textsafe.Hidden(r) {
				t.Fatalf("Clip(%q, %d) = %q holds %U", s, n, c, r)
			}
		}
		if c != e && !strings.HasPrefix(e, c[:strings.LastIndex(c, "…")]) {
			t.Fatalf("Clip(%q, %d) = %q: not a prefix of %q", s, n, c, e)
		}
		b := textsafe.ClipBytes(s, n)
		if !strings.HasPrefix(s, b) || len(b) > max(n, 0) && b != s || b != s && len(b) < n-utf8.UTFMax+1 ||
			utf8.ValidString(s) && !utf8.ValidString(b) {
			t.Fatalf("ClipBytes(%q, %d) = %q", s, n, b)
		}
	})
}

// TestClipBytes: a clip ends at a character boundary, never past n bytes.
func TestClipBytes(t *testing.T) {
	long := strings.Repeat("é", 6) // 12 bytes
	for _, c := range []struct {
		n    int
		want string
	}{{5, "éé"}, {4, "éé"}, {12, long}, {40, long}, {0, ""}, {-1, ""}} {
		if got := textsafe.ClipBytes(long, c.n); got != c.want {
			t.Errorf("ClipBytes(%q, %d) = %q; want %q", long, c.n, got, c.want)
		}
	}
}
