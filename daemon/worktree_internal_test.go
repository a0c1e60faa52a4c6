package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// TestRosterWorktrees: a member's "worktree" is true, false or an object
// of branch and base; its work tree goes in the state directory's
// private folder and becomes its workdir, the same folder of the lead's
// repository it names; every mistake is refused naming the field.
func TestRosterWorktrees(t *testing.T) {
	fleettest.IsolatedGit(t)
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "--quiet"}, {"commit", "--quiet", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.Mkdir(filepath.Join(repo, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(repo, ".ai-fleet-state")
	load := func(data string) (*Roster, error) {
		path := filepath.Join(repo, "fleet.json")
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadRoster(path, state)
	}
	member := func(extra string) string {
		return `{"agents":[{"name":"lead","role":"lead"},{"name":"alice","role":"member","command":["sh"]` + extra + `}]}`
	}

	ro, err := load(member(`,"worktree":true`))
	if err != nil {
		t.Fatal(err)
	}
	w := ro.Agents[1].Worktree
	tree := filepath.Join(state, ".fleetstate", "worktrees", "alice")
	if w == nil || w.Branch != "alice" || w.Base != "" || w.Repo != repo || w.Path != tree || ro.Agents[1].Workdir != tree {
		t.Errorf("worktree true: %+v, workdir %s", w, ro.Agents[1].Workdir)
	}
	ro, err = load(member(`,"workdir":"app","worktree":{"branch":"work/alice","base":"main"}`))
	if err != nil {
		t.Fatal(err)
	}
	if w := ro.Agents[1].Worktree; w.Branch != "work/alice" || w.Base != "main" || ro.Agents[1].Workdir != filepath.Join(tree, "app") {
		t.Errorf("worktree object: %+v, workdir %s", w, ro.Agents[1].Workdir)
	}
	if ro, err = load(member(`,"worktree":false`)); err != nil || ro.Agents[1].Worktree != nil || ro.Agents[1].Workdir != repo {
		t.Errorf("worktree false: %v, %+v", err, ro.Agents[1])
	}
	if ro, err = load(`{"merge":{"check":"go test ./...","check_timeout":"2m","approval":true},` + member(`,"worktree":true`)[1:]); err != nil || ro.Merge.timeout.Minutes() != 2 || !ro.Merge.Approval {
		t.Errorf("merge settings: %v, %+v", err, ro.Merge)
	}

	for _, c := range []struct{ data, want string }{
		{`{"agents":[{"name":"lead","role":"lead","command":["sh"],"worktree":true}]}`, "agents[0].worktree: only a member has a work tree"},
		{`{"agents":[{"name":"alice","role":"member","worktree":true}]}`, "agents[0].worktree: only an agent with a command"},
		{member(`,"worktree":"yes"`), "worktree: want true or an object"},
		{member(`,"worktree":{"branch":"x","path":"/tmp"}`), "unknown field"},
		{member(`,"worktree":{"branch":"-x"}`), "may not begin with -"},
		{`{"agents":[{"name":"alice","role":"member","command":["sh"],"worktree":true},{"name":"bob","role":"member","command":["sh"],"worktree":{"branch":"alice"}}]}`, `agents[1].worktree.branch: "alice" is agents[0]'s branch already`},
		{`{"merge":{"check_timeout":"soon"},` + member(``)[1:], "merge.check_timeout"},
		{`{"merge":{"approval":true},"approvals":{"leads":true},` + member(``)[1:], "merge.approval: with approvals.leads"},
	} {
		if _, err := load(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.data, err, c.want)
		}
	}

	outside := t.TempDir()
	path := filepath.Join(outside, "fleet.json")
	if err := os.WriteFile(path, []byte(member(`,"worktree":true`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRoster(path, state); err == nil || !strings.Contains(err.Error(), "agents[1].worktree: worktree: not a git repository") {
		t.Errorf("a fleet file outside a repository: %v", err)
	}
}
