package approve

import (
	"fmt"
	"path"
	"strings"
)

// anchor is the directory a path pattern is written from.
type anchor uint8

const (
	anchorCwd  anchor = iota // path, ./path: the request's working directory
	anchorAbs                // //path: the root of the file system
	anchorHome               // ~/path: the home directory
	anchorRoot               // /path: the directory of the fleet file
)

// pathPattern is a compiled file path pattern.
type pathPattern struct {
	anchor   anchor
	rel      string // the pattern below its anchor, cleaned
	floating bool   // no slash: matches a name at any depth
}

// compilePath compiles p, a Read, Edit, Write, MultiEdit or
// NotebookEdit rule's pattern.
func compilePath(p string) (pathPattern, error) {
	var pp pathPattern
	switch {
	case strings.HasPrefix(p, "//"):
		pp.anchor, p = anchorAbs, p[2:]
	case p == "~" || strings.HasPrefix(p, "~/"):
		pp.anchor, p = anchorHome, strings.TrimPrefix(p[1:], "/")
	case strings.HasPrefix(p, "~"):
		return pp, fmt.Errorf("~user is not supported: write ~/path or //path")
	case strings.HasPrefix(p, "/"):
		pp.anchor, p = anchorRoot, p[1:]
	case strings.HasPrefix(p, "./"):
		p = p[2:]
	default:
		pp.floating = !strings.Contains(strings.TrimRight(p, "/"), "/")
	}
	p = strings.TrimRight(p, "/")
	for _, seg := range strings.Split(p, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return pp, fmt.Errorf("the path segment %q is not a valid pattern", seg)
		}
	}
	pp.rel = p
	return pp, nil
}

// match reports whether pp matches p, a clean absolute path, or a
// directory above it. deny widens a pattern whose anchor is unknown to
// any depth, and makes /path also mean the absolute /path.
func (pp pathPattern) match(p, cwd, home, root string, deny bool) bool {
	var bases []string
	known := func(dir string) {
		if path.IsAbs(dir) {
			bases = append(bases, path.Clean(dir))
		}
	}
	switch pp.anchor {
	case anchorAbs:
		bases = []string{"/"}
	case anchorHome:
		known(home)
	case anchorRoot:
		known(root)
		if deny {
			bases = append(bases, "/")
		}
	case anchorCwd:
		known(cwd)
	}
	floating := pp.floating
	if len(bases) == 0 {
		if !deny {
			return false
		}
		bases, floating = []string{"/"}, true
	}
	for _, b := range bases {
		pat := b + "/" + pp.rel
		if floating {
			pat = b + "/**/" + pp.rel
		}
		if matchTree(path.Clean(pat), p) {
			return true
		}
	}
	return false
}

// matchTree reports whether pattern, clean and absolute, matches p or a
// directory above it: * and ? within a segment, ** any run of segments.
func matchTree(pattern, p string) bool {
	ps, ns := segments(pattern), segments(p)
	// prev[j]: pattern segments so far match ns[:j].
	prev := make([]bool, len(ns)+1)
	cur := make([]bool, len(ns)+1)
	prev[0] = true
	for _, seg := range ps {
		for j := range cur {
			switch {
			case seg == "**":
				cur[j] = prev[j] || j > 0 && cur[j-1]
			case j == 0:
				cur[j] = false
			default:
				ok, _ := path.Match(seg, ns[j-1])
				cur[j] = prev[j-1] && ok
			}
		}
		prev, cur = cur, prev
	}
	for _, ok := range prev {
		if ok {
			return true
		}
	}
	return false
}

// segments splits p, clean and absolute, into its names.
func segments(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// decidePath decides a request of a tool that takes a file path.
func (s *Set) decidePath(req Request) Decision {
	for _, r := range s.Deny {
		if r.covers(req.Tool) && r.kind == kindAll {
			return Decision{Verdict: Deny, Rules: []string{r.text}}
		}
	}
	field := "file_path"
	if req.Tool == "NotebookEdit" {
		field = "notebook_path"
	}
	p, ok := stringField(req.Input, field)
	var cands []string // the paths the request may mean
	why := ""
	switch {
	case !ok || p == "":
		why = "the request names no " + field
	case strings.IndexByte(p, 0) >= 0:
		why = "the path holds a NUL byte"
	case strings.HasPrefix(p, "~"):
		why = "the path starts with ~"
		if s.Home != "" {
			cands = append(cands, path.Clean(expandTilde(p, s.Home)))
		}
		if path.IsAbs(req.Cwd) {
			cands = append(cands, path.Clean(req.Cwd+"/"+p))
		}
	case path.IsAbs(p):
		cands = append(cands, path.Clean(p))
	case path.IsAbs(req.Cwd):
		cands = append(cands, path.Clean(req.Cwd+"/"+p))
	default:
		why = "a relative path without a working directory"
	}
	denies := false
	for _, r := range s.Deny {
		if !r.covers(req.Tool) || r.kind != kindPath {
			continue
		}
		denies = true
		for _, c := range cands {
			if r.path.match(c, req.Cwd, s.Home, s.Root, true) {
				return Decision{Verdict: Deny, Rules: []string{r.text}, Detail: c}
			}
		}
	}
	for _, r := range s.Allow {
		if r.covers(req.Tool) && r.kind == kindAll && (why == "" || !denies) {
			return Decision{Verdict: Allow, Rules: []string{r.text}}
		}
	}
	if why != "" {
		return Decision{Detail: why}
	}
	for _, r := range s.Allow {
		if r.covers(req.Tool) && r.kind == kindPath && r.path.match(cands[0], req.Cwd, s.Home, s.Root, false) {
			return Decision{Verdict: Allow, Rules: []string{r.text}}
		}
	}
	return Decision{Detail: "no rule allows " + cands[0]}
}
