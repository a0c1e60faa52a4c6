package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// Work trees across machines. On a fleet kept in NATS a member's work
// tree is on the machine of the daemon whose fleet file names it, a work
// tree of that machine's clone, and the lead's checkout is on its own
// daemon's machine; the fleet's owner, which answers fleet_changes and
// fleet_merge, may be a third. The fleet file's "remote" carries the
// branch between them. The owner asks, over the fleet's member calls
// (fleetnats.RemoteMember.Call):
//
//	the member's daemon: {"op":"publish"}
//	    -> {"published": {worktree, branch, commit, uncommitted}}
//	    having pushed the branch to the remote (never forced);
//	a lead's daemon: {"op":"changes"|"merge", "published": ..., "commit"?}
//	    -> {"changes": ...} or {"merge": ...}, or {"no_checkout": true}
//	    having fetched the branch into a ref of its own and found it at
//	    the commit published.
//
// The lead's daemon merges as on one machine (beside the checkout, with
// its fleet file's merge check, refusing uncommitted work the member's
// daemon reported), from the fetched branch; the owner keeps what only
// it knows: the member's open turn and the events.

// gitRequest is a request of the work trees' protocol between daemons.
type gitRequest struct {
	Op        string              `json:"op"` // publish, changes or merge
	Published *worktree.Published `json:"published,omitempty"`
	DiffLimit int                 `json:"diff_limit,omitempty"` // of changes
	Commit    string              `json:"commit,omitempty"`     // of a merge: the one a person saw
}

// gitReply is its answer.
type gitReply struct {
	Published  *worktree.Published `json:"published,omitempty"`
	Changes    *worktree.Changes   `json:"changes,omitempty"`
	Merge      *Merge              `json:"merge,omitempty"`
	NoCheckout bool                `json:"no_checkout,omitempty"` // the lead has no checkout here
}

// maxGitReply bounds a reply, under the 1 MiB a NATS message carries by
// default: a diff that makes it longer is sent shorter.
const maxGitReply = 768 << 10

// across is a daemon's side of the work trees of a fleet kept in NATS:
// the members' work trees and the leads' checkouts its fleet file names.
type across struct {
	ro     *Roster // nil: this daemon has no fleet file
	merger worktree.Merger
}

// serve answers a request of the owner about agent, whose pane this
// daemon serves.
func (a *across) serve(ctx context.Context, agent string, body json.RawMessage) (json.RawMessage, error) {
	var req gitRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "work tree", Err: err}
	}
	var ra *RosterAgent
	if a.ro != nil {
		if i := slices.IndexFunc(a.ro.Agents, func(x RosterAgent) bool { return x.Name == agent }); i >= 0 {
			ra = &a.ro.Agents[i]
		}
	}
	if ra == nil {
		return nil, &fleetstate.Error{Code: fleetstate.CodeUnknownMember, Op: req.Op, Err: fmt.Errorf("%q is not in this daemon's fleet file", agent)}
	}
	var rep gitReply
	switch req.Op {
	case "publish":
		t := ra.Worktree
		if t == nil {
			return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: req.Op,
				Err: fmt.Errorf("%s has no work tree: give it \"worktree\": true in its daemon's fleet file", agent)}
		}
		p, err := worktree.Publish(ctx, t.Repo, t.Path, a.ro.Remote)
		if err != nil {
			return nil, &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "publish " + agent + "'s branch", Err: err}
		}
		rep.Published = &p
	case "changes", "merge":
		if ra.Role != "lead" || req.Published == nil {
			return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: req.Op, Err: errors.New("a lead's checkout reads or merges a member's published branch")}
		}
		repo, err := worktree.Root(ctx, cmp.Or(ra.Workdir, a.ro.base))
		if err != nil || a.ro.Remote == "" {
			rep.NoCheckout = true
			break
		}
		p := *req.Published
		if req.Op == "merge" {
			m, err := a.merge(ctx, repo, p, req.Commit)
			if err != nil {
				return nil, err
			}
			rep.Merge = &m
			break
		}
		if err := worktree.Fetch(ctx, repo, a.ro.Remote, p.Branch, p.Commit); err != nil {
			return nil, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "fetch " + p.Branch, Err: err}
		}
		for limit := req.DiffLimit; ; limit /= 4 {
			c, err := worktree.ReadFetched(ctx, repo, p, limit)
			if err != nil {
				return nil, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "changes", Err: err}
			}
			rep.Changes = &c
			if data, err := json.Marshal(rep); err != nil || len(data) <= maxGitReply || limit == 0 {
				return data, err
			}
		}
	default:
		return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "work tree", Err: fmt.Errorf("no operation %q", req.Op)}
	}
	return json.Marshal(rep)
}

// merge fetches p's branch into repo and merges it at commit (when
// given), as the fleet file's merge settings say. A merge the file asks a
// person to allow is refused: only the operator may allow one (leads
// that decide could allow their own), and no person holds the operator's
// token of a fleet kept in NATS, which lives in its owner's memory.
func (a *across) merge(ctx context.Context, repo string, p worktree.Published, commit string) (Merge, error) {
	o := worktree.MergeOptions{Commit: commit}
	if s := a.ro.Merge; s != nil {
		if s.Approval {
			return Merge{Reason: "not_approved", Message: "the lead's fleet file asks a person to allow each merge (merge.approval), and a fleet kept in NATS has no operator to ask: drop merge.approval there"}, nil
		}
		o.Check, o.CheckTimeout = s.Check, s.timeout
	}
	err := worktree.Fetch(ctx, repo, a.ro.Remote, p.Branch, p.Commit)
	if errors.Is(err, worktree.ErrBranchMoved) {
		return mergeResult(worktree.Merged{}, err)
	} else if err != nil {
		return Merge{}, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "fetch " + p.Branch, Err: err}
	}
	done, err := a.merger.MergeFetched(ctx, repo, p, o)
	return mergeResult(done, err)
}

// publish asks the daemon of member's pane to push its branch to the
// remote.
func (w *worktrees) publish(ctx context.Context, member string) (worktree.Published, error) {
	rep, err := w.peer(ctx, member, gitRequest{Op: "publish"})
	if err != nil {
		return worktree.Published{}, err
	}
	if rep.Published == nil {
		return worktree.Published{}, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "publish", Err: errors.New("the member's daemon answered no branch")}
	}
	return *rep.Published, nil
}

// atCheckout asks the daemon of a lead's pane that has the lead's
// checkout: the lead by's first, if it is a lead, then the others by
// name.
func (w *worktrees) atCheckout(ctx context.Context, by string, req gitRequest) (gitReply, error) {
	leads := slices.Sorted(slices.Values(w.leads()))
	if i := slices.Index(leads, by); i > 0 {
		leads = append([]string{by}, slices.Delete(leads, i, i+1)...)
	}
	for _, lead := range leads {
		rep, err := w.peer(ctx, lead, req)
		switch code := fleetstate.CodeOf(err); {
		case err == nil && !rep.NoCheckout:
			if rep.Changes == nil && rep.Merge == nil {
				return gitReply{}, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: req.Op, Err: errors.New("the lead's daemon answered nothing")}
			}
			return rep, nil
		case err == nil, code == fleetstate.CodeUnavailable && ctx.Err() == nil, code == fleetstate.CodeUnknownMember:
			// No checkout there, no daemon serving the lead's pane, or
			// a lead its daemon's fleet file does not name. A daemon
			// with the checkout answers its own failures (a fetch, say)
			// with other codes, which end the search.
		default:
			return gitReply{}, err
		}
	}
	return gitReply{}, &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: req.Op,
		Err: errors.New("no lead's daemon has the lead's checkout: name the lead, with a workdir in a clone of the remote, in its daemon's fleet file with \"remote\"")}
}

// mergeAcross merges member's branch, published to the remote, into the
// lead's checkout on its daemon's machine, for by, at commit (when given),
// as that daemon's fleet file says.
func (w *worktrees) mergeAcross(ctx context.Context, by, member, commit string) (Merge, error) {
	p, err := w.publish(ctx, member)
	if err != nil {
		return Merge{Member: member}, err
	}
	rep, err := w.atCheckout(ctx, by, gitRequest{Op: "merge", Published: &p, Commit: commit})
	if err != nil {
		return Merge{Member: member}, err
	}
	m := *rep.Merge
	m.Member = member
	return m, nil
}
