package daemon

import (
	"fmt"
	"os"
	"strings"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/approve"
)

// Approvals is what the fleet file says of the members' permission
// requests (the "approvals" object): rules that decide some without
// asking, in Claude Code's syntax, and whether leads may decide.
//
// A rule is Tool, which matches every use of the tool, or Tool(pattern).
// A Bash command is parsed as a shell parses it: it is allowed only when
// an allow rule covers every simple command in it and nothing in it
// (a substitution, an expansion, a redirection to a file, a loop, a
// command that runs another) escapes the rules; a deny rule that
// matches any command in it, however spelled, wins. File rules compare
// cleaned absolute paths, /path being in the fleet file's directory.
// A request no rule decides waits for a person. Package
// internal/approve holds the full semantics.
type Approvals struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Leads lets lead agents decide (fleet_approve, and the lead's token
	// on the permissions endpoint); the operator always may.
	Leads bool `json:"leads,omitempty"`

	rules approve.Set // parsed by validate; Home and Root set by policy
}

// ErrBadRule is the error of a fleet file's approval rule that does not
// parse; the message says which rule and why.
var ErrBadRule = approve.ErrBadRule

// validate parses every rule; an error names the rule's place.
func (a *Approvals) validate() error {
	a.rules = approve.Set{}
	for _, set := range []struct {
		key   string
		texts []string
		into  *[]approve.Rule
	}{{"allow", a.Allow, &a.rules.Allow}, {"deny", a.Deny, &a.rules.Deny}} {
		for i, text := range set.texts {
			r, err := approve.ParseRule(text)
			if err != nil {
				return fmt.Errorf("approvals.%s[%d]: %w", set.key, i, err)
			}
			*set.into = append(*set.into, r)
		}
	}
	return nil
}

// policy returns the rendezvous's policy of a's rules, or nil when there
// are none: root is the fleet file's directory, home the home directory
// (either "" when unknown).
func (a *Approvals) policy(root, home string) fleetstate.PermissionPolicy {
	if a == nil || len(a.rules.Allow)+len(a.rules.Deny) == 0 {
		return nil
	}
	a.rules.Root, a.rules.Home = root, home
	return func(req fleetstate.PermissionRequest) (fleetstate.Decision, bool) {
		return a.decide(req.Tool, req.Input, req.Cwd)
	}
}

// decide returns the decision of a's rules on a use of tool with input
// in the working directory cwd: a deny rule that matches anything in
// it first, then allow rules that cover all of it.
func (a *Approvals) decide(tool, input, cwd string) (fleetstate.Decision, bool) {
	d := a.rules.Decide(approve.Request{Tool: tool, Input: input, Cwd: cwd})
	by := "rule " + strings.Join(d.Rules, ", ")
	if len(d.Rules) > 1 {
		by = "rules " + strings.Join(d.Rules, ", ")
	}
	switch d.Verdict {
	case approve.Deny:
		msg := "the fleet file's rule " + d.Rules[0] + " denies this"
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		return fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, By: by, Message: msg}, true
	case approve.Allow:
		return fleetstate.Decision{Behavior: fleetstate.BehaviorAllow, By: by}, true
	}
	return fleetstate.Decision{}, false
}

// applyApprovals gives st's rendezvous the rules of the fleet file's
// approvals, if the daemon has a fleet file, and says whether leads
// decide.
func (d *Daemon) applyApprovals(st *state) error {
	if d.cfg.Roster == "" {
		return nil
	}
	ro, err := LoadRoster(d.cfg.Roster, "")
	if err != nil {
		return err
	}
	if a := ro.Approvals; a != nil {
		home, _ := os.UserHomeDir()
		st.rv.SetPermissionPolicy(a.policy(ro.base, home))
		st.leadsDecide.Store(a.Leads)
	}
	return nil
}
