package worktree

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Across machines. A member served on another machine than the lead's
// checkout works in a work tree of its own clone; its branch reaches the
// lead's checkout through a git remote both machines reach. The member's
// side pushes the branch ([Publish]); the lead's side fetches it into a
// ref of its own ([Fetch]) and reads ([ReadFetched]) or merges
// ([Merger.MergeFetched]) that ref as it would the branch of a work tree
// beside it. The push never forces: a remote branch holding commits the
// member's branch lacks refuses it, and nothing is lost.

// ErrPushRefused: the remote refused the member's branch, or cannot be
// reached.
var ErrPushRefused = errors.New("worktree: the remote did not take the member's branch")

// ErrFetch: the member's branch could not be fetched from the remote.
var ErrFetch = errors.New("worktree: the member's branch could not be fetched from the remote")

// Published is a member's branch as its side pushed it.
type Published struct {
	Worktree    string   `json:"worktree"` // the work tree, on the member's machine
	Branch      string   `json:"branch"`
	Commit      string   `json:"commit"`
	Uncommitted []string `json:"uncommitted"` // paths the push did not carry
}

// Publish pushes the branch of the member's work tree at path, of repo, to
// remote, under the same name, and tells its commit and what its work
// tree holds uncommitted (which no push carries).
func Publish(ctx context.Context, repo, path, remote string) (Published, error) {
	branch, err := memberTree(ctx, repo, path)
	if err != nil {
		return Published{}, err
	}
	p := Published{Worktree: path, Branch: branch}
	if p.Commit, err = line(ctx, repo, "rev-parse", "refs/heads/"+branch); err != nil {
		return Published{}, err
	}
	if p.Uncommitted, err = dirty(ctx, path, false); err != nil {
		return Published{}, err
	}
	if p.Uncommitted == nil {
		p.Uncommitted = []string{}
	}
	spec := "refs/heads/" + branch + ":refs/heads/" + branch
	if _, err := git(ctx, repo, "push", "--quiet", "--", remote, spec); err != nil {
		return Published{}, fmt.Errorf("%w: %v", ErrPushRefused, err)
	}
	return p, nil
}

// fetchedRef is the ref of repo that holds the member's branch fetched.
func fetchedRef(branch string) string { return "refs/fleetstate/members/" + branch }

// Fetch fetches branch from remote into repo, at a ref of fleetstate's
// own (no branch of repo moves), and checks that it is at commit.
func Fetch(ctx context.Context, repo, remote, branch, commit string) error {
	if err := checkBranchName(ctx, repo, branch); err != nil {
		return err
	}
	spec := "+refs/heads/" + branch + ":" + fetchedRef(branch)
	if _, err := git(ctx, repo, "fetch", "--quiet", "--no-tags", "--", remote, spec); err != nil {
		return fmt.Errorf("%w: %v", ErrFetch, err)
	}
	tip, err := line(ctx, repo, "rev-parse", fetchedRef(branch))
	if err != nil {
		return err
	}
	if len(commit) < 7 || !strings.HasPrefix(tip, strings.ToLower(commit)) {
		return fmt.Errorf("%w: the remote's %s is at %.12s, not %s", ErrBranchMoved, branch, tip, commit)
	}
	return nil
}

// ReadFetched returns the changes of branch as Fetch fetched it into repo,
// the lead's checkout, as Read does for a work tree beside it; the work
// tree and what it holds uncommitted are p's.
func ReadFetched(ctx context.Context, repo string, p Published, diffLimit int) (Changes, error) {
	c, err := readRef(ctx, repo, p.Branch, fetchedRef(p.Branch), diffLimit)
	if err != nil {
		return Changes{}, err
	}
	c.Worktree, c.Uncommitted = p.Worktree, p.Uncommitted
	return c, nil
}

// MergeFetched merges branch as Fetch fetched it into repo, the lead's
// checkout, as Merge does for a work tree beside it; p says what the
// member's work tree held uncommitted when it was pushed, which refuses
// the merge.
func (m *Merger) MergeFetched(ctx context.Context, repo string, p Published, o MergeOptions) (Merged, error) {
	unlock, err := m.lock(ctx, repo)
	if err != nil {
		return Merged{}, err
	}
	defer unlock()
	memberClean := func() error {
		if len(p.Uncommitted) > 0 {
			return fmt.Errorf("%w: %s", ErrMemberDirty, strings.Join(clip(p.Uncommitted), ", "))
		}
		return nil
	}
	return mergeRef(ctx, repo, p.Branch, fetchedRef(p.Branch), memberClean, o)
}
