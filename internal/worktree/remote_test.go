package worktree_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fleetstate/fleetstate/internal/worktree"
)

// remoteLab is a bare remote, the lead's checkout (the lab's repository,
// cloned from nothing but pushed there) and a second clone of it, the
// member's machine, with the member's work tree beside that clone.
type remoteLab struct {
	*lab
	remote, clone, tree string
}

func newRemoteLab(t *testing.T) *remoteLab {
	l := newLab(t)
	root := filepath.Dir(l.repo)
	r := &remoteLab{lab: l, remote: filepath.Join(root, "remote.git"), clone: filepath.Join(root, "elsewhere"), tree: filepath.Join(root, "elsewhere-trees", "bob")}
	l.git(root, "init", "--quiet", "--bare", r.remote)
	l.git(l.repo, "push", "--quiet", r.remote, "HEAD:refs/heads/main")
	l.git(root, "clone", "--quiet", r.remote, r.clone)
	if _, err := worktree.Ensure(context.Background(), worktree.Spec{Repo: r.clone, Path: r.tree, Branch: "bob"}); err != nil {
		t.Fatal(err)
	}
	return r
}

// A member's branch, committed on another machine, reaches the lead's
// checkout through the remote: its changes read as a work tree's beside
// it would, and it merges; the lead's branch moves, no other.
func TestPublishFetchAndMerge(t *testing.T) {
	r := newRemoteLab(t)
	ctx := context.Background()
	r.write(r.tree, "notes.txt", "from bob\n")
	commit := r.commit(r.tree, "bob's notes")
	p, err := worktree.Publish(ctx, r.clone, r.tree, r.remote)
	if err != nil || p.Branch != "bob" || p.Commit != commit || len(p.Uncommitted) != 0 {
		t.Fatalf("Publish = %+v, %v; want bob at %s, clean", p, err, commit)
	}
	if got := r.git(r.remote, "rev-parse", "refs/heads/bob"); got != commit {
		t.Fatalf("the remote's bob is at %s; want %s", got, commit)
	}
	if err := worktree.Fetch(ctx, r.repo, r.remote, "bob", commit[:9]); err != nil {
		t.Fatal(err)
	}
	c, err := worktree.ReadFetched(ctx, r.repo, p, 1<<20)
	if err != nil || c.Branch != "bob" || c.Commit != commit || c.Ahead != 1 || c.Behind != 0 || c.Worktree != r.tree ||
		len(c.Files) != 1 || c.Files[0].Path != "notes.txt" || c.Files[0].Added != 1 || c.Diff == "" {
		t.Fatalf("ReadFetched = %+v, %v; want bob one ahead with notes.txt", c, err)
	}
	if out := r.git(r.repo, "for-each-ref", "--format=%(refname)", "refs/heads"); out != "refs/heads/main" && out != "refs/heads/master" {
		t.Errorf("the fetch changed the lead's branches: %s", out)
	}
	var m worktree.Merger
	done, err := m.MergeFetched(ctx, r.repo, p, worktree.MergeOptions{Check: "test -f notes.txt"})
	if err != nil || done.UpToDate || done.Branch != "bob" {
		t.Fatalf("MergeFetched = %+v, %v", done, err)
	}
	if head := r.git(r.repo, "rev-parse", "HEAD"); head != done.Commit {
		t.Errorf("the lead's checkout is at %s; want the merge %s", head, done.Commit)
	}
	if got := r.git(r.repo, "show", "HEAD:notes.txt"); got != "from bob" {
		t.Errorf("the merged notes.txt holds %q", got)
	}
}

// What the member's work tree holds uncommitted is told, and refuses the
// merge; a remote branch that moved since the publish refuses the fetch;
// a remote branch with commits the member's lacks refuses the push, and
// the remote keeps them.
func TestPublishAndFetchRefusals(t *testing.T) {
	r := newRemoteLab(t)
	ctx := context.Background()
	r.write(r.tree, "notes.txt", "from bob\n")
	first := r.commit(r.tree, "bob's notes")
	r.write(r.tree, "draft.txt", "not yet\n")
	p, err := worktree.Publish(ctx, r.clone, r.tree, r.remote)
	if err != nil || !slices.Equal(p.Uncommitted, []string{"draft.txt"}) {
		t.Fatalf("Publish with a draft = %+v, %v; want draft.txt uncommitted", p, err)
	}
	if err := worktree.Fetch(ctx, r.repo, r.remote, "bob", first); err != nil {
		t.Fatal(err)
	}
	head := r.git(r.repo, "rev-parse", "HEAD")
	var m worktree.Merger
	if _, err := m.MergeFetched(ctx, r.repo, p, worktree.MergeOptions{}); !errors.Is(err, worktree.ErrMemberDirty) {
		t.Fatalf("MergeFetched of a dirty member = %v; want ErrMemberDirty", err)
	}
	if now := r.git(r.repo, "rev-parse", "HEAD"); now != head {
		t.Fatalf("a refused merge moved the lead from %s to %s", head, now)
	}
	if err := worktree.Fetch(ctx, r.repo, r.remote, "bob", "0000000"); !errors.Is(err, worktree.ErrBranchMoved) {
		t.Fatalf("Fetch at another commit = %v; want ErrBranchMoved", err)
	}
	if err := worktree.Fetch(ctx, r.repo, r.remote, "nobody", "0000000"); !errors.Is(err, worktree.ErrFetch) {
		t.Fatalf("Fetch of a branch the remote lacks = %v; want ErrFetch", err)
	}
	// Someone else's commit on the remote's bob: the push is refused.
	other := filepath.Join(filepath.Dir(r.repo), "other")
	r.git(filepath.Dir(r.repo), "clone", "--quiet", "--branch", "bob", r.remote, other)
	r.write(other, "theirs.txt", "theirs\n")
	theirs := r.commit(other, "theirs")
	r.git(other, "push", "--quiet", "origin", "bob")
	r.git(r.tree, "checkout", "--quiet", "--", ".")
	r.git(r.tree, "clean", "--quiet", "-f")
	r.write(r.tree, "more.txt", "more\n")
	r.commit(r.tree, "more")
	if _, err := worktree.Publish(ctx, r.clone, r.tree, r.remote); !errors.Is(err, worktree.ErrPushRefused) {
		t.Fatalf("Publish over a remote branch that moved on = %v; want ErrPushRefused", err)
	}
	if got := r.git(r.remote, "rev-parse", "refs/heads/bob"); got != theirs {
		t.Fatalf("the refused push moved the remote's bob to %s; want it kept at %s", got, theirs)
	}
}
