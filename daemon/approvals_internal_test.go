package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
)

// TestApprovalsDecide: rules match the tool's main input; deny wins over
// allow; what no rule covers is left to a person; the decision names its
// rules, and a denial what it denied.
func TestApprovalsDecide(t *testing.T) {
	a := &Approvals{
		Allow: []string{"Bash(git status *)", "Bash(head:*)", "Read(*)", "Bash(rm -rf build)", "WebFetch(https://go.dev/*)", "Grep", "Edit(src/**)"},
		Deny:  []string{"Bash(rm -rf /*)", "Read(//etc/*)", "Bash(rm -rf build)", "Edit(/secrets/**)"},
	}
	if err := a.validate(); err != nil {
		t.Fatal(err)
	}
	a.policy("/fleet", "/home/u")
	for _, tc := range []struct {
		name, tool, input string
		want              fleetstate.Behavior // "" for no rule
		by, message       string
	}{
		{"allowed command", "Bash", `{"command":"git status --short"}`, fleetstate.BehaviorAllow, "rule Bash(git status *)", ""},
		{"allowed pipeline", "Bash", `{"command":"git status | head -3"}`, fleetstate.BehaviorAllow, "rules Bash(git status *), Bash(head:*)", ""},
		{"joined command", "Bash", `{"command":"git status; make"}`, "", "", ""},
		{"denied command", "Bash", `{"command":"rm -rf /home"}`, fleetstate.BehaviorDeny, "rule Bash(rm -rf /*)", "the fleet file's rule Bash(rm -rf /*) denies this: rm -rf /home"},
		{"denied respelled", "Bash", `{"command":"git status && /bin/rm -f -r /home"}`, fleetstate.BehaviorDeny, "rule Bash(rm -rf /*)", "the fleet file's rule Bash(rm -rf /*) denies this: /bin/rm -f -r /home"},
		{"deny wins", "Bash", `{"command":"rm -rf build"}`, fleetstate.BehaviorDeny, "rule Bash(rm -rf build)", "the fleet file's rule Bash(rm -rf build) denies this: rm -rf build"},
		{"no rule", "Bash", `{"command":"make"}`, "", "", ""},
		{"read anywhere", "Read", `{"file_path":"/src/main.go"}`, fleetstate.BehaviorAllow, "rule Read(*)", ""},
		{"read denied path", "Read", `{"file_path":"/etc/./passwd"}`, fleetstate.BehaviorDeny, "rule Read(//etc/*)", "the fleet file's rule Read(//etc/*) denies this: /etc/passwd"},
		{"edit in cwd", "Write", `{"file_path":"src/a.go"}`, fleetstate.BehaviorAllow, "rule Edit(src/**)", ""},
		{"edit out of cwd", "Edit", `{"file_path":"src/../../a.go"}`, "", "", ""},
		{"edit by the fleet file", "Edit", `{"file_path":"/fleet/secrets/k"}`, fleetstate.BehaviorDeny, "rule Edit(/secrets/**)", "the fleet file's rule Edit(/secrets/**) denies this: /fleet/secrets/k"},
		{"url", "WebFetch", `{"url":"https://go.dev/doc"}`, fleetstate.BehaviorAllow, "rule WebFetch(https://go.dev/*)", ""},
		{"other url", "WebFetch", `{"url":"https://example.com"}`, "", "", ""},
		{"tool alone", "Grep", `{"pattern":"x"}`, fleetstate.BehaviorAllow, "rule Grep", ""},
		{"other tool", "Glob", `{"pattern":"a"}`, "", "", ""},
		{"command in another field", "Bash", `{"description":"git status"}`, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := a.decide(tc.tool, tc.input, "/proj")
			if ok != (tc.want != "") || d.Behavior != tc.want || d.By != tc.by || d.Message != tc.message {
				t.Fatalf("decide(%s, %s) = %+v, %v; want %q by %q, message %q", tc.tool, tc.input, d, ok, tc.want, tc.by, tc.message)
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
	if !ro.Approvals.Leads || len(ro.Approvals.rules.Allow) != 1 || len(ro.Approvals.rules.Deny) != 1 {
		t.Fatalf("approvals = %+v", ro.Approvals)
	}
	_, err = parseRoster([]byte(`{"approvals":{"allow":["Read(*)","Bash(ls"]},"agents":[]}`))
	if !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), "approvals.allow[1]") {
		t.Fatalf("a bad rule: %v; want ErrBadRule naming approvals.allow[1]", err)
	}
	_, err = parseRoster([]byte(`{"approvals":{"deny":["Read(src/[)"]},"agents":[]}`))
	if want := `approvals.deny[0]: bad approval rule "Read(src/[)": the path segment "[" is not a valid pattern`; err == nil || err.Error() != want {
		t.Fatalf("a bad path rule: %v; want %s", err, want)
	}
	if _, err := parseRoster([]byte(`{"approvals":{"ask":["Bash"]},"agents":[]}`)); err == nil {
		t.Fatal("an unknown approvals field was accepted")
	}
}
