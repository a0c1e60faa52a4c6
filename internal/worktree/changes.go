package worktree

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Changes is what a member's branch holds for the lead.
type Changes struct {
	Worktree string `json:"worktree"` // the member's work tree
	Branch   string `json:"branch"`   // the member's branch
	Commit   string `json:"commit"`   // the branch's last commit
	Into     string `json:"into"`     // the lead's branch, which a merge moves
	Ahead    int    `json:"ahead"`    // commits of Branch not in Into
	Behind   int    `json:"behind"`   // commits of Into not in Branch
	// Files are the files Branch changed since it left Into, with line
	// counts.
	Files []FileChange `json:"files"`
	// Uncommitted are the paths with changes not committed in the work
	// tree, untracked ones included: a merge takes none of them.
	Uncommitted []string `json:"uncommitted"`
	// Diff is the diff of Files, when asked for, clipped to the bound
	// asked; DiffBytes is its whole size.
	Diff        string `json:"diff,omitempty"`
	DiffBytes   int    `json:"diff_bytes,omitempty"`
	DiffClipped bool   `json:"diff_clipped,omitempty"`
}

// FileChange is one file a branch changed.
type FileChange struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// Read returns the changes of the member's work tree at path against the
// lead's checkout repo. With diffLimit > 0 it includes the diff, at most
// diffLimit bytes of it.
func Read(ctx context.Context, repo, path string, diffLimit int) (Changes, error) {
	branch, err := memberTree(ctx, repo, path)
	if err != nil {
		return Changes{}, err
	}
	c, err := readRef(ctx, repo, branch, "refs/heads/"+branch, diffLimit)
	if err != nil {
		return Changes{}, err
	}
	c.Worktree = path
	if c.Uncommitted, err = dirty(ctx, path, false); err != nil {
		return Changes{}, err
	}
	if c.Uncommitted == nil {
		c.Uncommitted = []string{}
	}
	return c, nil
}

// readRef returns the changes of ref, the commit of the member's branch,
// against the lead's checkout repo, but the work tree's path and what it
// holds uncommitted.
func readRef(ctx context.Context, repo, branch, ref string, diffLimit int) (Changes, error) {
	into, err := branchOf(ctx, repo)
	if err != nil {
		return Changes{}, err
	}
	c := Changes{Branch: branch, Into: into, Files: []FileChange{}}
	if c.Commit, err = line(ctx, repo, "rev-parse", ref); err != nil {
		return Changes{}, err
	}
	counts, err := line(ctx, repo, "rev-list", "--left-right", "--count", "refs/heads/"+into+"..."+ref)
	if err != nil {
		return Changes{}, err
	}
	if _, err := fmt.Sscanf(counts, "%d %d", &c.Behind, &c.Ahead); err != nil {
		return Changes{}, fmt.Errorf("worktree: rev-list said %q", counts)
	}
	span := "refs/heads/" + into + "..." + ref
	out, err := git(ctx, repo, "diff", "--numstat", "--no-renames", "-z", span)
	if err != nil {
		return Changes{}, err
	}
	for _, f := range strings.Split(out, "\x00") {
		added, rest, ok1 := strings.Cut(f, "\t")
		deleted, name, ok2 := strings.Cut(rest, "\t")
		if !ok1 || !ok2 {
			continue
		}
		fc := FileChange{Path: name, Binary: added == "-"}
		fc.Added, _ = strconv.Atoi(added)
		fc.Deleted, _ = strconv.Atoi(deleted)
		c.Files = append(c.Files, fc)
	}
	if diffLimit > 0 {
		var head headBuffer
		head.keep = diffLimit + utf8.UTFMax
		if err := gitTo(ctx, repo, &head, "diff", "--no-renames", "--no-color", span); err != nil {
			return Changes{}, err
		}
		d := head.b
		c.DiffBytes = head.n
		if head.n > diffLimit {
			n := diffLimit
			for n > 0 && !utf8.RuneStart(d[n]) {
				n-- // not within a character
			}
			d, c.DiffClipped = d[:n], true
		}
		c.Diff = string(d)
	}
	return c, nil
}

// headBuffer keeps the first keep bytes written to it, and counts them
// all: a diff of any size costs that much memory.
type headBuffer struct {
	keep int
	b    []byte
	n    int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.n += len(p)
	if room := h.keep - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
