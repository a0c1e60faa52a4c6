package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/dashboard"
	"github.com/fleetstate/fleetstate/internal/worktree"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// fakeWork is a fleet in which scout has a work tree, as the daemon's
// answers it: the lead has none, anyone else is unknown. It records the
// calls it gets.
type fakeWork struct {
	mu     sync.Mutex
	diffs  []bool   // the diff argument of each Changes
	merges []string // "by member commit" of each Merge
	refuse bool     // Merge refuses, with a conflict
}

func (f *fakeWork) Members() []string { return []string{"scout"} }

func (f *fakeWork) known(op, member string) error {
	switch member {
	case "scout":
		return nil
	case "lead":
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errors.New("lead has no work tree")}
	}
	return &fleetstate.Error{Code: fleetstate.CodeUnknownMember, Op: op, Err: errors.New(member + " is not in the fleet file")}
}

func (f *fakeWork) Changes(_ context.Context, member string, diff bool) (worktree.Changes, error) {
	f.mu.Lock()
	f.diffs = append(f.diffs, diff)
	f.mu.Unlock()
	if err := f.known("changes", member); err != nil {
		return worktree.Changes{}, err
	}
	c := worktree.Changes{Worktree: "/state/worktrees/scout", Branch: "scout", Commit: "c0ffee", Into: "main", Ahead: 2, Behind: 1,
		Files: []worktree.FileChange{{Path: "a\u202e.go", Added: 3, Deleted: 1}}, Uncommitted: []string{"notes.txt"}}
	if diff {
		c.Diff, c.DiffBytes = "+a line\n", 8
	}
	return c, nil
}

func (f *fakeWork) Merge(_ context.Context, by, member, commit string) (any, error) {
	f.mu.Lock()
	f.merges = append(f.merges, by+" "+member+" "+commit)
	refuse := f.refuse
	f.mu.Unlock()
	if err := f.known("merge", member); err != nil {
		return nil, err
	}
	if refuse {
		return map[string]any{"member": member, "merged": false, "reason": "conflict", "files": []string{"a.go"}}, nil
	}
	return map[string]any{"member": member, "merged": true, "branch": "scout", "into": "main", "commit": "beef"}, nil
}

// calls returns what f was asked so far.
func (f *fakeWork) calls() ([]bool, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.diffs...), append([]string(nil), f.merges...)
}

// TestDashboardChanges: GET /dashboard/changes answers what a member's
// work tree holds for any login, the diff when asked; its mistakes are
// answered with their codes, as the actions answer them; the page has a
// place for each work tree, and none without work trees.
func TestDashboardChanges(t *testing.T) {
	work := &fakeWork{}
	x := newDashWith(t, work)
	for _, who := range []string{"operator", "lead"} {
		c := x.loggedIn(browser(t))
		if who == "lead" {
			c = x.leadLogin(browser(t), x.leadTok)
		}
		resp, body := get(t, c, x.srv.URL+dashboard.Path+"changes?member=scout")
		var ch worktree.Changes
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &ch) != nil ||
			ch.Branch != "scout" || ch.Into != "main" || ch.Ahead != 2 || ch.Behind != 1 || len(ch.Files) != 1 || ch.Diff != "" {
			t.Fatalf("%s: changes: %s %s", who, resp.Status, body)
		}
		if resp, body := get(t, c, x.srv.URL+dashboard.Path+"changes?member=scout&diff=1"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"diff":"+a line\n"`) {
			t.Fatalf("%s: changes with the diff: %s %s", who, resp.Status, body)
		}
	}
	if diffs, _ := work.calls(); len(diffs) != 4 || diffs[0] || !diffs[1] {
		t.Errorf("the diffs asked for: %v; want without, with, twice", diffs)
	}

	c := x.loggedIn(browser(t))
	for _, tc := range []struct {
		name, query string
		status      int
		code        fleetstate.Code
	}{
		{"no member", "", http.StatusBadRequest, fleetstate.CodeInvalidArgument},
		{"unknown member", "?member=nobody", http.StatusNotFound, fleetstate.CodeUnknownMember},
		{"member without a work tree", "?member=lead", http.StatusBadRequest, fleetstate.CodeInvalidArgument},
		{"diff not a boolean", "?member=scout&diff=please", http.StatusBadRequest, fleetstate.CodeInvalidArgument},
	} {
		resp, body := get(t, c, x.srv.URL+dashboard.Path+"changes"+tc.query)
		if resp.StatusCode != tc.status || !strings.Contains(body, `"`+string(tc.code)+`"`) {
			t.Errorf("%s: %s %s; want %d %s", tc.name, resp.Status, body, tc.status, tc.code)
		}
	}
	if status, _ := x.action(c, x.csrfOf(c), "changes", `{"member":"scout"}`, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("POST changes: %d; want 405", status)
	}
	if _, page := get(t, c, x.srv.URL+dashboard.Path); !strings.Contains(page, `id="work-section"`) || !strings.Contains(page, `data-work="scout"`) {
		t.Errorf("the page has no place for scout's work tree:\n%s", page)
	}

	none := newDash(t)
	c = none.loggedIn(browser(t))
	if _, page := get(t, c, none.srv.URL+dashboard.Path); strings.Contains(page, "work-section") {
		t.Errorf("a fleet without work trees has a section of them:\n%s", page)
	}
	if resp, body := get(t, c, none.srv.URL+dashboard.Path+"changes?member=scout"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "no member of this fleet has a work tree") {
		t.Errorf("changes without work trees: %s %s; want 400", resp.Status, body)
	}
}

// TestDashboardMerge: POST /dashboard/merge merges as the login's actor,
// the operator's as mcpadapter.OperatorAgent and a lead's as that lead,
// of the commit the page names, if any; a refused merge is answered as a
// result; a merge without the login,
// its CSRF token or the page's Origin is refused before anything is
// asked; mistakes are answered with their codes.
func TestDashboardMerge(t *testing.T) {
	work := &fakeWork{}
	x := newDashWith(t, work)
	op := x.loggedIn(browser(t))
	opCSRF := x.csrfOf(op)
	lead := x.leadLogin(browser(t), x.leadTok)

	scout := `{"member":"scout"}`
	for _, tc := range []struct {
		name, csrf, body string
		client           *http.Client
		edit             func(*http.Request)
		want             int
	}{
		{"no login", opCSRF, scout, browser(t), nil, http.StatusUnauthorized},
		{"no CSRF token", "", scout, op, nil, http.StatusForbidden},
		{"another login's CSRF token", opCSRF, scout, lead, nil, http.StatusForbidden},
		{"foreign Origin", opCSRF, scout, op, func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden},
		{"GET", opCSRF, scout, op, func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed},
		{"unknown field", opCSRF, `{"member":"scout","by":"lead"}`, op, nil, http.StatusBadRequest},
	} {
		if status, out := x.action(tc.client, tc.csrf, "merge", tc.body, tc.edit); status != tc.want {
			t.Errorf("merge, %s: %d %s; want %d", tc.name, status, out, tc.want)
		}
	}
	if _, merges := work.calls(); len(merges) != 0 {
		t.Fatalf("refused requests merged: %v", merges)
	}

	status, body := x.action(op, opCSRF, "merge", scout, nil)
	if status != http.StatusOK || !strings.Contains(body, `"merged":true`) || !strings.Contains(body, `"commit":"beef"`) {
		t.Fatalf("the operator's merge: %d %s", status, body)
	}
	if status, body := x.action(lead, x.csrfOf(lead), "merge", `{"member":"scout","commit":"c0ffee"}`, nil); status != http.StatusOK {
		t.Fatalf("the lead's merge: %d %s", status, body)
	}
	work.mu.Lock()
	work.refuse = true
	work.mu.Unlock()
	status, body = x.action(op, opCSRF, "merge", scout, nil)
	if status != http.StatusOK || !strings.Contains(body, `"merged":false`) || !strings.Contains(body, `"reason":"conflict"`) || !strings.Contains(body, `"files":["a.go"]`) {
		t.Fatalf("a refused merge: %d %s; want 200 and the refusal", status, body)
	}
	if _, merges := work.calls(); strings.Join(merges, ",") != mcpadapter.OperatorAgent+" scout ,lead scout c0ffee,"+mcpadapter.OperatorAgent+" scout " {
		t.Errorf("merges asked for: %q; want the operator's, the lead's of c0ffee, the operator's", merges)
	}

	for _, tc := range []struct {
		name, body string
		status     int
		code       fleetstate.Code
	}{
		{"no member", `{}`, http.StatusBadRequest, fleetstate.CodeInvalidArgument},
		{"unknown member", `{"member":"nobody"}`, http.StatusNotFound, fleetstate.CodeUnknownMember},
		{"member without a work tree", `{"member":"lead"}`, http.StatusBadRequest, fleetstate.CodeInvalidArgument},
	} {
		if status, body := x.action(op, opCSRF, "merge", tc.body, nil); status != tc.status || !strings.Contains(body, `"`+string(tc.code)+`"`) {
			t.Errorf("merge, %s: %d %s; want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}

	none := newDash(t)
	c := none.loggedIn(browser(t))
	if status, body := none.action(c, none.csrfOf(c), "merge", scout, nil); status != http.StatusBadRequest || !strings.Contains(body, "no member of this fleet has a work tree") {
		t.Errorf("merge without work trees: %d %s; want 400", status, body)
	}
}
