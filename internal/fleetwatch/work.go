package fleetwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/textsafe"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// Worktrees is implemented by [Actions] that can read a member's work
// tree and merge its branch into the lead's checkout.
type Worktrees interface {
	// Changes returns what member's work tree holds for the lead; an
	// error that is [ErrNoWorktree] says the member has none.
	Changes(ctx context.Context, member string) (worktree.Changes, error)
	// Merge merges member's branch into the lead's checkout. A refusal
	// is a result with Merged false and nothing changed, not an error.
	Merge(ctx context.Context, member, commit string) (daemon.Merge, error)
}

// ErrNoWorktree says that a member has no work tree of its own, or that
// the daemon serves none.
var ErrNoWorktree = errors.New("no work tree")

// Bounds of the work tree's view.
const (
	// mergeTimeout bounds a merge: the fleet file's check runs on the
	// merged result, and with its merge approval the merge waits for a
	// person's decision, as long as fleetstate merge waits.
	mergeTimeout = 10*time.Minute + 30*time.Second
	// maxFileRows is how many changed files the view lists when it does
	// not know its height.
	maxFileRows = 12
	// minEventRows is how many lines of events the changed files leave.
	minEventRows = 3
	// maxCheckLines is how many lines of a failed check's output the
	// view shows, its last.
	maxCheckLines = 6
	// maxPath is how many characters of a path or a line of output a
	// line shows, before the view's width clips it.
	maxPath = 120
)

// work is what the view knows of a member's work tree.
type work struct {
	asked   uint64           // the reading this one is, by its number
	read    bool             // changes holds a reading
	none    bool             // the member has no work tree
	changes worktree.Changes // as read at readAt
	readAt  time.Time
	err     string // why the last reading failed, when one did after a success

	merging bool          // a merge asked from this view is under way
	merge   *daemon.Merge // the last merge asked from this view
	mergeAt time.Time
}

// changesMsg carries the n-th reading of member's work tree; byKey says
// a key asked for it, and wants to hear how it went.
type changesMsg struct {
	member  string
	n       uint64
	byKey   bool
	changes worktree.Changes
	err     error
}

// mergeDoneMsg says how a merge asked from this view ended.
type mergeDoneMsg struct {
	member string
	merge  daemon.Merge
	err    error
}

// worktrees returns the view's actions on work trees, or nil.
func (m Model) worktrees() Worktrees {
	w, _ := m.actions.(Worktrees)
	return w
}

// selected is the name of the selected member, "" for none.
func (m Model) selected() string {
	if i := m.sel(secMembers); i >= 0 {
		return m.members[i].Name
	}
	return ""
}

// follow adds to cmd the reading of the selected member's work tree when
// the selection moved to another member since the last one asked, or a
// new snapshot came: once per selection, and never of a member known to
// have no work tree.
func (m Model) follow(cmd tea.Cmd) (tea.Model, tea.Cmd) {
	name := m.selected()
	if m.worktrees() == nil || m.conn != live || name == "" || name == m.following {
		return m, cmd
	}
	m.following = name
	if m.work[name].none {
		return m, cmd
	}
	return m, tea.Batch(cmd, m.readWork(name, false))
}

// readWork returns the command that reads member's work tree.
func (m *Model) readWork(member string, byKey bool) tea.Cmd {
	wt := m.worktrees()
	if wt == nil {
		return nil
	}
	m.workAsked++
	n := m.workAsked
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), actionTimeout)
		defer cancel()
		c, err := wt.Changes(ctx, member)
		return changesMsg{member: member, n: n, byKey: byKey, changes: c, err: err}
	}
}

// refreshWork returns the reading of the selected member's work tree
// that event e calls for: its turn's outcome or a merge of it refused
// may have changed it, and a merge of any member moves the lead's
// branch, which it is counted against.
func (m *Model) refreshWork(e fleetstate.Event) tea.Cmd {
	name := m.selected()
	w := m.work[name]
	switch {
	case name == "" || w.none:
		return nil
	case e.Kind == fleetstate.EventMerged,
		(e.Kind == fleetstate.EventMergeRefused || e.Kind == fleetstate.EventOutcome) && e.Member == name:
		return m.readWork(name, false)
	}
	return nil
}

// applyChanges keeps a reading of a member's work tree, unless a later
// one is in already. A failure that no key asked for says nothing: a
// member without a work tree is no error, and a failed reading keeps the
// last one shown, marked.
func (m *Model) applyChanges(msg changesMsg) {
	w := m.work[msg.member]
	if msg.n < w.asked {
		return
	}
	w.asked = msg.n
	switch {
	case errors.Is(msg.err, ErrNoWorktree):
		w.none, w.read, w.err = true, false, ""
		if msg.byKey {
			m.notice = msg.member + " has no work tree"
		}
	case msg.err != nil:
		w.err = msg.err.Error()
		if msg.byKey {
			m.notice = noticeOf(ActionDoneMsg{Err: msg.err}, m.now)
		}
	default:
		w.none, w.read, w.changes, w.readAt, w.err = false, true, msg.changes, m.now, ""
		if msg.byKey {
			m.notice = "read the work tree of " + msg.member
		}
	}
	m.work[msg.member] = w
}

// beginMerge asks to confirm the merge of the selected member's branch.
func (m Model) beginMerge() (tea.Model, tea.Cmd) {
	if m.worktrees() == nil {
		m.notice = "merges cannot be made from this view"
		return m, nil
	}
	name := m.selected()
	if m.section != secMembers || name == "" {
		m.notice = "select a member first (tab to MEMBERS)"
		return m, nil
	}
	switch w := m.work[name]; {
	case w.none:
		m.notice = name + " has no work tree: nothing to merge"
		return m, nil
	case w.merging:
		m.notice = "the merge of " + name + " is under way"
		return m, nil
	}
	m.mode, m.target = modeMerge, name
	return m, nil
}

// merge merges member's branch, once confirmed.
func (m Model) merge(member string) (tea.Model, tea.Cmd) {
	wt := m.worktrees()
	w := m.work[member]
	w.merging = true
	m.work[member] = w
	m.notice = "merging " + member + "…"
	commit := w.changes.Commit // what the prompt showed, no later commit
	return m, func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), mergeTimeout)
		defer cancel()
		r, err := wt.Merge(ctx, member, commit)
		return mergeDoneMsg{member: member, merge: r, err: err}
	}
}

// mergeDone keeps how a merge ended, for the member's work, says it in
// the notice, and reads the work tree again if it is the one shown.
func (m *Model) mergeDone(msg mergeDoneMsg) tea.Cmd {
	w := m.work[msg.member]
	w.merging = false
	if msg.err != nil {
		m.work[msg.member] = w
		m.notice = noticeOf(ActionDoneMsg{Err: msg.err}, m.now)
		return nil
	}
	r := msg.merge
	w.merge, w.mergeAt = &r, m.now
	m.work[msg.member] = w
	if r.Merged {
		m.notice = noticeOf(ActionDoneMsg{What: "merged " + msg.member + ": " + mergeText(r)}, m.now)
	} else {
		m.notice = errStyle.Render(clock(m.now) + " merge of " + msg.member + " refused (" + textsafe.Clip(r.Reason, maxTool) + ")")
	}
	if msg.member != m.selected() {
		return nil
	}
	return m.readWork(msg.member, false)
}

// mergeText says how a merge done ended: the commit the lead's branch
// moved to, or that it held the branch already.
func mergeText(r daemon.Merge) string {
	if r.UpToDate {
		return textsafe.Clip(r.Into, maxTool) + " holds " + textsafe.Clip(r.Branch, maxTool) + " already"
	}
	return fmt.Sprintf("%s into %s at %.12s", textsafe.Clip(r.Branch, maxTool), textsafe.Clip(r.Into, maxTool), textsafe.Escape(r.Commit))
}

// mergePrompt is the question of modeMerge: what the merge takes, as
// last read.
func (m Model) mergePrompt() string {
	w := m.work[m.target]
	if !w.read {
		return "merge the branch of " + m.target + " into the lead's checkout? y merges · esc/n leaves"
	}
	c := w.changes
	return fmt.Sprintf("merge %s's branch %s (%d ahead, %s) into %s? y merges · esc/n leaves",
		m.target, textsafe.Clip(c.Branch, maxTool), c.Ahead, count(len(c.Files), "file"), textsafe.Clip(c.Into, maxTool))
}

// workSection is the work tree of the selected member, when the view
// has read one: its branch against the lead's, the files it changed (as
// many as room lines leave, room < 0 for no bound), the paths not
// committed, and the last merge asked from this view.
func (m Model) workSection(room int) []string {
	name := m.selected()
	w, ok := m.work[name]
	if m.worktrees() == nil || !ok || !w.read && w.merge == nil {
		return nil
	}
	out := []string{""}
	head := titleStyle.Render("WORK OF " + name)
	if w.read {
		c := w.changes
		added, deleted := 0, 0
		for _, f := range c.Files {
			added, deleted = added+f.Added, deleted+f.Deleted
		}
		head += fmt.Sprintf("  branch %s, %d ahead of %s and %d behind · %s +%d -%d",
			textsafe.Clip(c.Branch, maxTool), c.Ahead, textsafe.Clip(c.Into, maxTool), c.Behind, count(len(c.Files), "file"), added, deleted)
		head += dimStyle.Render(" · read " + clock(w.readAt))
	}
	if w.err != "" {
		head += "  " + warnStyle.Render("reading it again failed: "+textsafe.Clip(w.err, maxContent))
	}
	out = append(out, head)
	var tail []string
	if w.read && len(w.changes.Uncommitted) > 0 {
		tail = append(tail, warnStyle.Render(m.fitList("  not committed (a merge takes none): ", w.changes.Uncommitted)))
	}
	tail = append(tail, m.mergeLines(w)...)
	if w.read {
		files := maxFileRows
		if room >= 0 {
			files = max(room-len(out)-len(tail), 1)
		}
		out = append(out, fileLines(w.changes.Files, files)...)
	}
	return append(out, tail...)
}

// fileLines lists the files a branch changed with their line counts, in
// at most room lines (at least one).
func fileLines(files []worktree.FileChange, room int) []string {
	if len(files) == 0 {
		return []string{dimStyle.Render("  no files changed")}
	}
	n := len(files)
	if n > room {
		n = room - 1
	}
	rows := make([][]string, 0, n)
	for _, f := range files[:n] {
		counts := []string{okStyle.Render(fmt.Sprintf("+%d", f.Added)), errStyle.Render(fmt.Sprintf("-%d", f.Deleted))}
		if f.Binary {
			counts = []string{"binary", ""}
		}
		rows = append(rows, append(counts, textsafe.Clip(f.Path, maxPath)))
	}
	lines := table(rows, nil)
	if k := len(files) - n; k > 0 {
		lines = append(lines, dimStyle.Render("  … and "+count(k, "more file")))
	}
	return lines
}

// mergeLines say how the last merge asked from this view ended: the
// commit, or the refusal with its reason, the files in conflict or the
// end of the check's output.
func (m Model) mergeLines(w work) []string {
	r := w.merge
	if r == nil {
		return nil
	}
	at := " at " + clock(w.mergeAt)
	if r.Merged {
		return []string{okStyle.Render("  merged" + at + ": " + mergeText(*r))}
	}
	lead := "  merge refused" + at + " (" + textsafe.Clip(r.Reason, maxTool) + ")"
	msg, _, _ := strings.Cut(strings.TrimPrefix(r.Message, "worktree: "), "\n")
	switch r.Reason {
	case "conflict":
		return []string{errStyle.Render(m.fitList(lead+": "+count(len(r.Files), "file")+" in conflict: ", r.Files))}
	case "check_failed":
		out := []string{errStyle.Render(lead + ": " + textsafe.Clip(msg, maxPath))}
		lines := strings.Split(strings.TrimRight(r.CheckOutput, "\n"), "\n")
		if strings.TrimSpace(r.CheckOutput) == "" {
			return append(out, dimStyle.Render("    (it printed nothing)"))
		}
		if len(lines) > maxCheckLines {
			lines = lines[len(lines)-maxCheckLines:]
		}
		for _, l := range lines {
			out = append(out, "    │ "+textsafe.Clip(l, maxPath))
		}
		return out
	}
	return []string{errStyle.Render(lead + ": " + textsafe.Clip(msg, maxPath))}
}

// fitList is prefix and the items, escaped, as many as the view's width
// holds, saying how many more it left out.
func (m Model) fitList(prefix string, items []string) string {
	s := prefix
	for i, it := range items {
		next := textsafe.Clip(it, maxPath)
		if i > 0 {
			next = ", " + next
		}
		more := ""
		if k := len(items) - i - 1; k > 0 {
			more = fmt.Sprintf(" … and %d more", k)
		}
		if m.width > 0 && ansi.StringWidth(s+next+more) > m.width {
			return s + fmt.Sprintf(" … and %d more", len(items)-i)
		}
		s += next
	}
	return s
}

// count is n things, in the plural when n is not 1.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
