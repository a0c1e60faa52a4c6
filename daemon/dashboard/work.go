package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/door"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// Work is what the dashboard reads of the members' git work trees, and
// how it merges one into the lead's checkout: the daemon's work trees, as
// the lead tools fleet_changes and fleet_merge use them. Its errors are
// the library's (*fleetstate.Error), answered with their codes.
type Work interface {
	// Members names the members that have a work tree.
	Members() []string
	// Changes returns what member's work tree holds for the lead; with
	// diff, the diff too, bounded, with its whole size.
	Changes(ctx context.Context, member string, diff bool) (worktree.Changes, error)
	// Merge merges member's branch into the lead's checkout for by, and
	// returns what fleet_merge answers: merged with the commit, or
	// refused with a reason (and the files in conflict, or the end of the
	// check's output) and nothing changed. A refusal is a result, not an
	// error. A commit names the one of the branch the person saw: the
	// merge is refused (branch_moved) once the branch moved on; empty, it
	// merges the branch as it is.
	Merge(ctx context.Context, by, member, commit string) (any, error)
}

// errNoWork answers for a fleet none of whose members has a work tree.
var errNoWork = errors.New("no member of this fleet has a work tree: give one \"worktree\": true in the fleet file")

// workMembers names the members with a work tree, none without Work.
func (d *Dashboard) workMembers() []string {
	if d.o.Work == nil {
		return nil
	}
	return d.o.Work.Members()
}

// serveChanges answers GET /dashboard/changes?member=NAME (&diff=1 for
// the diff) with what the member's work tree holds, as fleet_changes
// does.
func (d *Dashboard) serveChanges(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	member := q.Get("member")
	diff := false
	if s := q.Get("diff"); s != "" {
		var err error
		if diff, err = strconv.ParseBool(s); err != nil {
			door.WriteError(w, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "changes", Err: errors.New("diff: want 1 or 0")})
			return
		}
	}
	c, err := d.changes(r.Context(), member, diff)
	if err != nil {
		door.WriteError(w, err)
		return
	}
	door.WriteJSON(w, http.StatusOK, c)
}

func (d *Dashboard) changes(ctx context.Context, member string, diff bool) (worktree.Changes, error) {
	if err := d.haveWork("changes", member); err != nil {
		return worktree.Changes{}, err
	}
	return d.o.Work.Changes(ctx, member, diff)
}

// merge merges commit of member's branch for a: the operator's login as
// [mcpadapter.OperatorAgent], a lead's as that lead, as the lead tools
// let any lead merge. It lasts as long as the request: the fleet file's
// check and its merge approval may take a while, and a page that goes
// away ends the merge, which then changes nothing.
func (d *Dashboard) merge(ctx context.Context, a actor, member, commit string) (any, error) {
	if err := d.haveWork("merge", member); err != nil {
		return nil, err
	}
	return d.o.Work.Merge(ctx, a.sender(), member, commit)
}

// haveWork returns the error op answers unless a member is named and
// some member has a work tree.
func (d *Dashboard) haveWork(op, member string) error {
	switch {
	case member == "":
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errors.New("no member")}
	case d.o.Work == nil:
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errNoWork}
	}
	return nil
}
