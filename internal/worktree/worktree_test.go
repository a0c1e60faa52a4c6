package worktree_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// lab is a lead's checkout in a git repository of its own, with git set up
// for the test alone (no user or system configuration).
type lab struct {
	t    *testing.T
	repo string // the lead's checkout
	dir  string // beside it: where members' work trees go
}

func newLab(t *testing.T) *lab {
	t.Helper()
	fleettest.IsolatedGit(t)
	root := t.TempDir()
	l := &lab{t: t, repo: filepath.Join(root, "lead"), dir: filepath.Join(root, "trees")}
	l.git(root, "init", "--quiet", l.repo)
	l.write(l.repo, "README", "one\ntwo\nthree\n")
	l.commit(l.repo, "first")
	return l
}

func (l *lab) git(dir string, args ...string) string {
	l.t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (l *lab) write(dir, name, content string) {
	l.t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) commit(dir, msg string) string {
	l.t.Helper()
	l.git(dir, "add", "-A")
	l.git(dir, "commit", "--quiet", "-m", msg)
	return l.git(dir, "rev-parse", "HEAD")
}

// member makes the work tree of a member on a branch of its name.
func (l *lab) member(name string) string {
	l.t.Helper()
	path := filepath.Join(l.dir, name)
	made, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: l.repo, Path: path, Branch: name})
	if err != nil || !made {
		l.t.Fatalf("Ensure %s: made %v, %v", name, made, err)
	}
	return path
}

// state is what must not change when something is refused: every branch's
// commit, the lead's files and status, the work trees.
func (l *lab) state() string {
	l.t.Helper()
	return l.git(l.repo, "for-each-ref", "--format=%(refname) %(objectname)") + "\n" +
		l.git(l.repo, "status", "--porcelain", "--untracked-files=all") + "\n" +
		l.git(l.repo, "worktree", "list", "--porcelain") + "\n" +
		l.git(l.repo, "ls-files", "-s")
}

func TestEnsureMakesAWorkTreeFromTheLeadsCommit(t *testing.T) {
	l := newLab(t)
	head := l.git(l.repo, "rev-parse", "HEAD")
	path := l.member("scout")
	if got := l.git(path, "rev-parse", "--abbrev-ref", "HEAD"); got != "scout" {
		t.Errorf("branch %q; want scout", got)
	}
	if got := l.git(path, "rev-parse", "HEAD"); got != head {
		t.Errorf("starts at %s; want the lead's %s", got, head)
	}
	if b, err := os.ReadFile(filepath.Join(path, "README")); err != nil || string(b) != "one\ntwo\nthree\n" {
		t.Errorf("README %q, %v", b, err)
	}
}

func TestEnsureReusesItsWorkTree(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "work.txt", "not committed\n")
	made, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: l.repo, Path: path, Branch: "scout"})
	if err != nil || made {
		t.Fatalf("Ensure again: made %v, %v; want reused", made, err)
	}
	if b, err := os.ReadFile(filepath.Join(path, "work.txt")); err != nil || string(b) != "not committed\n" {
		t.Errorf("uncommitted work %q, %v; want kept", b, err)
	}
}

func TestEnsureWithBranchAndBase(t *testing.T) {
	l := newLab(t)
	first := l.git(l.repo, "rev-parse", "HEAD")
	l.write(l.repo, "later.txt", "x\n")
	l.commit(l.repo, "later")
	path := filepath.Join(l.dir, "miner")
	if _, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: l.repo, Path: path, Branch: "work/miner", Base: first}); err != nil {
		t.Fatal(err)
	}
	if got := l.git(path, "rev-parse", "HEAD"); got != first {
		t.Errorf("starts at %s; want the base %s", got, first)
	}
	if _, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: l.repo, Path: filepath.Join(l.dir, "x"), Branch: "x", Base: "no-such-ref"}); err == nil {
		t.Error("a base that is no commit was taken")
	}
}

func TestEnsureRefusesWhatHoldsSomethingElse(t *testing.T) {
	l := newLab(t)
	scout := l.member("scout")
	full := filepath.Join(l.dir, "full")
	l.write(full, "mine.txt", "someone's\n")
	file := filepath.Join(l.dir, "file")
	l.write(l.dir, "file", "x")
	for _, tc := range []struct {
		name string
		spec worktree.Spec
		want error
	}{
		{"a work tree of another branch", worktree.Spec{Path: scout, Branch: "miner"}, worktree.ErrPathTaken},
		{"a folder with files", worktree.Spec{Path: full, Branch: "miner"}, worktree.ErrPathTaken},
		{"a file", worktree.Spec{Path: file, Branch: "miner"}, worktree.ErrPathTaken},
		{"the lead's own checkout", worktree.Spec{Path: l.repo, Branch: "miner"}, worktree.ErrPathTaken},
		{"a branch checked out elsewhere", worktree.Spec{Path: filepath.Join(l.dir, "other"), Branch: "scout"}, worktree.ErrBranchTaken},
		{"the lead's branch", worktree.Spec{Path: filepath.Join(l.dir, "other"), Branch: "main"}, worktree.ErrBranchTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := l.state()
			tc.spec.Repo = l.repo
			_, err := worktree.Ensure(context.Background(), tc.spec)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Ensure: %v; want %v", err, tc.want)
			}
			if after := l.state(); after != before {
				t.Errorf("a refusal changed the repository:\n%s\nwas\n%s", after, before)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(full, "mine.txt")); err != nil || string(b) != "someone's\n" {
		t.Errorf("the folder's file: %q, %v", b, err)
	}
	for _, bad := range []string{"", "-x", "a..b", "a b"} {
		if _, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: l.repo, Path: filepath.Join(l.dir, "bad"), Branch: bad}); err == nil {
			t.Errorf("branch %q was taken", bad)
		}
	}
	if _, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: t.TempDir(), Path: filepath.Join(l.dir, "y"), Branch: "y"}); !errors.Is(err, worktree.ErrNotRepo) {
		t.Errorf("outside a repository: %v; want ErrNotRepo", err)
	}
}

func TestRemoveKeepsUncommittedWorkAndTheBranch(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "new.txt", "untracked\n")
	if err := worktree.Remove(context.Background(), l.repo, path); !errors.Is(err, worktree.ErrMemberDirty) || !strings.Contains(err.Error(), "new.txt") {
		t.Fatalf("Remove of a tree with untracked work: %v; want ErrMemberDirty naming new.txt", err)
	}
	if _, err := os.Stat(filepath.Join(path, "new.txt")); err != nil {
		t.Fatalf("the work is gone: %v", err)
	}
	commit := l.commit(path, "work")
	if err := worktree.Remove(context.Background(), l.repo, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("work tree still there: %v", err)
	}
	if got := l.git(l.repo, "rev-parse", "refs/heads/scout"); got != commit {
		t.Errorf("branch scout at %s; want its commit %s", got, commit)
	}
	// up again: the branch is checked out again, with its commit.
	made, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: l.repo, Path: path, Branch: "scout"})
	if err != nil || !made {
		t.Fatalf("Ensure after Remove: %v, %v", made, err)
	}
	if got := l.git(path, "rev-parse", "HEAD"); got != commit {
		t.Errorf("work tree at %s; want %s", got, commit)
	}
	if err := worktree.Remove(context.Background(), l.repo, l.repo); !errors.Is(err, worktree.ErrNotWorktree) {
		t.Errorf("Remove of the lead's checkout: %v; want ErrNotWorktree", err)
	}
}

func TestReadShowsTheMembersWork(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "README", "one\n2\nthree\nfour\n")
	l.write(path, "src/new.go", "package src\n")
	l.commit(path, "scout's work")
	l.write(path, "notes.txt", "draft\n")
	l.write(l.repo, "lead.txt", "lead's\n")
	l.commit(l.repo, "lead's work")

	c, err := worktree.Read(context.Background(), l.repo, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Branch != "scout" || c.Into != "main" || c.Ahead != 1 || c.Behind != 1 || c.Worktree != path {
		t.Errorf("changes %+v; want scout into main, 1 ahead and 1 behind, at %s", c, path)
	}
	want := []worktree.FileChange{{Path: "README", Added: 2, Deleted: 1}, {Path: "src/new.go", Added: 1}}
	if !slices.Equal(c.Files, want) {
		t.Errorf("files %+v; want %+v", c.Files, want)
	}
	if !slices.Equal(c.Uncommitted, []string{"notes.txt"}) {
		t.Errorf("uncommitted %v; want notes.txt", c.Uncommitted)
	}
	if c.Diff != "" || c.DiffBytes != 0 {
		t.Errorf("a diff nobody asked for: %d bytes", c.DiffBytes)
	}

	c, err = worktree.Read(context.Background(), l.repo, path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Diff, "+package src") || c.DiffClipped || c.DiffBytes != len(c.Diff) {
		t.Errorf("diff %d of %d bytes, clipped %v:\n%s", len(c.Diff), c.DiffBytes, c.DiffClipped, c.Diff)
	}
	whole := c.DiffBytes
	c, err = worktree.Read(context.Background(), l.repo, path, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Diff) > 40 || !c.DiffClipped || c.DiffBytes != whole {
		t.Errorf("clipped diff: %d bytes of %d, clipped %v; want at most 40 of %d", len(c.Diff), c.DiffBytes, c.DiffClipped, whole)
	}
}

func TestMergeBringsTheWorkBack(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "src/new.go", "package src\n")
	work := l.commit(path, "scout's work")
	l.write(l.repo, "lead.txt", "lead's\n")
	l.commit(l.repo, "lead's work")

	var m worktree.Merger
	res, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{Check: "test -f src/new.go && test -f lead.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Branch != "scout" || res.Into != "main" || res.UpToDate {
		t.Errorf("merged %+v", res)
	}
	if head := l.git(l.repo, "rev-parse", "HEAD"); head != res.Commit {
		t.Errorf("lead at %s; the merge says %s", head, res.Commit)
	}
	l.git(l.repo, "merge-base", "--is-ancestor", work, "HEAD")
	if b, err := os.ReadFile(filepath.Join(l.repo, "src/new.go")); err != nil || string(b) != "package src\n" {
		t.Errorf("the lead's checkout: %q, %v", b, err)
	}
	if st := l.git(l.repo, "status", "--porcelain"); st != "" {
		t.Errorf("lead's checkout not clean after the merge: %s", st)
	}
	if n := strings.Count(l.git(l.repo, "worktree", "list"), "\n") + 1; n != 2 {
		t.Errorf("%d work trees after the merge; want the lead's and scout's", n)
	}
	again, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{})
	if err != nil || !again.UpToDate || again.Commit != res.Commit {
		t.Errorf("merge again: %+v, %v; want up to date at %s", again, err, res.Commit)
	}
}

func TestMergeConflictChangesNothing(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "README", "one\nscout\nthree\n")
	l.write(path, "b.txt", "b\n")
	l.commit(path, "scout")
	l.write(l.repo, "README", "one\nlead\nthree\n")
	l.commit(l.repo, "lead")
	before := l.state()
	var m worktree.Merger
	_, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{})
	var ce *worktree.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, worktree.ErrConflict) {
		t.Fatalf("Merge: %v; want a conflict", err)
	}
	if !slices.Equal(ce.Files, []string{"README"}) {
		t.Errorf("conflicts in %v; want README", ce.Files)
	}
	if after := l.state(); after != before {
		t.Errorf("a conflict changed the repository:\n%s\nwas\n%s", after, before)
	}
}

func TestMergeRefusesDirtyCheckouts(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "a.txt", "a\n")
	l.commit(path, "scout")
	var m worktree.Merger

	l.write(path, "draft.txt", "not committed\n")
	before := l.state()
	if _, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{}); !errors.Is(err, worktree.ErrMemberDirty) || !strings.Contains(err.Error(), "draft.txt") {
		t.Errorf("member with uncommitted work: %v; want ErrMemberDirty naming draft.txt", err)
	}
	if after := l.state(); after != before {
		t.Errorf("refusal changed the repository:\n%s\nwas\n%s", after, before)
	}
	if err := os.Remove(filepath.Join(path, "draft.txt")); err != nil {
		t.Fatal(err)
	}

	l.write(l.repo, "README", "edited by the lead\n")
	before = l.state()
	if _, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{}); !errors.Is(err, worktree.ErrLeadDirty) || !strings.Contains(err.Error(), "README") {
		t.Errorf("lead with uncommitted work: %v; want ErrLeadDirty naming README", err)
	}
	if after := l.state(); after != before {
		t.Errorf("refusal changed the repository:\n%s\nwas\n%s", after, before)
	}
	if b, _ := os.ReadFile(filepath.Join(l.repo, "README")); string(b) != "edited by the lead\n" {
		t.Errorf("the lead's edit is gone: %q", b)
	}
}

func TestMergeRefusedByAFailingCheck(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "a.txt", "a\n")
	l.commit(path, "scout")
	before := l.state()
	var m worktree.Merger
	check := "for i in $(seq 1 2000); do echo line $i; done; echo 'FAIL: TestSomething' >&2; exit 3"
	_, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{Check: check})
	var ce *worktree.CheckError
	if !errors.As(err, &ce) || !errors.Is(err, worktree.ErrCheckFailed) {
		t.Fatalf("Merge: %v; want a failed check", err)
	}
	if !strings.HasSuffix(ce.Tail, "FAIL: TestSomething\n") || len(ce.Tail) > worktree.TailBytes || strings.Contains(ce.Tail, "line 1\n") {
		t.Errorf("tail of %d bytes: ...%q", len(ce.Tail), ce.Tail[max(0, len(ce.Tail)-80):])
	}
	if !strings.Contains(ce.Err.Error(), "exit status 3") {
		t.Errorf("how it failed: %v", ce.Err)
	}
	if after := l.state(); after != before {
		t.Errorf("a failed check changed the repository:\n%s\nwas\n%s", after, before)
	}
	_, err = m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{Check: "sleep 5", CheckTimeout: 50 * time.Millisecond})
	if !errors.Is(err, worktree.ErrCheckFailed) || !strings.Contains(err.Error(), "no end within") {
		t.Errorf("a check past its bound: %v", err)
	}
}

func TestMergesAtOnceAreSerialised(t *testing.T) {
	l := newLab(t)
	const n = 4
	paths := make([]string, n)
	for i := range n {
		name := string(rune('a' + i))
		paths[i] = l.member("m" + name)
		l.write(paths[i], name+".txt", name+"\n")
		l.commit(paths[i], "work of "+name)
	}
	var m worktree.Merger
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = m.Merge(context.Background(), l.repo, paths[i], worktree.MergeOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("merge %d: %v", i, err)
		}
	}
	for i := range n {
		name := string(rune('a' + i))
		if _, err := os.Stat(filepath.Join(l.repo, name+".txt")); err != nil {
			t.Errorf("%s.txt not in the lead's checkout: %v", name, err)
		}
		l.git(l.repo, "merge-base", "--is-ancestor", "m"+name, "HEAD")
	}
	if merges := l.git(l.repo, "rev-list", "--merges", "--count", "HEAD"); merges != "4" {
		t.Errorf("%s merge commits; want 4", merges)
	}
}

// TestMergeRefusesToOverwriteTheLeadsUntrackedFiles: an untracked file of
// the lead's that the merge would overwrite refuses it, and stays.
func TestMergeRefusesToOverwriteTheLeadsUntrackedFiles(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "a.txt", "scout's\n")
	l.commit(path, "scout")
	l.write(l.repo, "a.txt", "the lead's, not committed\n")
	before := l.state()
	var m worktree.Merger
	if _, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{}); !errors.Is(err, worktree.ErrLeadDirty) {
		t.Fatalf("Merge: %v; want ErrLeadDirty", err)
	}
	if after := l.state(); after != before {
		t.Errorf("the refusal changed the repository:\n%s\nwas\n%s", after, before)
	}
	if b, _ := os.ReadFile(filepath.Join(l.repo, "a.txt")); string(b) != "the lead's, not committed\n" {
		t.Errorf("the lead's file: %q", b)
	}
}

// TestReadBoundsTheDiff: a diff larger than the bound costs the bound,
// and its whole size is told.
func TestReadBoundsTheDiff(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "big.txt", strings.Repeat("é a line of text\n", 200_000))
	l.commit(path, "big")
	c, err := worktree.Read(context.Background(), l.repo, path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Diff) > 1000 || !c.DiffClipped || c.DiffBytes < 200_000*18 || !utf8.ValidString(c.Diff) {
		t.Errorf("diff of %d bytes (whole %d, clipped %v, valid UTF-8 %v)", len(c.Diff), c.DiffBytes, c.DiffClipped, utf8.ValidString(c.Diff))
	}
}

// TestMergeOfACommitAskedFor: a merge asked for the commit a person saw
// is refused once the branch moved on, changing nothing, and merges that
// very commit otherwise.
func TestMergeOfACommitAskedFor(t *testing.T) {
	l := newLab(t)
	path := l.member("scout")
	l.write(path, "a.txt", "a\n")
	seen := l.commit(path, "seen")
	l.write(path, "b.txt", "b\n")
	l.commit(path, "not seen")
	var m worktree.Merger
	before := l.state()
	for _, commit := range []string{seen, seen[:7], "abc"} {
		if _, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{Commit: commit}); !errors.Is(err, worktree.ErrBranchMoved) {
			t.Errorf("merge of %s, the branch moved on: %v; want ErrBranchMoved", commit, err)
		}
	}
	if after := l.state(); after != before {
		t.Errorf("a refusal changed the repository:\n%s\nwas\n%s", after, before)
	}
	tip := l.git(path, "rev-parse", "HEAD")
	res, err := m.Merge(context.Background(), l.repo, path, worktree.MergeOptions{Commit: strings.ToUpper(tip[:10])})
	if err != nil {
		t.Fatal(err)
	}
	l.git(l.repo, "merge-base", "--is-ancestor", tip, "HEAD")
	if msg := l.git(l.repo, "log", "-1", "--format=%s", res.Commit); msg != "Merge branch 'scout'" {
		t.Errorf("merge commit's message %q", msg)
	}
}

// Reading a member's work tree takes no lock of it: the member's own git
// commands, run meanwhile, never find the index locked.
func TestReadTakesNoLock(t *testing.T) {
	l := newLab(t)
	tree := l.member("alice")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = worktree.Read(ctx, l.repo, tree, 0)
		}
	})
	defer wg.Wait()
	defer cancel()
	for i := range 40 {
		name := filepath.Join(tree, "f.txt")
		// A new modification time each round: a status read would
		// refresh the index, and write it.
		if err := os.WriteFile(name, []byte("same\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(name, when, when); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("git", "-C", tree, "add", "f.txt").CombinedOutput(); err != nil {
			t.Fatalf("round %d: the member's git add failed beside a read: %v\n%s", i, err, out)
		}
	}
}
