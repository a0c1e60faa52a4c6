package approve

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// runners are commands that run another command or a script named in
// their arguments. An allow rule covers one only when the rule's first
// word is that command as written, and a deny rule looks for its
// command at every word after one that is not spelled as a flag.
var runners = map[string]bool{
	".": true, "ash": true, "bash": true, "builtin": true, "busybox": true,
	"chroot": true, "chrt": true, "command": true, "csh": true, "dash": true,
	"doas": true, "env": true, "eval": true, "exec": true, "find": true,
	"fish": true, "flock": true, "ionice": true, "ksh": true, "ltrace": true,
	"mksh": true, "nice": true, "nohup": true, "nsenter": true,
	"parallel": true, "runuser": true, "setsid": true, "sh": true,
	"source": true, "ssh": true, "stdbuf": true, "strace": true, "su": true,
	"sudo": true, "taskset": true, "tcsh": true, "time": true,
	"timeout": true, "unshare": true, "watch": true, "xargs": true,
	"zsh": true,
}

// shells run the script after their -c flag.
var shells = map[string]bool{
	"ash": true, "bash": true, "busybox": true, "csh": true, "dash": true,
	"fish": true, "ksh": true, "mksh": true, "sh": true, "tcsh": true,
	"zsh": true,
}

// synonyms maps a command's long flags, and short ones that mean the
// same as another, to the short flag a deny rule compares.
var synonyms = map[string]map[string]byte{
	"rm":    {"R": 'r', "recursive": 'r', "force": 'f', "dir": 'd'},
	"cp":    {"R": 'r', "recursive": 'r', "force": 'f'},
	"chmod": {"recursive": 'R'},
	"chown": {"recursive": 'R'},
	"git":   {"force": 'f'},
}

// bashPattern is a compiled Bash rule pattern.
type bashPattern struct {
	text   string // written as commands are (see render), for a simple command
	whole  string // as the printer writes it, for a whole command
	prefix bool   // :* or a single trailing " *": text alone or text and more words
	name   string // the first word when it holds no *
	deny   *denyPattern
}

// denyPattern is a Bash pattern read as words: a command name, flags
// and other words, for deny rules.
type denyPattern struct {
	name     string // glob on the command's base name
	short    map[byte]bool
	long     map[string]bool
	operands []string // globs, each to match some word after the name
}

// compileBash compiles p, a Bash rule's pattern.
func compileBash(p string) bashPattern {
	core, prefix := p, false
	if c, ok := strings.CutSuffix(p, ":*"); ok {
		core, prefix = c, true
	} else if c, ok := strings.CutSuffix(p, " *"); ok && strings.Count(p, "*") == 1 {
		core, prefix = c, true
	}
	bp := bashPattern{prefix: prefix, text: strings.Join(strings.Fields(core), " "), whole: printScript(core)}
	words, ok := patternWords(core)
	if !ok || len(words) == 0 {
		return bp
	}
	bp.text = render(words)
	if !strings.Contains(words[0], "*") {
		bp.name = words[0]
	}
	d := &denyPattern{name: base(words[0]), short: map[byte]bool{}, long: map[string]bool{}}
	syn := synonyms[d.name]
	for _, w := range words[1:] {
		if w != "--" && strings.HasPrefix(w, "-") && len(w) > 1 && !strings.Contains(w, "*") {
			addFlag(w, syn, d.short, d.long)
			continue
		}
		if w != "--" {
			d.operands = append(d.operands, w)
		}
	}
	bp.deny = d
	return bp
}

// matchText reports whether text, a command as render or printScript
// writes it, matches pattern, bp.text or bp.whole.
func (bp *bashPattern) matchText(pattern, text string) bool {
	if bp.prefix {
		return glob(pattern, text) || glob(pattern+" *", text)
	}
	return glob(pattern, text)
}

// patternWords returns the words of p, a pattern, when it is one simple
// command of literal words (a * counts as literal).
func patternWords(p string) ([]string, bool) {
	f, err := parse(p)
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	st := f.Stmts[0]
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(st.Redirs) > 0 || len(c.Assigns) > 0 || st.Negated || st.Background {
		return nil, false
	}
	var words []string
	for _, w := range c.Args {
		wi := wordOf(w)
		if !wi.lit {
			return nil, false
		}
		words = append(words, wi.s)
	}
	return words, true
}

// parse parses src as Bash.
func parse(src string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
}

// printScript returns src as the printer writes it, one line per
// statement joined by "; ", or src with its runs of spaces made one
// when it does not parse.
func printScript(src string) string {
	f, err := parse(src)
	if err != nil {
		return strings.Join(strings.Fields(src), " ")
	}
	return printNode(f)
}

// printNode returns n as the printer writes it on one line.
func printNode(n syntax.Node) string {
	var b strings.Builder
	if syntax.NewPrinter(syntax.SingleLine(true)).Print(&b, n) != nil {
		return ""
	}
	return strings.TrimSpace(b.String())
}

// render writes words as a command whose words are words: each as it
// is where it holds only ordinary characters, else in single quotes;
// joined by single spaces.
func render(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,*~^") == "" {
			b.WriteString(w)
			continue
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// base returns the last element of a command name: rm of /bin/rm.
func base(name string) string {
	if name == "" || !strings.Contains(name, "/") {
		return name
	}
	return path.Base(name)
}

// addFlag adds s, a word spelled as a flag, to short (each letter of
// -abc) or long (--name, without =value), through syn.
func addFlag(s string, syn map[string]byte, short map[byte]bool, long map[string]bool) {
	if name, ok := strings.CutPrefix(s, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		if c, ok := syn[name]; ok {
			short[c] = true
		} else if name != "" {
			long[name] = true
		}
		return
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if m, ok := syn[string(c)]; ok {
			c = m
		}
		short[c] = true
	}
}

// word is one word of a command.
type word struct {
	s     string       // the value after quote removal, when lit
	node  *syntax.Word // as parsed; nil for a word of loose
	lit   bool         // no expansion can change it
	glob  bool         // holds an unquoted *, ? or [
	brace bool         // may be a brace expansion
	tilde bool         // starts with an unquoted ~
}

// wordOf reads w.
func wordOf(w *syntax.Word) word {
	out := word{lit: true, node: w}
	var val, unq strings.Builder // unq: the unquoted characters, others as _
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				out.tilde = true
			}
			for j := 0; j < len(v); j++ {
				c := v[j]
				if c == '\\' && j+1 < len(v) {
					j++
					if v[j] != '\n' {
						val.WriteByte(v[j])
						unq.WriteByte('_')
					}
					continue
				}
				if c == '*' || c == '?' || c == '[' {
					out.glob = true
				}
				val.WriteByte(c)
				unq.WriteByte(c)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				out.lit = false
			}
			val.WriteString(p.Value)
			unq.WriteByte('_')
		case *syntax.DblQuoted:
			if p.Dollar {
				out.lit = false
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					out.lit = false
					continue
				}
				v := l.Value
				for j := 0; j < len(v); j++ {
					if v[j] == '\\' && j+1 < len(v) && strings.IndexByte("$`\"\\\n", v[j+1]) >= 0 {
						j++
						if v[j] == '\n' {
							continue
						}
					}
					val.WriteByte(v[j])
				}
			}
			unq.WriteByte('_')
		default:
			out.lit = false
			unq.WriteByte('_')
		}
	}
	u := unq.String()
	if o := strings.IndexByte(u, '{'); o >= 0 && strings.IndexByte(u[o:], '}') >= 0 &&
		(strings.Contains(u[o:], ",") || strings.Contains(u[o:], "..")) {
		out.brace = true
	}
	out.s = val.String()
	if !out.lit {
		out.s = ""
	}
	return out
}

// Bounds of the work one command costs: each script within is parsed
// in turn, and each word after a runner may be a command.
const (
	maxScripts   = 32 // scripts within the command
	maxPositions = 64 // words that may name a command, in one simple command
)

// source returns w as written, shortened to 100 bytes, for a person.
func (w word) source() string {
	s := w.s
	if w.node != nil {
		s = printNode(w.node)
	}
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

// analysis is what the rules need of a Bash command.
type analysis struct {
	all     []simple   // every simple command, at any depth: for deny rules
	top     [][]string // the simple commands allow rules must cover
	wholes  []string   // the command and the scripts within, printed
	why     string     // why allow rules cannot judge it; "" when they can
	scripts int        // scripts within read so far
}

// simple is a simple command's words and the indexes of those that may
// name a command (see commandPositions).
type simple struct {
	words []word
	pos   []int
}

// analyze reads cmd.
func analyze(cmd string) *analysis {
	a := &analysis{}
	a.script(cmd, 0, true)
	if a.why == "" && len(a.top) == 0 {
		a.why = "it runs no command"
	}
	return a
}

// cannot records why allow rules cannot judge the command, keeping the
// first reason.
func (a *analysis) cannot(why string) {
	if a.why == "" {
		a.why = why
	}
}

// script reads src, a script at depth; top says whether its commands
// are those allow rules must cover.
func (a *analysis) script(src string, depth int, top bool) {
	if depth > 0 {
		a.scripts++
	}
	switch {
	case depth > maxDepth:
		a.cannot("scripts nest too deep")
		a.loose(src)
		return
	case a.scripts > maxScripts:
		a.cannot(fmt.Sprintf("it runs more than %d scripts within", maxScripts))
		return
	case len(src) > MaxCommandLen:
		a.cannot(fmt.Sprintf("it is longer than %d bytes", MaxCommandLen))
		a.loose(src)
		return
	case strings.IndexByte(src, 0) >= 0:
		a.cannot("it holds a NUL byte")
		a.loose(src)
		return
	}
	f, err := parse(src)
	if err != nil {
		a.cannot("it does not parse as a shell command")
		a.loose(src)
		return
	}
	a.wholes = append(a.wholes, printNode(f))
	if top {
		for _, st := range f.Stmts {
			a.stmt(st)
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok {
			a.call(c, depth)
		}
		return true
	})
}

// loose reads src, which does not parse, for deny rules alone: its
// pieces between operators, quotes and escapes dropped, as commands.
func (a *analysis) loose(src string) {
	if len(src) > 4*MaxCommandLen {
		src = src[:4*MaxCommandLen]
	}
	pieces := strings.FieldsFunc(src, func(r rune) bool { return strings.ContainsRune(";&|()`\n<>{}$\x00", r) })
	unquote := strings.NewReplacer(`'`, "", `"`, "", `\`, "")
	for _, piece := range pieces {
		var words []word
		for _, f := range strings.Fields(unquote.Replace(piece)) {
			words = append(words, word{s: f, lit: true})
		}
		if len(words) > 0 {
			a.all = append(a.all, simple{words: words, pos: a.positions(words)})
		}
	}
	a.wholes = append(a.wholes, strings.Join(strings.Fields(src), " "))
}

// stmt reads st, a statement allow rules must cover.
func (a *analysis) stmt(st *syntax.Stmt) {
	for _, r := range st.Redirs {
		a.redirect(r)
	}
	if st.Coprocess || st.Disown {
		a.cannot("a coprocess")
	}
	switch c := st.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		a.topCall(c)
	case *syntax.BinaryCmd:
		a.stmt(c.X)
		a.stmt(c.Y)
	case *syntax.Subshell:
		for _, s := range c.Stmts {
			a.stmt(s)
		}
	case *syntax.Block:
		for _, s := range c.Stmts {
			a.stmt(s)
		}
	case *syntax.TimeClause:
		if c.Stmt != nil {
			a.stmt(c.Stmt)
		}
	case *syntax.IfClause, *syntax.CaseClause:
		a.cannot("a conditional")
	case *syntax.WhileClause, *syntax.ForClause:
		a.cannot("a loop")
	case *syntax.FuncDecl:
		a.cannot("a function definition")
	case *syntax.DeclClause, *syntax.LetClause:
		a.cannot("a declaration")
	default:
		a.cannot("a construct the rules do not judge")
	}
}

// topCall reads c, a simple command allow rules must cover.
func (a *analysis) topCall(c *syntax.CallExpr) {
	if len(c.Assigns) > 0 {
		a.cannot("a variable assignment")
		return
	}
	words := make([]string, 0, len(c.Args))
	for i, w := range c.Args {
		wi := wordOf(w)
		switch {
		case !wi.lit:
			a.cannot("an expansion or substitution: " + wi.source())
			return
		case wi.brace:
			a.cannot("a brace expansion: " + wi.source())
			return
		case i == 0 && wi.glob:
			a.cannot("a pattern in a command name: " + wi.source())
			return
		}
		words = append(words, wi.s)
	}
	if len(words) > 0 {
		a.top = append(a.top, words)
	}
}

// redirect reads r, a redirection of a statement allow rules must
// cover: only to and from /dev/null, between descriptors and from a
// here-document without expansions are judged.
func (a *analysis) redirect(r *syntax.Redirect) {
	if r.N != nil && !isDigits(r.N.Value) {
		a.cannot("a redirection with a named descriptor")
		return
	}
	target := ""
	if r.Word != nil {
		wi := wordOf(r.Word)
		if !wi.lit || wi.glob || wi.brace {
			a.cannot("a redirection to an expansion: " + wi.source())
			return
		}
		target = wi.s
	}
	switch r.Op {
	case syntax.DplOut, syntax.DplIn:
		if target == "-" || isDigits(target) {
			return
		}
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrIn:
		if target == "/dev/null" {
			return
		}
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil || wordOf(r.Hdoc).lit {
			return
		}
		a.cannot("a here-document with expansions")
		return
	case syntax.WordHdoc:
		return
	}
	n := ""
	if r.N != nil {
		n = r.N.Value
	}
	a.cannot("a redirection to or from a file: " + n + r.Op.String() + target)
}

// isDigits reports whether s is a file descriptor's number.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// call reads c, a simple command anywhere in the request, for deny
// rules, and the scripts it runs.
func (a *analysis) call(c *syntax.CallExpr, depth int) {
	words := make([]word, len(c.Args))
	for i, w := range c.Args {
		words[i] = wordOf(w)
	}
	if len(words) == 0 {
		return
	}
	positions := a.positions(words)
	a.all = append(a.all, simple{words: words, pos: positions})
	for _, pos := range positions {
		name := base(words[pos].s)
		rest := words[pos+1:]
		switch {
		case shells[name]:
			for j, w := range rest {
				if !w.lit || w.s == "--" || !strings.HasPrefix(w.s, "-") {
					break
				}
				if !strings.HasPrefix(w.s, "--") && strings.Contains(w.s, "c") {
					a.embedded(rest[j+1:j+min(2, len(rest)-j)], depth)
					break
				}
			}
		case name == "su":
			for j, w := range rest {
				if w.s == "-c" || w.s == "--command" {
					a.embedded(rest[j+1:j+min(2, len(rest)-j)], depth)
				} else if s, ok := strings.CutPrefix(w.s, "--command="); ok && w.lit {
					a.script(s, depth+1, false)
				}
			}
		case name == "eval":
			a.embedded(rest, depth)
		case name == "watch":
			for len(rest) > 0 && strings.HasPrefix(rest[0].s, "-") {
				if rest[0].s == "-n" || rest[0].s == "--interval" {
					rest = rest[min(1, len(rest)-1):]
				}
				rest = rest[1:]
			}
			a.embedded(rest, depth)
		case name == "ssh":
			for _, w := range rest {
				if w.lit && strings.ContainsAny(w.s, " \t\n;&|") {
					a.script(w.s, depth+1, false)
				}
			}
		}
	}
}

// embedded reads words, joined by spaces, as a script a command runs.
func (a *analysis) embedded(words []word, depth int) {
	if len(words) == 0 {
		return
	}
	if a.scripts >= maxScripts {
		a.cannot(fmt.Sprintf("it runs more than %d scripts within", maxScripts))
		return
	}
	parts := make([]string, len(words))
	for i, w := range words {
		if !w.lit {
			a.cannot("a script that is not literal: " + w.source())
			return
		}
		parts[i] = w.s
	}
	a.script(strings.Join(parts, " "), depth+1, false)
}

// positions returns commandPositions(words), at most maxPositions of
// them: a command with more cannot be judged.
func (a *analysis) positions(words []word) []int {
	pos := commandPositions(words)
	if len(pos) > maxPositions {
		a.cannot(fmt.Sprintf("more than %d words after a command that runs another", maxPositions))
		pos = pos[:maxPositions]
	}
	return pos
}

// commandPositions returns the indexes of words that may name a command
// to run: the first, and, after a runner, every later word not spelled
// as a flag.
func commandPositions(words []word) []int {
	pos := []int{0}
	if !words[0].lit || !runners[base(words[0].s)] {
		return pos
	}
	for j := 1; j < len(words); j++ {
		if words[j].lit && !strings.HasPrefix(words[j].s, "-") {
			pos = append(pos, j)
		}
	}
	return pos
}

// denies reports whether d matches the command words[pos:]; home
// expands a leading ~ of an operand.
func (d *denyPattern) denies(words []word, pos int, home string) bool {
	w := words[pos]
	if !w.lit || !glob(d.name, base(w.s)) {
		return false
	}
	rest := words[pos+1:]
	if len(d.short)+len(d.long) > 0 {
		syn := synonyms[base(w.s)]
		short, long := map[byte]bool{}, map[string]bool{}
		for _, x := range rest {
			if !x.lit {
				continue
			}
			if x.s == "--" {
				break
			}
			if strings.HasPrefix(x.s, "-") && len(x.s) > 1 {
				addFlag(x.s, syn, short, long)
			}
		}
		for c := range d.short {
			if !short[c] {
				return false
			}
		}
		for l := range d.long {
			if !long[l] {
				return false
			}
		}
	}
	for _, op := range d.operands {
		found := false
		for _, x := range rest {
			if x.lit && (glob(op, x.s) || x.tilde && home != "" && glob(op, expandTilde(x.s, home))) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// expandTilde returns s with a leading ~ or ~/ made home.
func expandTilde(s, home string) string {
	if s == "~" || strings.HasPrefix(s, "~/") {
		return home + s[1:]
	}
	return s
}

// decideBash decides a Bash request.
func (s *Set) decideBash(req Request) Decision {
	var denyRules, allowAll []Rule
	for _, r := range s.Deny {
		if r.tool != "Bash" {
			continue
		}
		if r.kind == kindAll {
			return Decision{Verdict: Deny, Rules: []string{r.text}}
		}
		denyRules = append(denyRules, r)
	}
	for _, r := range s.Allow {
		if r.tool == "Bash" && r.kind == kindAll {
			allowAll = append(allowAll, r)
		}
	}
	cmd, ok := stringField(req.Input, "command")
	if !ok {
		return Decision{Detail: "the request names no command"}
	}
	a := analyze(cmd)
	for _, r := range denyRules {
		if detail, ok := s.bashDenies(r, a); ok {
			return Decision{Verdict: Deny, Rules: []string{r.text}, Detail: detail}
		}
	}
	if len(allowAll) > 0 && (a.why == "" || len(denyRules) == 0) {
		return Decision{Verdict: Allow, Rules: []string{allowAll[0].text}}
	}
	if a.why != "" {
		return Decision{Detail: a.why}
	}
	var used []string
	for _, words := range a.top {
		r, ok := s.allowsCall(words, 0)
		if !ok {
			return Decision{Detail: "no rule allows " + render(words)}
		}
		if !slices.Contains(used, r) {
			used = append(used, r)
		}
	}
	return Decision{Verdict: Allow, Rules: used}
}

// bashDenies reports whether r, a Bash deny rule, matches anything in a,
// and what.
func (s *Set) bashDenies(r Rule, a *analysis) (string, bool) {
	bp := &r.bash
	for _, whole := range a.wholes {
		if bp.matchText(bp.whole, whole) {
			return whole, true
		}
	}
	for _, c := range a.all {
		for _, pos := range c.pos {
			if bp.deny != nil && bp.deny.denies(c.words, pos, s.Home) {
				return display(c.words[pos:]), true
			}
			if lits, ok := literals(c.words[pos:]); ok && bp.matchText(bp.text, render(lits)) {
				return render(lits), true
			}
		}
	}
	return "", false
}

// allowsCall returns the allow rule that covers words, a simple command
// at a depth of wrappers set aside.
func (s *Set) allowsCall(words []string, depth int) (string, bool) {
	text := render(words)
	runner := runners[base(words[0])]
	for _, r := range s.Allow {
		if r.tool != "Bash" || r.kind != kindBash {
			continue
		}
		if runner && r.bash.name != words[0] {
			continue
		}
		if r.bash.matchText(r.bash.text, text) {
			return r.text, true
		}
	}
	if inner := strip(words); inner != nil && depth < maxDepth {
		return s.allowsCall(inner, depth+1)
	}
	return "", false
}

// strip returns the command timeout, nice or nohup runs in words, or nil
// when words is none of them or holds an option strip does not know.
func strip(words []string) []string {
	i := 1
	switch base(words[0]) {
	case "nohup":
	case "nice":
		for i < len(words) && strings.HasPrefix(words[i], "-") {
			switch w := words[i]; {
			case w == "-n" || w == "--adjustment":
				i += 2
			case strings.HasPrefix(w, "-n") || strings.HasPrefix(w, "--adjustment=") || isDigits(w[1:]):
				i++
			default:
				return nil
			}
		}
	case "timeout":
		for i < len(words) && strings.HasPrefix(words[i], "-") {
			switch w := words[i]; {
			case w == "--preserve-status" || w == "--foreground" || w == "-v" || w == "--verbose":
				i++
			case w == "-s" || w == "-k" || w == "--signal" || w == "--kill-after":
				i += 2
			case strings.HasPrefix(w, "-s") || strings.HasPrefix(w, "-k") ||
				strings.HasPrefix(w, "--signal=") || strings.HasPrefix(w, "--kill-after="):
				i++
			default:
				return nil
			}
		}
		if i >= len(words) || !isDuration(words[i]) {
			return nil
		}
		i++
	default:
		return nil
	}
	if i >= len(words) || strings.HasPrefix(words[i], "-") {
		return nil
	}
	return words[i:]
}

// isDuration reports whether s is a duration timeout takes: a number
// with an optional s, m, h or d.
func isDuration(s string) bool {
	s = strings.TrimRight(s, "smhd")
	return s != "" && strings.Trim(s, "0123456789.") == ""
}

// literals returns the values of words when all are literal.
func literals(words []word) ([]string, bool) {
	out := make([]string, len(words))
	for i, w := range words {
		if !w.lit {
			return nil, false
		}
		out[i] = w.s
	}
	return out, true
}

// display writes words for a person: literal words as render writes
// them, others as written.
func display(words []word) string {
	parts := make([]string, len(words))
	for i, w := range words {
		if w.lit {
			parts[i] = render([]string{w.s})
		} else {
			parts[i] = w.source()
		}
	}
	return strings.Join(parts, " ")
}

// stringField returns the string field name of input, a JSON object.
func stringField(input, name string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(input), &m) != nil {
		return "", false
	}
	var s string
	if json.Unmarshal(m[name], &s) != nil {
		return "", false
	}
	return s, true
}
