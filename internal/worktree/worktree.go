// Package worktree keeps the git work trees of a fleet's members: it makes
// a member's work tree on a branch of its own, tells the lead what the
// branch holds, and merges the branch back into the lead's checkout.
//
// Nothing here loses a commit or an uncommitted change. A work tree is
// made only where nothing else is, and removed only when it holds no
// uncommitted change; the member's branch is never rewritten. A merge is
// made in a temporary work tree beside the lead's checkout, where a
// conflict or a failing check leaves nothing behind; the lead's branch
// then only moves forward to the merged commit, and only if it has not
// moved meanwhile.
//
// Every function runs the git command found on PATH.
package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The errors of the package. An error returned wraps one of them, with
// what git said or what was found.
var (
	// ErrNoGit: the git command cannot be run.
	ErrNoGit = errors.New("worktree: git cannot be run")
	// ErrNotRepo: the lead's folder is not in a git repository, or has
	// no commit yet.
	ErrNotRepo = errors.New("worktree: not a git repository with a commit")
	// ErrPathTaken: the work tree's path holds something else: a file,
	// a folder that is not empty, or a work tree of another branch.
	ErrPathTaken = errors.New("worktree: the path holds something else")
	// ErrBranchTaken: the branch is checked out in another work tree.
	ErrBranchTaken = errors.New("worktree: the branch is checked out elsewhere")
	// ErrNotWorktree: the path is not a work tree of the repository.
	ErrNotWorktree = errors.New("worktree: not a work tree of the repository")
	// ErrMemberDirty: the member's work tree has uncommitted changes.
	ErrMemberDirty = errors.New("worktree: the member's work tree has uncommitted changes")
	// ErrLeadDirty: the lead's checkout has uncommitted changes.
	ErrLeadDirty = errors.New("worktree: the lead's checkout has uncommitted changes")
	// ErrDetached: a checkout is on no branch.
	ErrDetached = errors.New("worktree: the checkout is on no branch")
	// ErrConflict: the branch does not merge cleanly; a [*ConflictError]
	// names the files.
	ErrConflict = errors.New("worktree: the merge conflicts")
	// ErrCheckFailed: the check command failed on the merged result; a
	// [*CheckError] holds the tail of its output.
	ErrCheckFailed = errors.New("worktree: the check failed on the merged result")
	// ErrLeadMoved: the lead's branch moved while the merge was made.
	ErrLeadMoved = errors.New("worktree: the lead's branch moved during the merge")
	// ErrBranchMoved: the member's branch is not at the commit a merge
	// was asked for.
	ErrBranchMoved = errors.New("worktree: the member's branch is not at the commit asked for")
)

// git runs git in dir with args and returns its standard output. An error
// carries its standard error.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	var out bytes.Buffer
	err := gitTo(ctx, dir, &out, args...)
	return out.String(), err
}

// gitTo runs git in dir with args, its standard output to out.
func gitTo(ctx context.Context, dir string, out io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	// No optional locks: a status read must not take the index's lock
	// (to refresh it) from under the member's own git, which would then
	// fail on index.lock.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0")
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fmt.Errorf("%w: %v", ErrNoGit, err)
		}
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("git %s: %s", args[0], msg)
	}
	return nil
}

// line runs git and returns its output's first line.
func line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := git(ctx, dir, args...)
	s, _, _ := strings.Cut(out, "\n")
	return s, err
}

// Root returns the top of the work tree that holds dir: the lead's
// checkout when dir is the fleet file's folder.
func Root(ctx context.Context, dir string) (string, error) {
	top, err := line(ctx, dir, "rev-parse", "--show-toplevel")
	if errors.Is(err, ErrNoGit) {
		return "", err
	}
	if err != nil || top == "" {
		return "", fmt.Errorf("%w: %s", ErrNotRepo, dir)
	}
	if _, err := line(ctx, top, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err != nil {
		return "", fmt.Errorf("%w: %s has no commit", ErrNotRepo, top)
	}
	return top, nil
}

// branchOf returns the branch checked out at dir.
func branchOf(ctx context.Context, dir string) (string, error) {
	b, err := line(ctx, dir, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil || b == "" {
		return "", fmt.Errorf("%w: %s", ErrDetached, dir)
	}
	return b, nil
}

// tree is a work tree as git worktree list tells it.
type tree struct {
	path   string
	branch string // short name; "" when detached
}

// trees lists the work trees of repo, the main one first.
func trees(ctx context.Context, repo string) ([]tree, error) {
	out, err := git(ctx, repo, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var ts []tree
	for _, f := range strings.Split(out, "\x00") {
		switch {
		case strings.HasPrefix(f, "worktree "):
			ts = append(ts, tree{path: f[len("worktree "):]})
		case strings.HasPrefix(f, "branch ") && len(ts) > 0:
			ts[len(ts)-1].branch = strings.TrimPrefix(f[len("branch "):], "refs/heads/")
		}
	}
	return ts, nil
}

// samePath reports whether a and b name the same folder.
func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// dirty returns what git status lists in dir: paths with uncommitted
// changes, and untracked ones unless trackedOnly.
func dirty(ctx context.Context, dir string, trackedOnly bool) ([]string, error) {
	args := []string{"status", "--porcelain=v1", "-z"}
	if trackedOnly {
		args = append(args, "--untracked-files=no")
	}
	out, err := git(ctx, dir, args...)
	if err != nil {
		return nil, err
	}
	var paths []string
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		paths = append(paths, f[3:])
		if f[0] == 'R' || f[0] == 'C' {
			i++ // the name it came from
		}
	}
	return paths, nil
}

// Spec names a member's work tree.
type Spec struct {
	Repo   string // the lead's checkout, whose repository the tree joins
	Path   string // where the work tree is
	Branch string // the member's branch
	Base   string // what a new branch starts from; "" means Repo's HEAD
}

// Ensure makes the work tree s names, or finds it made: it reports
// whether it made it. A path that holds anything else, or a branch checked
// out elsewhere, is refused and nothing changes. A branch that exists
// without a work tree (one removed by [Remove]) is checked out again as it
// is, whatever Base says.
func Ensure(ctx context.Context, s Spec) (made bool, err error) {
	if _, err := Root(ctx, s.Repo); err != nil {
		return false, err
	}
	if err := checkBranchName(ctx, s.Repo, s.Branch); err != nil {
		return false, err
	}
	ts, err := trees(ctx, s.Repo)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		switch {
		case samePath(t.path, s.Path) && t.branch == s.Branch:
			if _, err := os.Stat(s.Path); err != nil {
				return false, fmt.Errorf("%w: %s is a work tree of %s that is gone; git worktree prune forgets it", ErrPathTaken, s.Path, s.Branch)
			}
			return false, nil
		case samePath(t.path, s.Path):
			what := "a detached head"
			if t.branch != "" {
				what = "branch " + t.branch
			}
			return false, fmt.Errorf("%w: %s is a work tree of %s, not of %s", ErrPathTaken, s.Path, what, s.Branch)
		case t.branch == s.Branch:
			return false, fmt.Errorf("%w: %s is checked out at %s", ErrBranchTaken, s.Branch, t.path)
		}
	}
	if fi, err := os.Stat(s.Path); err == nil {
		entries, _ := os.ReadDir(s.Path)
		if !fi.IsDir() || len(entries) > 0 {
			return false, fmt.Errorf("%w: %s exists and is not an empty folder", ErrPathTaken, s.Path)
		}
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return false, err
	}
	args := []string{"worktree", "add", "--quiet"}
	if _, err := line(ctx, s.Repo, "rev-parse", "--verify", "-q", "refs/heads/"+s.Branch); err == nil {
		args = append(args, s.Path, s.Branch)
	} else {
		base := s.Base
		if base == "" {
			base = "HEAD"
		}
		if _, err := line(ctx, s.Repo, "rev-parse", "--verify", "-q", base+"^{commit}"); err != nil {
			return false, fmt.Errorf("worktree: base %q of %s is not a commit", base, s.Branch)
		}
		args = append(args, "-b", s.Branch, s.Path, base)
	}
	if _, err := git(ctx, s.Repo, args...); err != nil {
		return false, err
	}
	return true, nil
}

// checkBranchName refuses a name git would not take for a branch.
func checkBranchName(ctx context.Context, repo, branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("worktree: %q is not a branch name", branch)
	}
	if _, err := git(ctx, repo, "check-ref-format", "--branch", branch); err != nil {
		return fmt.Errorf("worktree: %q is not a branch name", branch)
	}
	return nil
}

// Remove removes the work tree at path from repo, keeping its branch,
// when it holds no uncommitted change (untracked files count).
func Remove(ctx context.Context, repo, path string) error {
	if _, err := memberTree(ctx, repo, path); err != nil {
		return err
	}
	files, err := dirty(ctx, path, false)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		return fmt.Errorf("%w: %s", ErrMemberDirty, strings.Join(clip(files), ", "))
	}
	_, err = git(ctx, repo, "worktree", "remove", path)
	return err
}

// memberTree returns the branch of the work tree at path, which must be
// one of repo's other than the lead's own.
func memberTree(ctx context.Context, repo, path string) (string, error) {
	ts, err := trees(ctx, repo)
	if err != nil {
		return "", err
	}
	for i, t := range ts {
		if samePath(t.path, path) && i > 0 {
			if t.branch == "" {
				return "", fmt.Errorf("%w: %s", ErrDetached, path)
			}
			return t.branch, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrNotWorktree, path)
}

// clip keeps the first few of a list of files for a message.
func clip(files []string) []string {
	if len(files) > 10 {
		return append(files[:10:10], fmt.Sprintf("and %d more", len(files)-10))
	}
	return files
}
