package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/internal/worktree"
)

// Worktree is a member's git work tree of its own, the fleet file's
// "worktree": true, or an object naming the branch and the commit a new
// branch starts from. fleetstate up makes the work tree (or finds it
// made) before it starts the member, whose workdir it becomes; down keeps
// it, with its branch.
type Worktree struct {
	// Branch is the member's branch; empty means the member's name.
	Branch string `json:"branch,omitempty"`
	// Base is what a new branch starts from (a branch, tag or commit);
	// empty means the commit the lead's checkout is on when up makes it.
	Base string `json:"base,omitempty"`

	// Repo is the lead's checkout, the top of the git work tree that
	// holds the agent's workdir as the file gives it; Path is the member's
	// work tree, worktrees/NAME in the state directory's private folder.
	// LoadRoster sets both.
	Repo string `json:"-"`
	Path string `json:"-"`

	off bool // "worktree": false
}

// UnmarshalJSON takes true, false or {"branch", "base"}.
func (w *Worktree) UnmarshalJSON(data []byte) error {
	switch string(bytes.TrimSpace(data)) {
	case "true":
		*w = Worktree{}
		return nil
	case "false":
		*w = Worktree{off: true}
		return nil
	}
	type plain Worktree
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("worktree: want true or an object with branch and base: %v", err)
	}
	*w = Worktree(p)
	return nil
}

// ErrWorktreeNeedsRemote is the error of a fleet file that gives a member
// a work tree, served on NATS JetStream, without "remote": the fleet's
// daemons may run on other machines than the lead's checkout, and a
// member's branch reaches it only through a git remote.
var ErrWorktreeNeedsRemote = errors.New("work trees on a fleet kept in NATS need \"remote\" in the fleet file: a git remote (a URL, or a path every machine shares) through which a member's branch reaches the lead's checkout on another machine")

// validateWorktree checks agent i's work tree and names its branch.
func (ro *Roster) validateWorktree(i int) error {
	a := &ro.Agents[i]
	if a.Worktree == nil {
		return nil
	}
	if a.Worktree.off {
		a.Worktree = nil
		return nil
	}
	at := fmt.Sprintf("agents[%d].worktree", i)
	switch {
	case a.Role != "member":
		return fmt.Errorf("%s: only a member has a work tree of its own; the lead works in its checkout", at)
	case a.Command == nil:
		return fmt.Errorf("%s: only an agent with a command has one", at)
	case strings.ContainsRune(a.Worktree.Branch+a.Worktree.Base, 0):
		return fmt.Errorf("%s: holds a NUL byte", at)
	case strings.HasPrefix(a.Worktree.Branch, "-") || strings.HasPrefix(a.Worktree.Base, "-"):
		return fmt.Errorf("%s: a branch or base may not begin with -", at)
	}
	if a.Worktree.Branch == "" {
		a.Worktree.Branch = a.Name
	}
	for j, b := range ro.Agents[:i] {
		if b.Worktree != nil && b.Worktree.Branch == a.Worktree.Branch {
			return fmt.Errorf("%s.branch: %q is agents[%d]'s branch already", at, a.Worktree.Branch, j)
		}
	}
	return nil
}

// resolve finds the lead's checkout from a's workdir as the file gives
// it, and makes a's workdir the same folder in its work tree.
func (w *Worktree) resolve(a *RosterAgent, private string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	repo, err := worktree.Root(ctx, a.Workdir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(repo, a.Workdir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return errors.Join(fmt.Errorf("%s is not inside %s", a.Workdir, repo), err)
	}
	w.Repo = repo
	w.Path = filepath.Join(private, "worktrees", a.Name)
	a.Workdir = filepath.Join(w.Path, rel)
	return nil
}

// Spec is what internal/worktree needs to make w.
func (w *Worktree) spec() worktree.Spec {
	return worktree.Spec{Repo: w.Repo, Path: w.Path, Branch: w.Branch, Base: w.Base}
}

// MergeSettings are the fleet file's "merge": how a member's work tree
// is merged back into the lead's checkout.
type MergeSettings struct {
	// Check is a shell command run in the merged result before the lead's
	// branch moves (the project's tests, say); a failing check refuses the
	// merge.
	Check string `json:"check,omitempty"`
	// CheckTimeout bounds the check, a Go duration ("10m"); empty means
	// 10 minutes.
	CheckTimeout string `json:"check_timeout,omitempty"`
	// Approval makes each merge wait for a person's allow: a permission
	// request of the member for the tool "Merge", decided as any other
	// (fleetstate approve or deny, watch, the dashboard). A merge not
	// allowed within the requests' window is refused.
	Approval bool `json:"approval,omitempty"`

	timeout time.Duration
}

func (m *MergeSettings) validate() error {
	if strings.ContainsRune(m.Check, 0) {
		return errors.New("merge.check: holds a NUL byte")
	}
	if m.CheckTimeout != "" {
		d, err := time.ParseDuration(m.CheckTimeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("merge.check_timeout: %q is not a positive duration such as \"10m\"", m.CheckTimeout)
		}
		m.timeout = d
	}
	return nil
}

// EnsureWorktrees makes the members' work trees, or finds them made, and
// tells report of each one it made. It stops at the first that cannot be
// made, naming the agent: a path or branch that holds something else is
// refused, and nothing of it changes.
func (ro *Roster) EnsureWorktrees(ctx context.Context, report func(format string, args ...any)) error {
	for i, a := range ro.Agents {
		if a.Worktree == nil {
			continue
		}
		made, err := worktree.Ensure(ctx, a.Worktree.spec())
		if err != nil {
			return fmt.Errorf("agents[%d].worktree (%s): %w", i, a.Name, err)
		}
		if made {
			report("%s: made a work tree at %s on branch %s", a.Name, a.Worktree.Path, a.Worktree.Branch)
		}
	}
	return nil
}

// RemoveWorktrees removes the members' work trees that hold nothing
// uncommitted, keeping their branches, and tells report of each: removed,
// or kept and why. It is for a fleet that is down.
func (ro *Roster) RemoveWorktrees(ctx context.Context, report func(format string, args ...any)) {
	for _, a := range ro.Agents {
		w := a.Worktree
		if w == nil {
			continue
		}
		if _, err := os.Stat(w.Path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := worktree.Remove(ctx, w.Repo, w.Path); err != nil {
			report("%s: kept the work tree %s: %v", a.Name, w.Path, err)
			continue
		}
		report("%s: removed the work tree %s; its branch %s stays", a.Name, w.Path, w.Branch)
	}
}
