package daemon

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// The owner asks the calling lead's daemon first, then the others by
// name; it passes over a lead without a checkout, one whose pane no
// daemon serves and one its daemon does not know, and stops at the first
// checkout's answer, or its failure.
func TestAtCheckoutAsksTheLeadsInTurn(t *testing.T) {
	var asked []string
	answers := map[string]func() (gitReply, error){
		"ann": func() (gitReply, error) { return gitReply{NoCheckout: true}, nil },
		"bea": func() (gitReply, error) {
			return gitReply{}, &fleetstate.Error{Code: fleetstate.CodeUnavailable, Err: errors.New("no pane")}
		},
		"cid": func() (gitReply, error) { return gitReply{}, &fleetstate.Error{Code: fleetstate.CodeUnknownMember} },
		"dot": func() (gitReply, error) { return gitReply{Changes: &worktree.Changes{Branch: "bob"}}, nil },
		"eve": func() (gitReply, error) {
			return gitReply{}, &fleetstate.Error{Code: fleetstate.CodeInternal, Err: errors.New("fetch failed")}
		},
		"zoe":  func() (gitReply, error) { return gitReply{NoCheckout: true}, nil },
		"late": func() (gitReply, error) { return gitReply{Changes: &worktree.Changes{Branch: "never"}}, nil },
	}
	leads := []string{"zoe", "dot", "eve", "cid", "bea", "ann"}
	w := &worktrees{leads: func() []string { return leads },
		peer: func(_ context.Context, agent string, _ gitRequest) (gitReply, error) {
			asked = append(asked, agent)
			return answers[agent]()
		}}
	rep, err := w.atCheckout(context.Background(), "zoe", gitRequest{Op: "changes"})
	if err != nil || rep.Changes == nil || rep.Changes.Branch != "bob" || !slices.Equal(asked, []string{"zoe", "ann", "bea", "cid", "dot"}) {
		t.Fatalf("atCheckout = %+v, %v after asking %v; want dot's answer after zoe, ann, bea, cid", rep, err, asked)
	}
	asked, leads = nil, []string{"eve", "late"}
	if _, err := w.atCheckout(context.Background(), "", gitRequest{Op: "changes"}); fleetstate.CodeOf(err) != fleetstate.CodeInternal || !slices.Equal(asked, []string{"eve"}) {
		t.Fatalf("a checkout's failure: %v after asking %v; want eve's ERR_INTERNAL, and no one after", err, asked)
	}
	asked, leads = nil, []string{"ann", "zoe"}
	if _, err := w.atCheckout(context.Background(), "", gitRequest{Op: "changes"}); fleetstate.CodeOf(err) != fleetstate.CodeUnavailable {
		t.Fatalf("no checkout anywhere: %v; want ERR_UNAVAILABLE saying so", err)
	}
}
