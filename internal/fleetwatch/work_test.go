package fleetwatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// fakeWork is fakeActions with work trees: the changes of the members
// that have one, and the answers of the merges asked, in turn.
type fakeWork struct {
	*fakeActions
	changes  map[string]worktree.Changes
	merges   []daemon.Merge
	mergeErr error
}

func (f *fakeWork) Changes(_ context.Context, member string) (worktree.Changes, error) {
	f.record("changes " + member)
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.changes[member]
	if !ok {
		return worktree.Changes{}, fmt.Errorf("%w: %s has none", ErrNoWorktree, member)
	}
	return c, nil
}

func (f *fakeWork) Merge(_ context.Context, member, commit string) (daemon.Merge, error) {
	f.record("merge " + member + " " + commit)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mergeErr != nil {
		return daemon.Merge{}, f.mergeErr
	}
	r := f.merges[0]
	f.merges = f.merges[1:]
	r.Member = member
	return r, nil
}

// setChanges changes what scout's work tree holds.
func (f *fakeWork) setChanges(c worktree.Changes) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes["scout"] = c
}

// callCount is how many calls f recorded that start with prefix.
func (f *fakeWork) callCount(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func scoutChanges() worktree.Changes {
	return worktree.Changes{Worktree: "/s/.fleetstate/worktrees/scout", Branch: "scout", Into: "main", Commit: "c0ffee", Ahead: 2, Behind: 1,
		Files: []worktree.FileChange{
			{Path: "a.go", Added: 12, Deleted: 3},
			{Path: "img.png", Binary: true},
			{Path: "README", Added: 1},
		},
		Uncommitted: []string{"draft.txt"},
	}
}

// newWork is a view with work-tree actions over snapshot(): miner (the
// first, selected) has no work tree, scout has scoutChanges.
func newWork(t *testing.T) (Model, *fakeWork) {
	t.Helper()
	f := &fakeWork{fakeActions: &fakeActions{}, changes: map[string]worktree.Changes{"scout": scoutChanges()}}
	m := deliver(New("", t0, nil).WithActions(f), snapshot())
	return m, f
}

// deliver applies msgs to m as [press] applies keys: the commands they
// return run, and what those return is applied in turn.
func deliver(m Model, msgs ...tea.Msg) Model {
	for _, msg := range msgs {
		next, cmd := m.Update(msg)
		m, _ = drain(next.(Model), cmd)
	}
	return m
}

// The selected member's work tree is read when it is selected: a member
// without one shows nothing of it, a member with one its branch, its
// files with their line counts, and what is not committed.
func TestWorkOfTheSelectedMember(t *testing.T) {
	m, f := newWork(t)
	if !slices.Equal(f.calls, []string{"changes miner"}) {
		t.Fatalf("calls after the snapshot %q; want the reading of miner's work tree", f.calls)
	}
	if v := screen(m); strings.Contains(v, "WORK") || strings.Contains(v, "work tree") || strings.Contains(v, "failed") {
		t.Fatalf("a member without a work tree shows some of it:\n%s", v)
	}
	m, _ = press(t, m, "down")
	v := screen(m)
	for _, want := range []string{
		"WORK OF scout  branch scout, 2 ahead of main and 1 behind · 3 files +13 -3 · read " + clock(t0),
		"not committed (a merge takes none): draft.txt",
		"m merge · w work",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("scout's work lacks %q:\n%s", want, v)
		}
	}
	wantRow(t, m, "+12", "-3", "a.go")
	wantRow(t, m, "binary", "img.png")
	wantRow(t, m, "+1", "-0", "README")

	// Back on miner: no work, and no reading of a work tree it has not.
	m, _ = press(t, m, "up")
	if v := screen(m); strings.Contains(v, "WORK OF") || f.callCount("changes miner") != 1 {
		t.Errorf("miner again: %d readings of miner's; want 1, and no work shown:\n%s", f.callCount("changes miner"), v)
	}
	// w reads the selected member's again, and says how it went.
	m, _ = press(t, m, "w")
	if f.callCount("changes miner") != 2 || !strings.Contains(screen(m), "miner has no work tree") {
		t.Errorf("w on miner: %q\n%s", f.calls, screen(m))
	}
	m, _ = press(t, m, "down")
	f.setChanges(worktree.Changes{Branch: "scout", Into: "main", Ahead: 3, Files: []worktree.FileChange{}, Uncommitted: []string{}})
	m, _ = press(t, m, "w")
	if v := screen(m); !strings.Contains(v, "3 ahead of main") || !strings.Contains(v, "no files changed") || strings.Contains(v, "not committed") || !strings.Contains(v, "read the work tree of scout") {
		t.Errorf("w on scout:\n%s", v)
	}
}

// Paths list as many as fit above a few lines of events, escaped.
func TestWorkFilesFitTheScreen(t *testing.T) {
	m, f := newWork(t)
	c := scoutChanges()
	c.Files = nil
	for i := range 40 {
		c.Files = append(c.Files, worktree.FileChange{Path: fmt.Sprintf("pkg/file%02d.go", i), Added: i})
	}
	c.Files[0].Path = "evil\u202egnp.go\nminer  yes  IDLE"
	c.Uncommitted = []string{"x\u200by", "b", "c"}
	f.setChanges(c)
	m = deliver(m, tea.WindowSizeMsg{Width: 100, Height: 30})
	m, _ = press(t, m, "down")
	v := screen(m)
	lines := strings.Split(v, "\n")
	if len(lines) > 30 {
		t.Errorf("%d lines on a screen of 30:\n%s", len(lines), v)
	}
	if !strings.Contains(v, "pkg/file01.go") || strings.Contains(v, "pkg/file39.go") || !strings.Contains(v, "more files") {
		t.Errorf("the files do not stop where the screen does, saying how many more:\n%s", v)
	}
	if strings.ContainsAny(v, "\u202e\u200b") || !strings.Contains(v, `evil\u202egnp.go\nminer  yes  IDLE`) || !strings.Contains(v, `x\u200by, b, c`) {
		t.Errorf("the paths' hidden characters are not escaped:\n%s", v)
	}
	if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "EVENTS") }); i < 0 || len(lines)-i-1 < minEventRows-1 {
		t.Errorf("the files leave no room for the events:\n%s", v)
	}
}

// The work shown is read again when an event may have changed it: the
// member's outcome, a merge of it refused, any merge (the lead's branch
// moved); not on another member's outcome, nor on an event already
// applied.
func TestWorkReadAgainOnItsEvents(t *testing.T) {
	m, f := newWork(t)
	m, _ = press(t, m, "down")
	for i, c := range []struct {
		e    EventMsg
		read bool
	}{
		{ev(5, 0, fleetstate.EventOutcome, fleetstate.Event{Member: "scout", Outcome: &fleetstate.Outcome{Kind: fleetstate.OutcomeTurnDone}}), true},
		{ev(6, 0, fleetstate.EventOutcome, fleetstate.Event{Member: "miner", Outcome: &fleetstate.Outcome{Kind: fleetstate.OutcomeTurnDone}}), false},
		{ev(7, 0, fleetstate.EventMerged, fleetstate.Event{Member: "miner", By: "lead", Content: "miner into main: 0123"}), true},
		{ev(8, 0, fleetstate.EventMergeRefused, fleetstate.Event{Member: "scout", By: "lead", Content: "conflict: README"}), true},
		{ev(8, 0, fleetstate.EventMergeRefused, fleetstate.Event{Member: "scout", By: "lead", Content: "conflict: README"}), false},
		{ev(9, 0, fleetstate.EventMergeRequested, fleetstate.Event{Member: "scout", By: "lead"}), false},
	} {
		c2 := scoutChanges()
		c2.Ahead = 10 + i
		f.setChanges(c2)
		before := f.callCount("changes scout")
		m = deliver(m, c.e)
		read := f.callCount("changes scout") > before
		if read != c.read {
			t.Errorf("%s of %s (seq %d): read %v; want %v", c.e.Event.Kind, c.e.Event.Member, c.e.Event.Seq, read, c.read)
		}
		if v := screen(m); read && !strings.Contains(v, fmt.Sprintf("%d ahead of main", 10+i)) {
			t.Errorf("%s of %s: the reading is not shown:\n%s", c.e.Event.Kind, c.e.Event.Member, v)
		}
	}
}

// A reading that comes after a later one is dropped.
func TestAnOlderReadingComesLate(t *testing.T) {
	m, _ := newWork(t)
	m, _ = press(t, m, "down")
	late := changesMsg{member: "scout", n: m.workAsked - 1, changes: worktree.Changes{Branch: "old", Into: "main"}}
	if v := screen(deliver(m, late)); strings.Contains(v, "branch old") || !strings.Contains(v, "branch scout") {
		t.Errorf("a late reading replaced the last:\n%s", v)
	}
}

// m asks first; y merges, and the result is shown under the member's
// work: the commit, or the refusal with the files of a conflict or the
// end of the check's output, escaped. The work is read again after.
func TestMergeConfirmedAndItsResults(t *testing.T) {
	var output []string
	for i := range 9 {
		output = append(output, fmt.Sprintf("check line %d", i))
	}
	output[8] = "FAIL\u202e ok\ttab"
	for _, c := range []struct {
		name   string
		merge  daemon.Merge
		want   []string
		absent []string
	}{
		{"merged", daemon.Merge{Merged: true, Branch: "scout", Into: "main", Commit: "0123456789abcdef0123"},
			[]string{"merged at " + clock(t0) + ": scout into main at 0123456789ab", clock(t0) + " merged scout: scout into main at 0123456789ab"}, []string{"0123456789abc"}},
		{"up to date", daemon.Merge{Merged: true, UpToDate: true, Branch: "scout", Into: "main", Commit: "0123456789abcdef0123"},
			[]string{"merged at " + clock(t0) + ": main holds scout already"}, nil},
		{"conflict", daemon.Merge{Reason: "conflict", Message: "worktree: scout does not merge cleanly: conflicts in README, a\nb.go", Files: []string{"README", "a\nb.go"}},
			[]string{"merge refused at " + clock(t0) + ` (conflict): 2 files in conflict: README, a\nb.go`, "merge of scout refused (conflict)"}, nil},
		{"check failed", daemon.Merge{Reason: "check_failed", Message: "worktree: the check \"make test\" failed on the merged result (exit status 1); its output ends:\n" + strings.Join(output, "\n"),
			CheckOutput: strings.Join(output, "\n") + "\n"},
			[]string{`merge refused at ` + clock(t0) + ` (check_failed): the check "make test" failed on the merged result (exit status 1); its output ends:`,
				"│ check line 3", `│ FAIL\u202e ok\ttab`},
			[]string{"check line 2", "\u202e"}},
		{"refused otherwise", daemon.Merge{Reason: "member_dirty", Message: "worktree: the member's work tree has uncommitted changes: draft.txt"},
			[]string{"(member_dirty): the member's work tree has uncommitted changes: draft.txt"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, f := newWork(t)
			f.merges = []daemon.Merge{c.merge}
			m, _ = press(t, m, "down", "m")
			if v := screen(m); !strings.Contains(v, "merge scout's branch scout (2 ahead, 3 files) into main? y merges · esc/n leaves") || f.callCount("merge") != 0 {
				t.Fatalf("m: calls %q; want a confirmation first:\n%s", f.calls, v)
			}
			m, _ = press(t, m, "y")
			if f.callCount("merge scout c0ffee") != 1 || f.calls[len(f.calls)-1] != "changes scout" {
				t.Fatalf("y: calls %q; want the merge of scout, then its work read again", f.calls)
			}
			v := screen(m)
			for _, want := range c.want {
				if !strings.Contains(v, want) {
					t.Errorf("the result lacks %q:\n%s", want, v)
				}
			}
			for _, no := range c.absent {
				if strings.Contains(v, no) {
					t.Errorf("the result shows %q:\n%s", no, v)
				}
			}
			if m.mode != modeBrowse {
				t.Errorf("mode %d after the merge; want browsing", m.mode)
			}
		})
	}
}

// esc, or any key but y, leaves the confirmation without a merge; m
// where there is no work tree, or no member selected, says so.
func TestMergeEscLeaves(t *testing.T) {
	m, f := newWork(t)
	m, _ = press(t, m, "down", "m", "esc")
	if f.callCount("merge") != 0 || m.mode != modeBrowse || !strings.Contains(screen(m), "merge of scout not sent") {
		t.Fatalf("esc: calls %q, mode %d\n%s", f.calls, m.mode, screen(m))
	}
	m, _ = press(t, m, "m", "q")
	if f.callCount("merge") != 0 || m.mode != modeBrowse {
		t.Fatalf("q in the confirmation: calls %q, mode %d", f.calls, m.mode)
	}
	m, _ = press(t, m, "up", "m")
	if v := screen(m); m.mode != modeBrowse || !strings.Contains(v, "miner has no work tree: nothing to merge") {
		t.Errorf("m on miner: mode %d\n%s", m.mode, v)
	}
	m, _ = press(t, m, "down", "tab", "m")
	if v := screen(m); m.mode != modeBrowse || !strings.Contains(v, "select a member first") {
		t.Errorf("m in the tickets: mode %d\n%s", m.mode, v)
	}
	// A merge that fails to be asked says why.
	f.mergeErr = errors.New("no daemon serves /x")
	m, _ = press(t, m, "tab", "tab", "tab", "m", "y")
	if v := screen(m); f.callCount("merge scout") != 1 || !strings.Contains(v, "failed: no daemon serves /x") {
		t.Errorf("a failed merge: calls %q\n%s", f.calls, v)
	}
	// Actions without work trees neither read nor merge, nor offer to.
	plain := deliver(New("", t0, nil).WithActions(&fakeActions{}), snapshot())
	plain, _ = press(t, plain, "m")
	if v := screen(plain); strings.Contains(v, "m merge") || !strings.Contains(v, "merges cannot be made from this view") {
		t.Errorf("m without work trees:\n%s", v)
	}
}
