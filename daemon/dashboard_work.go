package daemon

import (
	"context"

	"github.com/fleetstate/fleetstate/daemon/dashboard"
)

// dashWork is the members' work trees as the dashboard reads and
// merges them: the same calls as fleet_changes and fleet_merge.
type dashWork struct{ *worktrees }

// dashboardWork returns st's work trees for the dashboard, nil if no
// member has one.
func (st *state) dashboardWork() dashboard.Work {
	if st.worktrees == nil {
		return nil
	}
	return dashWork{st.worktrees}
}

// Members names the members with a work tree, in the fleet file's order;
// on a fleet kept in NATS, those of every daemon's, by name.
func (w dashWork) Members() []string {
	if w.listed != nil {
		return w.listed()
	}
	var names []string
	for _, a := range w.ro.Agents {
		if a.Worktree != nil {
			names = append(names, a.Name)
		}
	}
	return names
}

// Merge is worktrees.MergeAt, its result as fleet_merge answers it.
func (w dashWork) Merge(ctx context.Context, by, member, commit string) (any, error) {
	return w.worktrees.MergeAt(ctx, by, member, commit)
}
