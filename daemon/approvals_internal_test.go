package daemon

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fleetstate/fleetstate"
)

func TestParseRule(t *testing.T) {
	good := []struct {
		text, tool, pattern string
		all                 bool
	}{
		{"Bash", "Bash", "", true},
		{"Bash(git status*)", "Bash", "git status*", false},
		{"Read(*)", "Read", "*", false},
		{"Bash(npm run test:*)", "Bash", "npm run test:*", false},
		{"mcp__fleetstate__fleet_send", "mcp__fleetstate__fleet_send", "", true},
		{"WebFetch(https://go.dev/*)", "WebFetch", "https://go.dev/*", false},
		{"Bash(echo (a))", "Bash", "echo (a)", false},
	}
	for _, tc := range good {
		t.Run(tc.text, func(t *testing.T) {
			r, err := parseRule(tc.text)
			if err != nil {
				t.Fatalf("parseRule(%q): %v", tc.text, err)
			}
			if r.tool != tc.tool || r.pattern != tc.pattern || r.all != tc.all || r.text != tc.text {
				t.Fatalf("parseRule(%q) = %+v; want tool %q pattern %q all %v", tc.text, r, tc.tool, tc.pattern, tc.all)
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
		"too long":        "Bash(" + strings.Repeat("a", maxRuleLen) + ")",
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := parseRule(text); !errors.Is(err, ErrBadRule) {
				t.Fatalf("parseRule(%q) = %v; want ErrBadRule", text, err)
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
		{"git status*", "echo; git status", false},
		{"*", "", true},
		{"*", "anything at all", true},
		{"rm -rf /*", "rm -rf /", true},
		{"rm -rf /*", "rm -rf /home", true},
		{"rm -rf /*", "rm -rf build", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"*.go", "main.go", true},
		{"*.go", "main.go.bak", false},
		{"npm run test:*", "npm run test", true},
		{"npm run test:*", "npm run test --watch", true},
		{"npm run test:*", "npm run build", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	} {
		if got := glob(tc.pattern, tc.s); got != tc.want {
			t.Errorf("glob(%q, %q) = %v; want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// TestApprovalsDecide: rules match the tool's main input; deny wins over
// allow; what no rule covers is left to a person; the decision names its
// rule.
func TestApprovalsDecide(t *testing.T) {
	a := &Approvals{
		Allow: []string{"Bash(git status*)", "Read(*)", "Bash(rm -rf build)", "WebFetch(https://go.dev/*)", "Grep"},
		Deny:  []string{"Bash(rm -rf /*)", "Read(/etc/*)", "Bash(rm -rf build)"},
	}
	if err := a.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tool, input string
		want              fleetstate.Behavior // "" for no rule
		by                string
	}{
		{"allowed command", "Bash", `{"command":"git status --short"}`, fleetstate.BehaviorAllow, "rule Bash(git status*)"},
		{"denied command", "Bash", `{"command":"rm -rf /home"}`, fleetstate.BehaviorDeny, "rule Bash(rm -rf /*)"},
		{"deny wins", "Bash", `{"command":"rm -rf build"}`, fleetstate.BehaviorDeny, "rule Bash(rm -rf build)"},
		{"no rule", "Bash", `{"command":"make"}`, "", ""},
		{"read anywhere", "Read", `{"file_path":"/src/main.go"}`, fleetstate.BehaviorAllow, "rule Read(*)"},
		{"read denied path", "Read", `{"file_path":"/etc/passwd"}`, fleetstate.BehaviorDeny, "rule Read(/etc/*)"},
		{"url", "WebFetch", `{"url":"https://go.dev/doc"}`, fleetstate.BehaviorAllow, "rule WebFetch(https://go.dev/*)"},
		{"other url", "WebFetch", `{"url":"https://example.com"}`, "", ""},
		{"tool alone", "Grep", `{"pattern":"x"}`, fleetstate.BehaviorAllow, "rule Grep"},
		{"other tool", "Write", `{"file_path":"a"}`, "", ""},
		{"command in another field", "Bash", `{"description":"git status"}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := a.decide(tc.tool, tc.input)
			if ok != (tc.want != "") || d.Behavior != tc.want || d.By != tc.by {
				t.Fatalf("decide(%s, %s) = %+v, %v; want %q by %q", tc.tool, tc.input, d, ok, tc.want, tc.by)
			}
			if d.Behavior == fleetstate.BehaviorDeny && !strings.Contains(d.Message, tc.by[len("rule "):]) {
				t.Errorf("deny message %q does not name the rule", d.Message)
			}
		})
	}
}

// TestRosterApprovals: a fleet file's approvals are checked at load, an
// error naming the rule's place.
func TestRosterApprovals(t *testing.T) {
	ro, err := parseRoster([]byte(`{"approvals":{"allow":["Read(*)"],"deny":["Bash(rm -rf /*)"],"leads":true},"agents":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !ro.Approvals.Leads || len(ro.Approvals.allow) != 1 || len(ro.Approvals.deny) != 1 {
		t.Fatalf("approvals = %+v", ro.Approvals)
	}
	_, err = parseRoster([]byte(`{"approvals":{"allow":["Read(*)","Bash(ls"]},"agents":[]}`))
	if !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), "approvals.allow[1]") {
		t.Fatalf("a bad rule: %v; want ErrBadRule naming approvals.allow[1]", err)
	}
	if _, err := parseRoster([]byte(`{"approvals":{"ask":["Bash"]},"agents":[]}`)); err == nil {
		t.Fatal("an unknown approvals field was accepted")
	}
}

// FuzzApprovalRule: a rule parses or is refused with ErrBadRule, never
// panics; a parsed rule's pattern matches as the equivalent regular
// expression does.
func FuzzApprovalRule(f *testing.F) {
	for _, s := range []string{"Bash(git status*)", "Read(*)", "Bash(npm run test:*)", "Bash", "Bash(", "(x)", "Bash(a**b)", "Bash()"} {
		f.Add(s, "git status")
	}
	f.Fuzz(func(t *testing.T, text, s string) {
		r, err := parseRule(text)
		if err != nil {
			if !errors.Is(err, ErrBadRule) {
				t.Fatalf("parseRule(%q) = %v; want ErrBadRule", text, err)
			}
			return
		}
		if r.text != text || r.tool == "" || strings.ContainsAny(r.tool, "() ") {
			t.Fatalf("parseRule(%q) = %+v", text, r)
		}
		if r.all || !utf8.ValidString(r.pattern) || !utf8.ValidString(s) {
			return // a regular expression reads UTF-8 only
		}
		var expr string
		if prefix, ok := strings.CutSuffix(r.pattern, ":*"); ok {
			expr = "^" + regexp.QuoteMeta(prefix) + "(?s:.*)$"
		} else {
			parts := strings.Split(r.pattern, "*")
			for i := range parts {
				parts[i] = regexp.QuoteMeta(parts[i])
			}
			expr = "^" + strings.Join(parts, "(?s:.*)") + "$"
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			t.Fatalf("regexp of %q: %v", r.pattern, err)
		}
		if got, want := glob(r.pattern, s), re.MatchString(s); got != want {
			t.Fatalf("glob(%q, %q) = %v; the regular expression says %v", r.pattern, s, got, want)
		}
	})
}
