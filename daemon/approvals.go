package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agent"
)

// Approvals is what the fleet file says of the members' permission
// requests (the "approvals" object): rules that decide some without
// asking, in Claude Code's own syntax, and whether leads may decide.
//
// A rule is Tool, which matches every use of the tool, or Tool(pattern),
// which matches a use whose main input the pattern matches whole: the
// command of Bash, the file_path of Read, Edit, MultiEdit and Write, the
// notebook_path of NotebookEdit, the url of WebFetch, and the whole input
// as JSON for any other tool. In a pattern, * matches any run of
// characters, and a pattern ending in :* (Claude Code's prefix form)
// matches what starts with the text before it. A deny rule wins over an
// allow rule; a request no rule matches waits for a person.
type Approvals struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Leads lets lead agents decide (fleet_approve, and the lead's token
	// on the permissions endpoint); the operator always may.
	Leads bool `json:"leads,omitempty"`

	allow, deny []rule // parsed by validate
}

// ErrBadRule is the error of a fleet file's approval rule that does not
// parse; the message says which rule and why.
var ErrBadRule = errors.New("bad approval rule")

// maxRuleLen bounds one rule.
const maxRuleLen = 4096

// rule is one parsed approval rule.
type rule struct {
	text    string // as written
	tool    string
	pattern string // without the parentheses; "" with all set
	all     bool   // Tool alone: every use
}

// parseRule parses s, a rule in Claude Code's syntax.
func parseRule(s string) (rule, error) {
	bad := func(why string) (rule, error) { return rule{}, fmt.Errorf("%w %q: %s", ErrBadRule, s, why) }
	if len(s) > maxRuleLen {
		return bad(fmt.Sprintf("longer than %d bytes", maxRuleLen))
	}
	tool, rest, paren := strings.Cut(s, "(")
	if tool == "" {
		return bad("want Tool or Tool(pattern), such as Bash(git status*)")
	}
	for _, c := range tool {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return bad(fmt.Sprintf("the tool name %q holds %q: use letters, digits, _, - and . only", tool, c))
		}
	}
	if !paren {
		return rule{text: s, tool: tool, all: true}, nil
	}
	pattern, ok := strings.CutSuffix(rest, ")")
	if !ok {
		return bad("the pattern's ( has no closing ) at the end")
	}
	if pattern == "" {
		return bad("an empty pattern matches nothing: write Tool alone for every use")
	}
	for _, c := range pattern {
		if c < ' ' || c == 0x7f {
			return bad("the pattern holds a control character")
		}
	}
	return rule{text: s, tool: tool, pattern: pattern}, nil
}

// matches reports whether r covers a use of tool with input, the tool's
// input as JSON text.
func (r rule) matches(tool, input string) bool {
	if r.tool != tool {
		return false
	}
	return r.all || glob(r.pattern, agent.MainInput(tool, input))
}

// glob reports whether pattern matches s whole, * matching any run of
// characters, and a final :* any text after the prefix before it.
func glob(pattern, s string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ":*"); ok {
		return strings.HasPrefix(s, prefix)
	}
	// The classic linear matcher: on a mismatch, go back to the last *
	// and let it take one more byte.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// validate parses every rule; an error names the rule's place.
func (a *Approvals) validate() error {
	a.allow, a.deny = nil, nil
	for _, set := range []struct {
		key   string
		texts []string
		into  *[]rule
	}{{"allow", a.Allow, &a.allow}, {"deny", a.Deny, &a.deny}} {
		for i, text := range set.texts {
			r, err := parseRule(text)
			if err != nil {
				return fmt.Errorf("approvals.%s[%d]: %w", set.key, i, err)
			}
			*set.into = append(*set.into, r)
		}
	}
	return nil
}

// policy returns the rendezvous's policy of a's rules, or nil when there
// are none.
func (a *Approvals) policy() fleetstate.PermissionPolicy {
	if a == nil || len(a.allow)+len(a.deny) == 0 {
		return nil
	}
	return func(req fleetstate.PermissionRequest) (fleetstate.Decision, bool) {
		return a.decide(req.Tool, req.Input)
	}
}

// decide returns the decision of a's rules on a use of tool with input:
// a deny rule first, then an allow rule.
func (a *Approvals) decide(tool, input string) (fleetstate.Decision, bool) {
	for _, r := range a.deny {
		if r.matches(tool, input) {
			return fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, By: "rule " + r.text,
				Message: "the fleet file's rule " + r.text + " denies this"}, true
		}
	}
	for _, r := range a.allow {
		if r.matches(tool, input) {
			return fleetstate.Decision{Behavior: fleetstate.BehaviorAllow, By: "rule " + r.text}, true
		}
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
		st.rv.SetPermissionPolicy(a.policy())
		st.leadsDecide.Store(a.Leads)
	}
	return nil
}
