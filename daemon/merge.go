package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/worktree"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// MaxDiff bounds the diff fleet_changes returns; the result tells the
// whole size.
const MaxDiff = 256 << 10

// Merge is the answer of fleet_merge and of fleetstate merge: the merge
// done, or why it was refused, with nothing changed.
type Merge struct {
	Member string `json:"member"`
	Merged bool   `json:"merged"`
	// Reason names a refusal: open_turn, member_dirty, lead_dirty,
	// detached, conflict, check_failed, lead_moved, branch_moved (not
	// at the commit asked for), or with the fleet file's merge approval
	// denied or not_approved.
	Reason  string   `json:"reason,omitempty"`
	Message string   `json:"message,omitempty"`
	Files   []string `json:"files,omitempty"` // in conflict
	// CheckOutput is the end of a failing check's output.
	CheckOutput string `json:"check_output,omitempty"`
	// Branch was merged into Into, whose commit is now Commit; UpToDate
	// says Into held Branch already.
	Branch   string `json:"branch,omitempty"`
	Into     string `json:"into,omitempty"`
	Commit   string `json:"commit,omitempty"`
	UpToDate bool   `json:"up_to_date,omitempty"`
}

// worktrees answers fleet_changes and fleet_merge for the members of ro
// that have a work tree, or, on a fleet kept in NATS, for the members of
// every daemon's fleet file (see across.go).
type worktrees struct {
	ro     *Roster
	rv     *fleetstate.Rendezvous
	merger worktree.Merger
	// peer, on a fleet kept in NATS, asks the daemon of agent's pane (this
	// one's too); leads lists the fleet's leads, whose daemons may hold
	// the lead's checkout. Nil on a fleet on disk.
	peer   func(ctx context.Context, agent string, req gitRequest) (gitReply, error)
	leads  func() []string
	listed func() []string // the members with a work tree, on every daemon

	mu       sync.Mutex
	refusals map[string]int // by commit: merge requests denied or left undecided
}

// tree returns the work tree of member, or the error a tool answers.
func (w *worktrees) tree(op, member string) (*Worktree, error) {
	for _, a := range w.ro.Agents {
		if a.Name == member {
			if a.Worktree == nil {
				return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op,
					Err: fmt.Errorf("%s has no work tree: give it \"worktree\": true in the fleet file", member)}
			}
			return a.Worktree, nil
		}
	}
	return nil, &fleetstate.Error{Code: fleetstate.CodeUnknownMember, Op: op, Err: fmt.Errorf("%q is not in the fleet file", member)}
}

// Changes returns what member's branch holds for the lead; withDiff adds
// the diff, at most MaxDiff bytes of it.
func (w *worktrees) Changes(ctx context.Context, member string, withDiff bool) (worktree.Changes, error) {
	limit := 0
	if withDiff {
		limit = MaxDiff
	}
	if w.peer != nil {
		p, err := w.publish(ctx, member)
		if err != nil {
			return worktree.Changes{}, err
		}
		rep, err := w.atCheckout(ctx, "", gitRequest{Op: "changes", Published: &p, DiffLimit: limit})
		if err != nil {
			return worktree.Changes{}, err
		}
		return *rep.Changes, nil
	}
	t, err := w.tree("changes", member)
	if err != nil {
		return worktree.Changes{}, err
	}
	c, err := worktree.Read(ctx, t.Repo, t.Path, limit)
	if err != nil {
		return worktree.Changes{}, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "changes", Err: err}
	}
	return c, nil
}

// Merge merges member's branch into the lead's checkout for by, unless
// the member has a turn open or queued, or worktree refuses it. The
// rendezvous announces the request and how it ended.
func (w *worktrees) Merge(ctx context.Context, by, member string) (Merge, error) {
	return w.MergeAt(ctx, by, member, "")
}

// MergeAt is Merge of the commit of member's branch a person saw: refused
// (branch_moved) once the branch moved on. An empty commit is Merge.
func (w *worktrees) MergeAt(ctx context.Context, by, member, commit string) (Merge, error) {
	var t *Worktree
	if w.peer == nil {
		var err error
		if t, err = w.tree("merge", member); err != nil {
			return Merge{}, err
		}
	}
	what := "merge " + member + "'s branch into the lead's checkout"
	if t != nil {
		what = "merge " + t.Branch + " into the lead's checkout"
	}
	_ = w.rv.Announce(fleetstate.Event{Kind: fleetstate.EventMergeRequested, Member: member, By: by, Content: what})
	m, err := w.merge(ctx, t, by, member, commit)
	switch {
	case err != nil:
		_ = w.rv.Announce(fleetstate.Event{Kind: fleetstate.EventMergeRefused, Member: member, By: by, Content: "failed: " + err.Error()})
	case m.Merged && m.UpToDate:
		_ = w.rv.Announce(fleetstate.Event{Kind: fleetstate.EventMerged, Member: member, By: by, Content: m.Into + " holds " + m.Branch + " already"})
	case m.Merged:
		_ = w.rv.Announce(fleetstate.Event{Kind: fleetstate.EventMerged, Member: member, By: by, Content: fmt.Sprintf("%s into %s: %.12s", m.Branch, m.Into, m.Commit)})
	default:
		_ = w.rv.Announce(fleetstate.Event{Kind: fleetstate.EventMergeRefused, Member: member, By: by, Content: m.Reason + ": " + m.Message})
	}
	return m, err
}

// merge is Merge without its events: of t, member's work tree beside
// the lead's checkout, or with t nil, across machines.
func (w *worktrees) merge(ctx context.Context, t *Worktree, by, member, commit string) (Merge, error) {
	m := Merge{Member: member}
	for _, mi := range w.rv.Members() {
		if mi.Name == member && (mi.OpenTurn != "" || mi.Queued > 0) {
			m.Reason, m.Message = "open_turn", fmt.Sprintf("%s has a turn open or queued: merge once it has replied", member)
			return m, nil
		}
	}
	if t == nil {
		return w.mergeAcross(ctx, by, member, commit)
	}
	o := worktree.MergeOptions{Commit: commit}
	if s := w.ro.Merge; s != nil {
		o.Check, o.CheckTimeout = s.Check, s.timeout
		if s.Approval {
			c, err := worktree.Read(ctx, t.Repo, t.Path, 0)
			if err != nil {
				return m, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "merge", Err: err}
			}
			if m.Reason, m.Message, err = w.approve(ctx, c, t.Repo, member); err != nil || m.Reason != "" {
				return m, err
			}
		}
	}
	done, err := w.merger.Merge(ctx, t.Repo, t.Path, o)
	m, err = mergeResult(done, err)
	m.Member = member
	return m, err
}

// mergeResult is a merge's answer: done, or the reason err refused it.
func mergeResult(done worktree.Merged, err error) (Merge, error) {
	var m Merge
	var conflict *worktree.ConflictError
	var check *worktree.CheckError
	switch {
	case err == nil:
		m.Merged, m.Branch, m.Into, m.Commit, m.UpToDate = true, done.Branch, done.Into, done.Commit, done.UpToDate
		return m, nil
	case errors.As(err, &conflict):
		m.Reason, m.Files = "conflict", conflict.Files
	case errors.As(err, &check):
		m.Reason, m.CheckOutput = "check_failed", check.Tail
	case errors.Is(err, worktree.ErrMemberDirty):
		m.Reason = "member_dirty"
	case errors.Is(err, worktree.ErrLeadDirty):
		m.Reason = "lead_dirty"
	case errors.Is(err, worktree.ErrDetached):
		m.Reason = "detached"
	case errors.Is(err, worktree.ErrBranchMoved):
		m.Reason = "branch_moved"
	case errors.Is(err, worktree.ErrLeadMoved):
		m.Reason = "lead_moved"
	default:
		return Merge{}, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "merge", Err: err}
	}
	m.Message = err.Error()
	return m, nil
}

// tools returns fleet_changes and fleet_merge, for leads (the operator
// too, who calls as a lead).
func (w *worktrees) tools() []server.ServerTool {
	member := mcp.WithString("member", mcp.Required(), mcp.Description("the member whose work tree it is"))
	changes := mcp.NewTool("fleet_changes",
		mcp.WithDescription("Lead only. What a member's work tree holds: its path, its branch, commits ahead of and behind your branch, the files it changed with line counts, and uncommitted paths; with diff, the diff too (at most 256 KiB; diff_bytes tells the whole size)."),
		member,
		mcp.WithBoolean("diff", mcp.Description("include the diff")),
		mcp.WithOutputSchema[worktree.Changes](),
		mcp.WithTitleAnnotation("A member's changes"), mcp.WithReadOnlyHintAnnotation(true), mcp.WithOpenWorldHintAnnotation(false))
	merge := mcp.NewTool("fleet_merge",
		mcp.WithDescription("Lead only. Merge a member's branch into your checkout's branch. The merge is made beside your checkout and checked first, so a refusal changes nothing: merged false with a reason: open_turn (the member is still working), member_dirty or lead_dirty (uncommitted changes), conflict (with the files), check_failed (with the end of the check's output), lead_moved, branch_moved (with commit, the branch is no longer there) or detached."),
		member,
		mcp.WithString("commit", mcp.Description("the commit of the member's branch you saw (fleet_changes' commit, 7 hex digits at least): the merge is refused, branch_moved, if the branch is no longer there")),
		mcp.WithOutputSchema[Merge](),
		mcp.WithTitleAnnotation("Merge a member's work"), mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false))
	return []server.ServerTool{
		{Tool: changes, Handler: leadTool(func(ctx context.Context, a toolArgs) (any, error) {
			if a.Commit != "" {
				return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "changes", Err: errors.New("fleet_changes takes no commit")}
			}
			return w.Changes(ctx, a.Member, a.Diff)
		})},
		{Tool: merge, Handler: leadTool(func(ctx context.Context, a toolArgs) (any, error) {
			if a.Diff {
				return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "merge", Err: errors.New("fleet_merge takes no diff")}
			}
			id, _ := mcpadapter.IdentityOf(ctx)
			return w.MergeAt(ctx, id.Agent, a.Member, a.Commit)
		})},
	}
}

// toolArgs are the arguments of the work tree tools.
type toolArgs struct {
	Member string `json:"member"`
	Diff   bool   `json:"diff"`
	Commit string `json:"commit"` // fleet_merge's
}

// leadTool makes a handler of f for leads alone: its arguments decoded
// strictly, its result as structured content and as its JSON in text, an
// error as the adapter answers one.
func leadTool(f func(context.Context, toolArgs) (any, error)) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		op := req.Params.Name
		if id, _ := mcpadapter.IdentityOf(ctx); id.Role != mcpadapter.RoleLead {
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: op, Err: errors.New("leads only")}), nil
		}
		var a toolArgs
		data, _ := json.Marshal(req.GetArguments())
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil || a.Member == "" {
			if err == nil {
				err = errors.New("member is required")
			}
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: err}), nil
		}
		v, err := f(ctx, a)
		if err != nil {
			return mcpadapter.ErrorResult(err), nil
		}
		text, err := json.Marshal(v)
		if err != nil {
			return mcpadapter.ErrorResult(err), nil
		}
		return mcp.NewToolResultStructured(v, string(text)), nil
	}
}

// approve asks a person to allow the merge of member's branch as it is
// now, and returns why not (a reason and a message) unless they did. A
// merge asked again for the same commit finds the decision made
// meanwhile.
func (w *worktrees) approve(ctx context.Context, c worktree.Changes, cwd, member string) (reason, message string, err error) {
	input, _ := json.Marshal(map[string]any{"branch": c.Branch, "commit": c.Commit, "into": c.Into, "ahead": c.Ahead, "files": len(c.Files)})
	// The key names this commit's request, pending or allowed, for a
	// call that comes again; once one was refused, the next asks anew.
	w.mu.Lock()
	key := fmt.Sprintf("merge %s %s %d", c.Branch, c.Commit, w.refusals[c.Commit])
	w.mu.Unlock()
	d, decided, err := w.rv.RequestPermission(ctx, member, fleetstate.PermissionRequest{
		Key: key, Tool: MergeTool, Input: string(input), Cwd: cwd, Timeout: w.ro.PermissionWait()})
	if err == nil && (!decided || d.Behavior != fleetstate.BehaviorAllow) {
		w.mu.Lock()
		if w.refusals == nil {
			w.refusals = map[string]int{}
		}
		w.refusals[c.Commit]++
		w.mu.Unlock()
	}
	switch {
	case err != nil:
		return "", "", err
	case !decided:
		return "not_approved", "nobody allowed the merge in time: fleetstate merge " + member + " asks again", nil
	case d.Behavior != fleetstate.BehaviorAllow:
		return "denied", strings.TrimSpace("denied by " + d.By + ": " + d.Message), nil
	}
	return "", "", nil
}

// MergeTool is the tool a merge's permission request names.
const MergeTool = "Merge"
