package approve

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseRule(t *testing.T) {
	good := []struct {
		text, tool, pattern string
		kind                kind
	}{
		{"Bash", "Bash", "", kindAll},
		{"Bash(*)", "Bash", "*", kindAll},
		{"Bash(git status *)", "Bash", "git status *", kindBash},
		{"Read(*)", "Read", "*", kindAll},
		{"Read(src/**)", "Read", "src/**", kindPath},
		{"Edit(//etc/**)", "Edit", "//etc/**", kindPath},
		{"Bash(npm run test:*)", "Bash", "npm run test:*", kindBash},
		{"mcp__fleetstate__fleet_send", "mcp__fleetstate__fleet_send", "", kindAll},
		{"WebFetch(https://go.dev/*)", "WebFetch", "https://go.dev/*", kindGlob},
		{"WebFetch(domain:Go.dev)", "WebFetch", "go.dev", kindDomain},
		{"Bash(echo (a))", "Bash", "echo (a)", kindBash},
	}
	for _, tc := range good {
		t.Run(tc.text, func(t *testing.T) {
			r, err := ParseRule(tc.text)
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tc.text, err)
			}
			if r.tool != tc.tool || r.pattern != tc.pattern || r.kind != tc.kind || r.String() != tc.text {
				t.Fatalf("ParseRule(%q) = %+v; want tool %q pattern %q kind %d", tc.text, r, tc.tool, tc.pattern, tc.kind)
			}
		})
	}
	bad := map[string]string{
		"empty":           "",
		"no tool":         "(git status)",
		"unclosed":        "Bash(git status",
		"after the paren": "Bash(ls) now",
		"empty pattern":   "Bash()",
		"space in tool":   "Ba sh(ls)",
		"control":         "Bash(ls\n)",
		"too long":        "Bash(" + strings.Repeat("a", MaxRuleLen) + ")",
		"bad path class":  "Read(src/[)",
		"other's home":    "Read(~alice/x)",
		"empty domain":    "WebFetch(domain:)",
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRule(text)
			if !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), "bad approval rule") {
				t.Fatalf("ParseRule(%q) = %v; want ErrBadRule", text, err)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"git status*", "git status", true},
		{"git status*", "git status --short", true},
		{"git status*", "git stash", false},
		{"*", "", true},
		{"*", "anything at all", true},
		{"rm -rf /*", "rm -rf /", true},
		{"rm -rf /*", "rm -rf build", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"*.go", "main.go.bak", false},
		{"exact", "exactly", false},
	} {
		if got := glob(tc.pattern, tc.s); got != tc.want {
			t.Errorf("glob(%q, %q) = %v; want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// TestBashAllowPattern: an allow pattern matches a simple command as
// Claude Code documents, words compared after quote removal.
func TestBashAllowPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, cmd string
		want         bool
	}{
		{"git status:*", "git status", true},
		{"git status:*", "git status --short", true},
		{"git status:*", "git statusx", false},
		{"git status *", "git status", true},
		{"git status *", "git status -s", true},
		{"git status *", "git statusx", false},
		{"git status*", "git statusx", true},
		{"ls *", "lsof", false},
		{"ls*", "lsof", true},
		{"npm run build", "npm run build", true},
		{"npm run build", "npm run build --prod", false},
		{"git * main", "git merge main", true},
		{"git * main", "git merge dev", false},
		{"git commit -m *", `git commit -m "a b"`, true},
		{`git commit -m "wip"`, "git commit -m wip", true},
		{"git  status", "git status", true},
		{"echo 'a b'", `echo "a b"`, true},
		{"echo 'a b'", "echo a b", false},
	} {
		bp := compileBash(tc.pattern)
		a := analyze(tc.cmd)
		if a.why != "" || len(a.top) != 1 {
			t.Fatalf("analyze(%q) = %+v", tc.cmd, a)
		}
		if got := bp.matchText(bp.text, render(a.top[0])); got != tc.want {
			t.Errorf("Bash(%s) on %q = %v; want %v", tc.pattern, tc.cmd, got, tc.want)
		}
	}
}

// TestBashDenyPattern: a deny pattern's flags are a set the command's
// must include, its command name a base name, its other words each
// some word of the command.
func TestBashDenyPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, cmd string
		want         bool
	}{
		{"rm -rf", "rm -fr x", true},
		{"rm -rf", "rm -r x", false},
		{"rm -rf", "rm -r -f -v x", true},
		{"rm -rf", "/usr/bin/rm --force -R x", true},
		{"rm -rf", "rm -- -rf", false},
		{"rm", "rmdir x", false},
		{"rm*", "rmdir x", true},
		{"rm -rf /*", "rm -rf /", true},
		{"rm -rf /*", "rm -rf ./x", false},
		{"rm -rf /*", "rm -rf ~/x", true},
		{"git push --force", "git push --force-with-lease", false},
		{"git push --force", "git -C x push -f", true},
		{"curl", "git commit -m curl", false},
		{"curl", "sudo -E curl x", true},
	} {
		bp := compileBash(tc.pattern)
		a := analyze(tc.cmd)
		got := false
		for _, c := range a.all {
			for _, pos := range c.pos {
				got = got || bp.deny.denies(c.words, pos, "/home/u")
			}
		}
		if got != tc.want {
			t.Errorf("deny Bash(%s) on %q = %v; want %v", tc.pattern, tc.cmd, got, tc.want)
		}
	}
}

// TestPathMatch: patterns are anchored as Claude Code writes them and
// match cleaned absolute paths, a directory everything in it.
func TestPathMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		deny, want    bool
	}{
		{"src/**", "/proj/src/a/b.go", false, true},
		{"src/**", "/proj/src", false, true},
		{"src/**", "/proj/srcx/a", false, false},
		{"src/*.go", "/proj/src/a.go", false, true},
		{"src/*.go", "/proj/src/a/b.go", false, false},
		{"src", "/proj/src/a/b.go", false, true},
		{"*.pem", "/proj/a/b/k.pem", false, true},
		{"*.pem", "/other/k.pem", false, false},
		{"./k.pem", "/proj/a/k.pem", false, false},
		{"//etc/*", "/etc/passwd", false, true},
		{"~/.ssh/**", "/home/u/.ssh/id", false, true},
		{"/docs/**", "/fleet/docs/a", false, true},
		{"/docs/**", "/docs/a", false, false},
		{"/docs/**", "/docs/a", true, true},
		{"src/**/*_test.go", "/proj/src/a/b/x_test.go", false, true},
		{"src/**/*_test.go", "/proj/src/x_test.go", false, true},
		{"//", "/anything", false, true},
		{"~", "/home/u/x", false, true},
	} {
		pp, err := compilePath(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := pp.match(tc.path, "/proj", "/home/u", "/fleet", tc.deny); got != tc.want {
			t.Errorf("%q on %q (deny %v) = %v; want %v", tc.pattern, tc.path, tc.deny, got, tc.want)
		}
	}
}

// FuzzParseRule: a rule parses or is refused with ErrBadRule, never
// panics; a parsed glob rule's pattern matches as the equivalent regular
// expression does.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"Bash(git status *)", "Read(*)", "Read(src/**)", "Bash(npm run test:*)", "Bash", "Bash(", "(x)", "mcp(a**b)", "Bash()"} {
		f.Add(s, "git status")
	}
	f.Fuzz(func(t *testing.T, text, s string) {
		r, err := ParseRule(text)
		if err != nil {
			if !errors.Is(err, ErrBadRule) {
				t.Fatalf("ParseRule(%q) = %v; want ErrBadRule", text, err)
			}
			return
		}
		if r.text != text || r.tool == "" || strings.ContainsAny(r.tool, "() ") {
			t.Fatalf("ParseRule(%q) = %+v", text, r)
		}
		if r.kind != kindGlob || strings.HasSuffix(r.pattern, ":*") || !utf8.ValidString(r.pattern) || !utf8.ValidString(s) {
			return // a regular expression reads UTF-8 only
		}
		parts := strings.Split(r.pattern, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, "(?s:.*)") + "$")
		if got, want := glob(r.pattern, s), re.MatchString(s); got != want {
			t.Fatalf("glob(%q, %q) = %v; the regular expression says %v", r.pattern, s, got, want)
		}
	})
}
