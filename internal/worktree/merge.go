package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// ConflictError is a merge refused because the branch does not merge
// cleanly; it matches [ErrConflict].
type ConflictError struct {
	Branch string
	Files  []string // the files in conflict
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("worktree: %s does not merge cleanly: conflicts in %s", e.Branch, strings.Join(clip(e.Files), ", "))
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// CheckError is a merge refused because the check failed on the merged
// result; it matches [ErrCheckFailed].
type CheckError struct {
	Check string
	Err   error  // how it failed: its exit status, or the bound passed
	Tail  string // the end of its output, standard error and output together
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("worktree: the check %q failed on the merged result (%v); its output ends:\n%s", e.Check, e.Err, e.Tail)
}

func (e *CheckError) Is(target error) bool { return target == ErrCheckFailed }

// MergeOptions are a merge's settings.
type MergeOptions struct {
	// Check is a shell command run in the merged result before the lead's
	// branch moves; the merge is refused if it fails. "" runs none.
	Check string
	// CheckTimeout bounds the check; zero means DefaultCheckTimeout.
	CheckTimeout time.Duration
	// Message is the merge commit's message; "" means git's default.
	Message string
	// Commit, if set, is the commit of the member's branch the merge is
	// for, as Read told it (7 hex digits at least): the merge is refused
	// with ErrBranchMoved if the branch is elsewhere, and merges that
	// commit even if the branch moves meanwhile.
	Commit string
}

// DefaultCheckTimeout bounds a check run without a bound of its own.
const DefaultCheckTimeout = 10 * time.Minute

// TailBytes is how much of a failing check's output a [CheckError] keeps.
const TailBytes = 4 << 10

// Merged is a merge done.
type Merged struct {
	Branch string `json:"branch"` // the member's branch
	Into   string `json:"into"`   // the lead's branch
	Commit string `json:"commit"` // the lead's branch now; unchanged when UpToDate
	// UpToDate: the lead's branch held the member's branch already, and
	// nothing changed.
	UpToDate bool `json:"up_to_date,omitempty"`
}

// A Merger merges members' branches into lead checkouts one at a time for
// each repository, each on the result of the one before. The zero Merger
// is ready; it is safe for concurrent use.
type Merger struct {
	mu    sync.Mutex
	repos map[string]*sync.Mutex // by the repository's common git folder
}

// lock takes the lock of repo's repository and returns its release.
func (m *Merger) lock(ctx context.Context, repo string) (func(), error) {
	common, err := line(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.repos == nil {
		m.repos = map[string]*sync.Mutex{}
	}
	l := m.repos[common]
	if l == nil {
		l = new(sync.Mutex)
		m.repos[common] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock, nil
}

// Merge merges the branch of the member's work tree at path into the
// branch checked out in the lead's checkout repo. It is refused, with
// nothing changed, while either has uncommitted changes (in the lead's,
// untracked files do not count), on a conflict ([*ConflictError]), when
// the check fails ([*CheckError]), or when the lead's branch moved
// meanwhile. The merge is made in a temporary work tree, removed after.
func (m *Merger) Merge(ctx context.Context, repo, path string, o MergeOptions) (Merged, error) {
	unlock, err := m.lock(ctx, repo)
	if err != nil {
		return Merged{}, err
	}
	defer unlock()
	branch, err := memberTree(ctx, repo, path)
	if err != nil {
		return Merged{}, err
	}
	memberClean := func() error {
		if files, err := dirty(ctx, path, false); err != nil {
			return err
		} else if len(files) > 0 {
			return fmt.Errorf("%w: %s", ErrMemberDirty, strings.Join(clip(files), ", "))
		}
		return nil
	}
	return mergeRef(ctx, repo, branch, "refs/heads/"+branch, memberClean, o)
}

// mergeRef merges ref, the commit of the member's branch, into the branch
// checked out in repo, as Merge does, once the lead's checkout and then
// memberClean found nothing uncommitted; the caller holds repo's lock.
func mergeRef(ctx context.Context, repo, branch, ref string, memberClean func() error, o MergeOptions) (Merged, error) {
	into, err := branchOf(ctx, repo)
	if err != nil {
		return Merged{}, err
	}
	if files, err := dirty(ctx, repo, true); err != nil {
		return Merged{}, err
	} else if len(files) > 0 {
		return Merged{}, fmt.Errorf("%w: %s", ErrLeadDirty, strings.Join(clip(files), ", "))
	}
	if err := memberClean(); err != nil {
		return Merged{}, err
	}
	head, err := line(ctx, repo, "rev-parse", "refs/heads/"+into)
	if err != nil {
		return Merged{}, err
	}
	tip, err := line(ctx, repo, "rev-parse", ref)
	if err != nil {
		return Merged{}, err
	}
	if o.Commit != "" && (len(o.Commit) < 7 || !strings.HasPrefix(tip, strings.ToLower(o.Commit))) {
		return Merged{}, fmt.Errorf("%w: %s is at %.12s, not %s", ErrBranchMoved, branch, tip, o.Commit)
	}
	res := Merged{Branch: branch, Into: into, Commit: head}
	if _, err := git(ctx, repo, "merge-base", "--is-ancestor", tip, head); err == nil {
		res.UpToDate = true
		return res, nil
	}
	commit, err := mergeBeside(ctx, repo, head, tip, branch, o)
	if err != nil {
		return Merged{}, err
	}
	if now, err := line(ctx, repo, "rev-parse", "refs/heads/"+into); err != nil || now != head {
		return Merged{}, fmt.Errorf("%w: %s was %.12s and is now %.12s", ErrLeadMoved, into, head, now)
	}
	if _, err := git(ctx, repo, "merge", "--ff-only", "--quiet", commit); err != nil {
		if strings.Contains(err.Error(), "untracked working tree files would be overwritten") {
			return Merged{}, fmt.Errorf("%w: %v", ErrLeadDirty, err) // git changed nothing
		}
		return Merged{}, err
	}
	res.Commit = commit
	return res, nil
}

// mergeBeside merges tip, the commit of branch, into head in a temporary
// work tree, runs the check there, and returns the merged commit.
func mergeBeside(ctx context.Context, repo, head, tip, branch string, o MergeOptions) (string, error) {
	tmp, err := os.MkdirTemp("", "fleetstate-merge-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if _, err := git(ctx, repo, "worktree", "add", "--quiet", "--detach", tmp, head); err != nil {
		return "", err
	}
	defer func() {
		// Not ctx: the temporary tree goes even when the caller gave up.
		_, _ = git(context.Background(), repo, "worktree", "remove", "--force", tmp)
		_, _ = git(context.Background(), repo, "worktree", "prune")
	}()
	args := []string{"merge", "--no-ff", "--no-edit", "--quiet"}
	if o.Message != "" {
		args = append(args, "-m", o.Message)
	}
	if o.Message == "" {
		args = append(args, "-m", "Merge branch '"+branch+"'")
	}
	if _, err := git(ctx, tmp, append(args, tip)...); err != nil {
		files, ferr := git(ctx, tmp, "diff", "--name-only", "--diff-filter=U", "-z")
		if ferr != nil || files == "" {
			return "", err
		}
		return "", &ConflictError{Branch: branch, Files: strings.Split(strings.TrimSuffix(files, "\x00"), "\x00")}
	}
	if o.Check != "" {
		if err := runCheck(ctx, tmp, o); err != nil {
			return "", err
		}
	}
	return line(ctx, tmp, "rev-parse", "HEAD")
}

// runCheck runs o.Check in dir through the shell, within its bound.
func runCheck(ctx context.Context, dir string, o MergeOptions) error {
	bound := o.CheckTimeout
	if bound <= 0 {
		bound = DefaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", o.Check)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("no end within %v", bound)
	} else if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		err = fmt.Errorf("%v", ee.ProcessState)
	}
	return &CheckError{Check: o.Check, Err: err, Tail: out.String()}
}

// tailBuffer keeps the last TailBytes written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*TailBytes {
		t.b = append(t.b[:0], t.b[len(t.b)-TailBytes:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > TailBytes {
		b = b[len(b)-TailBytes:]
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}
