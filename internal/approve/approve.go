// Package approve decides coding agents' permission requests by allow
// and deny rules written in Claude Code's syntax, read as Claude Code
// documents them: a Bash command is parsed as a shell parses it and
// every simple command in it must be allowed, any matching deny rule
// wins, file paths are compared cleaned and absolute, and whatever the
// rules cannot judge is left to a person.
//
// # Rules
//
// A rule is Tool, which covers every use of the tool, or Tool(pattern).
// Tool(*) is Tool. An Edit rule covers every tool that edits files
// (Edit, MultiEdit, Write, NotebookEdit); any other rule covers its own
// tool only.
//
// # Bash
//
// The command is parsed with a Bash parser. Lists, pipelines, &&, ||,
// ;, &, newlines, !, ( ) subshells, { } groups and time are read
// through; a command is allowed only when every simple command in it is
// allowed by an allow rule and nothing in it escapes the rules: no
// variable assignment, no parameter expansion, command or process
// substitution, arithmetic, brace expansion or glob in a command name,
// no redirection other than to and from /dev/null, between descriptors
// (2>&1) and from a here-document or here-string without expansions,
// no loop,
// conditional, function, declaration, [[ ]] or coprocess, and no
// command that runs another (sudo, env, xargs, sh -c, eval, exec, ...)
// unless an allow rule names that command as its first word. Whatever
// does not parse, holds a NUL byte, is longer than [MaxCommandLen],
// nests scripts more than four deep, runs more than 32 scripts within
// or has more than 64 words after a command that runs another is not
// judged either. Bash alone allows every command, except, where a Bash
// deny rule exists, one the rules cannot judge.
//
// A simple command is matched as its words after quote removal, each
// written again with single quotes where it needs them, joined by single
// spaces: "git  'status'" is "git status". A pattern is written the same
// way before matching. In a pattern, * matches any run of characters;
// a pattern ending in :* or in " *" with no other * matches the text
// before it alone or followed by a space and anything: Bash(ls *) and
// Bash(ls:*) match "ls" and "ls -la" but not "lsof", which Bash(ls*)
// matches. timeout, nice and nohup are set aside before an allow rule
// is matched, as Claude Code does.
//
// A deny rule names what must appear, not all that appears. It matches
// a simple command anywhere in the request: inside substitutions, loops
// and functions, after wrappers (sudo, env, command, xargs, find -exec,
// timeout, ...), and inside the scripts of sh -c, eval, su -c, watch and
// ssh, parsed in turn. Its first word matches the command's by base
// name (/bin/rm is rm), its flags are a set the command's flags must
// include in any order or grouping (-rf is -fr, -r -f and, for rm,
// --recursive --force and -R), and each of its other words must match
// some word of the command, a leading ~ read as the home directory. A
// command whose words are not all literal ("$HOME") is matched on those
// that are. A deny rule also matches when its pattern
// matches the whole command as the printer writes it, so
// Bash(curl * | sh) denies "curl -s URL|sh".
//
// # Paths
//
// Read, Edit, Write, MultiEdit and NotebookEdit rules compare the
// request's path, made absolute from the request's working directory
// and cleaned of . and .., against a gitignore-like pattern: //path is
// absolute, ~/path is in the home directory, /path is in the directory
// of the fleet file (a deny rule /path also denies the absolute /path),
// and path or ./path is in the request's working directory. A pattern
// with no slash but a trailing one, such as .env or *.pem/, matches a
// name at any depth below the working directory. * and ? match within
// one path segment, ** any number of segments, and a
// pattern that matches a directory matches everything in it. Symbolic
// links are not resolved. Where a pattern's anchor is unknown (no
// working directory, home or fleet file) an allow rule matches nothing
// and a deny rule matches at any depth. A path starting with ~ is
// checked against deny rules both as the home directory and as a name
// in the working directory, and is never allowed by a pattern.
//
// # Other tools
//
// WebFetch(domain:host) matches a URL whose host matches host; any
// other pattern matches the tool's main input whole ([agent.MainInput]),
// * matching any run of characters and a final :* any text after the
// prefix before it.
package approve

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/fleetstate/fleetstate/internal/agent"
)

// ErrBadRule is the error of a rule that does not parse; the message
// says which rule and why.
var ErrBadRule = errors.New("bad approval rule")

// Bounds.
const (
	// MaxRuleLen bounds one rule.
	MaxRuleLen = 4096
	// MaxCommandLen bounds the Bash command the rules judge: a longer
	// one is left to a person. It keeps the parser's recursion shallow
	// and is well above what an agent writes.
	MaxCommandLen = 32 << 10
	// maxDepth bounds scripts within scripts (sh -c "eval '...'").
	maxDepth = 4
)

// kind is how a rule's pattern is matched.
type kind uint8

const (
	kindAll    kind = iota // Tool alone or Tool(*): every use
	kindBash               // a Bash command pattern
	kindPath               // a file path pattern
	kindDomain             // WebFetch(domain:host)
	kindGlob               // the main input, whole
)

// Rule is one parsed approval rule. The zero Rule covers nothing.
type Rule struct {
	text    string // as written
	tool    string
	pattern string // within the parentheses
	kind    kind
	bash    bashPattern
	path    pathPattern
}

// ParseRule parses s, a rule in Claude Code's syntax; its error wraps
// [ErrBadRule] and quotes s.
func ParseRule(s string) (Rule, error) {
	bad := func(why string) (Rule, error) { return Rule{}, fmt.Errorf("%w %q: %s", ErrBadRule, s, why) }
	if len(s) > MaxRuleLen {
		return bad(fmt.Sprintf("longer than %d bytes", MaxRuleLen))
	}
	tool, rest, paren := strings.Cut(s, "(")
	if tool == "" {
		return bad("want Tool or Tool(pattern), such as Bash(git status *)")
	}
	for _, c := range tool {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return bad(fmt.Sprintf("the tool name %q holds %q: use letters, digits, _, - and . only", tool, c))
		}
	}
	r := Rule{text: s, tool: tool}
	if !paren {
		return r, nil
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
	r.pattern = pattern
	switch {
	case pattern == "*":
		r.kind = kindAll
	case tool == "Bash":
		r.kind, r.bash = kindBash, compileBash(pattern)
	case isFileTool(tool):
		p, err := compilePath(pattern)
		if err != nil {
			return bad(err.Error())
		}
		r.kind, r.path = kindPath, p
	case tool == "WebFetch" && strings.HasPrefix(pattern, "domain:"):
		host := strings.ToLower(strings.TrimPrefix(pattern, "domain:"))
		if host == "" || strings.ContainsAny(host, "/ ") {
			return bad("want domain:host, such as domain:go.dev")
		}
		r.kind, r.pattern = kindDomain, host
	default:
		r.kind = kindGlob
	}
	return r, nil
}

// String returns the rule as written.
func (r Rule) String() string { return r.text }

// isFileTool reports whether tool takes a file path that path rules
// judge.
func isFileTool(tool string) bool {
	switch tool {
	case "Read", "Edit", "Write", "MultiEdit", "NotebookEdit":
		return true
	}
	return false
}

// covers reports whether r applies to a use of tool: its own, or, for an
// Edit rule, any tool that edits files.
func (r Rule) covers(tool string) bool {
	if r.tool == tool {
		return true
	}
	if r.tool == "Edit" {
		switch tool {
		case "MultiEdit", "Write", "NotebookEdit":
			return true
		}
	}
	return false
}

// Request is a use of a tool to decide: the tool's name, its input as
// JSON text and the agent's working directory (absolute, or "" when
// unknown).
type Request struct {
	Tool, Input, Cwd string
}

// Verdict is what the rules say of a [Request].
type Verdict uint8

// Verdicts.
const (
	// Ask leaves the request to a person: no rule decides it.
	Ask Verdict = iota
	// Allow lets the tool run.
	Allow
	// Deny refuses it.
	Deny
)

// String returns "ask", "allow" or "deny".
func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "ask"
}

// Decision is the rules' answer to a [Request]: the verdict, the rules
// that gave it (the deny rule; or one allow rule for each simple command
// allowed), and what it concerns: the denied command, or why the rules
// could not judge.
type Decision struct {
	Verdict Verdict
	Rules   []string
	Detail  string
}

// Set is a fleet's approval rules with what anchors their paths. A zero
// Set asks about every request. A Set is safe for concurrent use once
// no longer changed.
type Set struct {
	Allow, Deny []Rule
	// Home anchors ~/ in path patterns; Root anchors /path, the
	// directory of the file the rules came from. "" leaves them
	// unknown.
	Home, Root string
}

// Decide returns the rules' decision on req: a deny rule that matches
// anything in it first, then allow rules that cover all of it, else a
// person.
func (s *Set) Decide(req Request) Decision {
	switch {
	case req.Tool == "Bash":
		return s.decideBash(req)
	case isFileTool(req.Tool):
		return s.decidePath(req)
	}
	main := agent.MainInput(req.Tool, req.Input)
	match := func(r Rule) bool {
		switch r.kind {
		case kindAll:
			return true
		case kindDomain:
			u, err := url.Parse(main)
			return err == nil && u.Host != "" && glob(r.pattern, strings.ToLower(u.Hostname()))
		case kindGlob:
			if prefix, ok := strings.CutSuffix(r.pattern, ":*"); ok {
				return strings.HasPrefix(main, prefix)
			}
			return glob(r.pattern, main)
		}
		return false
	}
	for _, r := range s.Deny {
		if r.covers(req.Tool) && match(r) {
			return Decision{Verdict: Deny, Rules: []string{r.text}}
		}
	}
	for _, r := range s.Allow {
		if r.covers(req.Tool) && match(r) {
			return Decision{Verdict: Allow, Rules: []string{r.text}}
		}
	}
	return Decision{Detail: "no rule covers it"}
}

// glob reports whether pattern matches s whole, * matching any run of
// characters (a / included).
func glob(pattern, s string) bool {
	// With * the only wildcard, taking each piece between stars at its
	// first place after the one before is never wrong, and costs a
	// scan of s rather than the product of the lengths.
	first, rest, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == s
	}
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	i := strings.LastIndexByte(rest, '*')
	middle, last := "", rest
	if i >= 0 {
		middle, last = rest[:i], rest[i+1:]
	}
	if len(s) < len(last) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[:len(s)-len(last)]
	for piece := range strings.SplitSeq(middle, "*") {
		j := strings.Index(s, piece)
		if j < 0 {
			return false
		}
		s = s[j+len(piece):]
	}
	return true
}
