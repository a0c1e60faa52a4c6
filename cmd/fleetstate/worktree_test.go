package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleetup"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// gitIn runs git in dir for the test, with the identity newGitProject set.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newGitProject makes a project in a git repository of its own, with git
// set up for the test alone; the processes the test starts inherit it.
func newGitProject(t *testing.T) string {
	t.Helper()
	fleettest.IsolatedGit(t)
	root := t.TempDir()
	project := filepath.Join(root, "project")
	gitIn(t, root, "init", "--quiet", project)
	if err := os.WriteFile(filepath.Join(project, "README"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, project, "add", "-A")
	gitIn(t, project, "commit", "--quiet", "-m", "first")
	return project
}

// commitFile writes name in dir and commits it.
func commitFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "--quiet", "-m", "edit "+name)
}

// fleetCLIFail runs the binary with args, which must fail, and returns
// its standard output and error.
func fleetCLIFail(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("fleetstate %s succeeded:\n%s", strings.Join(args, " "), stdout.String())
	}
	return stdout.String(), stderr.String()
}

// worktreeFleet writes, in a new git project, the fleet file of a lead
// and of alice with a work tree, both stand-ins, with merge as its
// "merge"; it returns the fleet, the project, alice's work tree (made by
// up), and up, which brings the fleet up and returns what up said on
// standard error.
func worktreeFleet(t *testing.T, merge map[string]any) (f *upFleet, project, tree string, up func() string) {
	t.Helper()
	project = newGitProject(t)
	socket := fleettest.TmuxSocket(t)
	agentBin := buildFakeAgent(t)
	fleet := map[string]any{
		"tmux_socket": socket,
		"timeouts":    map[string]string{"ready": "10s", "send": "30s", "permission": "30s"},
		"merge":       merge,
		"agents": []any{
			map[string]any{"name": "lead", "role": "lead", "command": []string{agentBin, "--fleetstate", binary}},
			map[string]any{"name": "alice", "role": "member", "command": []string{agentBin, "--fleetstate", binary}, "worktree": true},
		},
	}
	f = &upFleet{file: filepath.Join(project, "fleet.json"), dir: filepath.Join(project, ".ai-fleet-state"), socket: socket}
	tree = filepath.Join(f.dir, ".fleetstate", "worktrees", "alice")
	data, _ := json.MarshalIndent(fleet, "", "  ")
	if err := os.WriteFile(f.file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, project, "add", "fleet.json")
	gitIn(t, project, "commit", "--quiet", "-m", "the fleet file")
	t.Cleanup(func() {
		_ = exec.Command(binary, "down", f.file, "--dir", f.dir).Run()
		var rec fleetup.Record
		if data, err := os.ReadFile(filepath.Join(f.dir, ".fleetstate", fleetup.RecordFile)); err == nil && json.Unmarshal(data, &rec) == nil && rec.PID > 0 && fleetup.Alive(rec.PID) {
			fleetup.SignalTree(rec.PID, 9)
		}
	})
	return f, project, tree, func() string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(binary, "up", f.file, "--dir", f.dir)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("up: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		return stderr.String()
	}
}

// TestMergeWaitsForAPersonsApproval: with the fleet file's merge
// approval, a merge waits on a permission request of the member for the
// tool Merge: denied, it is refused with the person's message and
// nothing changes; asked again and allowed, it is done.
func TestMergeWaitsForAPersonsApproval(t *testing.T) {
	f, project, tree, up := worktreeFleet(t, map[string]any{"approval": true})
	up()
	commitFile(t, tree, "alice.txt", "alice's work\n")
	head := gitIn(t, project, "rev-parse", "HEAD")

	// merge runs the binary's merge in the background and returns its
	// result, once it ends.
	merge := func() <-chan daemon.Merge {
		done := make(chan daemon.Merge, 1)
		go func() {
			var m daemon.Merge
			out, _ := exec.Command(binary, "merge", "alice", "--json", "--dir", f.dir).Output()
			_ = json.Unmarshal(out, &m)
			done <- m
		}()
		return done
	}
	// pending waits for the merge's request and returns its ID.
	pending := func() string {
		t.Helper()
		var id string
		if !fleettest.Until(20*time.Second, 100*time.Millisecond, func() bool {
			var ps struct {
				Permissions []struct{ ID, Member, Tool, Input string } `json:"permissions"`
			}
			out, _ := exec.Command(binary, "requests", "--json", "--dir", f.dir).Output()
			if json.Unmarshal(out, &ps) != nil || len(ps.Permissions) != 1 {
				return false
			}
			p := ps.Permissions[0]
			id = p.ID
			return p.Member == "alice" && p.Tool == daemon.MergeTool && strings.Contains(p.Input, `"branch":"alice"`)
		}) {
			t.Fatal("no request to allow alice's merge")
		}
		return id
	}
	wait := func(done <-chan daemon.Merge) daemon.Merge {
		t.Helper()
		select {
		case m := <-done:
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("merge did not end")
			return daemon.Merge{}
		}
	}

	done := merge()
	fleetCLI(t, "deny", pending(), "--message", "not before the review", "--dir", f.dir)
	if m := wait(done); m.Merged || m.Reason != "denied" || !strings.Contains(m.Message, "not before the review") {
		t.Errorf("denied merge: %+v", m)
	}
	if now := gitIn(t, project, "rev-parse", "HEAD"); now != head {
		t.Errorf("a denied merge moved the lead to %s", now)
	}

	done = merge()
	fleetCLI(t, "approve", pending(), "--dir", f.dir)
	if m := wait(done); !m.Merged || m.Commit != gitIn(t, project, "rev-parse", "HEAD") {
		t.Errorf("allowed merge: %+v", m)
	}
	if _, err := os.Stat(filepath.Join(project, "alice.txt")); err != nil {
		t.Errorf("alice's work is not in the lead's checkout: %v", err)
	}
}

// TestUpMakesWorkTreesAndTheLeadMergesThem brings up a fleet whose member
// has a work tree of its own, in a git project, and goes through what the
// lead sees and merges: the work tree made and reused across down and
// up, the member's changes, merges refused (uncommitted work, an open
// turn, a failing check, a conflict) with nothing changed, and a clean
// merge. The member's edits are made by the test, in its work tree.
func TestUpMakesWorkTreesAndTheLeadMergesThem(t *testing.T) {
	f, project, tree, up := worktreeFleet(t, map[string]any{"check": "test ! -e broken"})
	socket := f.socket
	if says := up(); !strings.Contains(says, "alice: made a work tree at "+tree+" on branch alice") {
		t.Errorf("up said:\n%s\nwant the work tree it made", says)
	}
	if got := gitIn(t, tree, "rev-parse", "--abbrev-ref", "HEAD"); got != "alice" {
		t.Fatalf("work tree on %q; want branch alice", got)
	}
	// alice's pane runs in her work tree.
	if !fleettest.Until(10*time.Second, 100*time.Millisecond, func() bool {
		out, _ := exec.Command("tmux", "-S", socket, "list-panes", "-a", "-F", "#{window_name} #{pane_current_path}").Output()
		return strings.Contains(string(out), "alice "+tree)
	}) {
		out, _ := exec.Command("tmux", "-S", socket, "list-panes", "-a", "-F", "#{window_name} #{pane_current_path}").Output()
		t.Errorf("panes: %s; want alice's in %s", out, tree)
	}
	if st := gitIn(t, tree, "status", "--porcelain"); st != "" {
		t.Errorf("the configuration up wrote shows in alice's work tree:\n%s", st)
	}

	commitFile(t, tree, "alice.txt", "alice's work\n")
	var c worktree.Changes
	if err := json.Unmarshal([]byte(fleetCLI(t, "changes", "alice", "--json", "--dir", f.dir)), &c); err != nil {
		t.Fatal(err)
	}
	if c.Worktree != tree || c.Branch != "alice" || c.Into != "main" || c.Ahead != 1 || c.Behind != 0 ||
		!slices.Equal(c.Files, []worktree.FileChange{{Path: "alice.txt", Added: 1}}) || len(c.Uncommitted) != 0 {
		t.Errorf("changes: %+v", c)
	}
	if out := fleetCLI(t, "changes", "alice", "--diff", "--dir", f.dir); !strings.Contains(out, "+alice's work") || !strings.Contains(out, "alice.txt +1 -0") {
		t.Errorf("changes --diff:\n%s", out)
	}

	head := gitIn(t, project, "rev-parse", "HEAD")
	refused := func(reason string) daemon.Merge {
		t.Helper()
		out, stderr := fleetCLIFail(t, "merge", "alice", "--json", "--dir", f.dir)
		var m daemon.Merge
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("merge printed %q: %v (stderr %s)", out, err, stderr)
		}
		if m.Merged || m.Reason != reason || !strings.Contains(stderr, "refused ("+reason+")") {
			t.Errorf("merge: %+v, stderr %q; want refused for %s", m, stderr, reason)
		}
		if now := gitIn(t, project, "rev-parse", "HEAD"); now != head {
			t.Errorf("a refused merge moved the lead from %s to %s", head, now)
		}
		return m
	}

	// Uncommitted work in alice's tree.
	if err := os.WriteFile(filepath.Join(tree, "draft.txt"), []byte("draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("member_dirty")
	if err := os.Remove(filepath.Join(tree, "draft.txt")); err != nil {
		t.Fatal(err)
	}

	// alice at work.
	ticket := strings.TrimSpace(fleetCLI(t, "send", "alice", "[hang] keep working", "--json", "--dir", f.dir))
	var o struct {
		Ticket string `json:"ticket"`
	}
	if err := json.Unmarshal([]byte(ticket), &o); err != nil || o.Ticket == "" {
		t.Fatalf("send printed %q: %v", ticket, err)
	}
	refused("open_turn")
	fleetCLI(t, "cancel", o.Ticket, "--dir", f.dir)

	// The check fails on the merged result.
	commitFile(t, tree, "broken", "x\n")
	m := refused("check_failed")
	if !strings.Contains(m.Message, "test ! -e broken") {
		t.Errorf("check failure: %q", m.Message)
	}
	gitIn(t, tree, "rm", "--quiet", "broken")
	gitIn(t, tree, "commit", "--quiet", "-m", "unbreak")

	// A merge of a commit that is no longer the branch's.
	seen := gitIn(t, tree, "rev-parse", "HEAD~1")
	if out, stderr := fleetCLIFail(t, "merge", "alice", "--commit", seen[:9], "--json", "--dir", f.dir); !strings.Contains(out, `"reason":"branch_moved"`) || !strings.Contains(stderr, "refused (branch_moved)") {
		t.Errorf("merge of an older commit: %s %s", out, stderr)
	}

	// A clean merge, of the commit seen.
	var done daemon.Merge
	if err := json.Unmarshal([]byte(fleetCLI(t, "merge", "alice", "--commit", gitIn(t, tree, "rev-parse", "HEAD"), "--json", "--dir", f.dir)), &done); err != nil {
		t.Fatal(err)
	}
	if !done.Merged || done.Into != "main" || done.Commit != gitIn(t, project, "rev-parse", "HEAD") {
		t.Fatalf("merge: %+v", done)
	}
	if b, err := os.ReadFile(filepath.Join(project, "alice.txt")); err != nil || string(b) != "alice's work\n" {
		t.Errorf("alice.txt in the lead's checkout: %q, %v", b, err)
	}
	head = done.Commit
	// Each merge asked for, done or refused, is an event; the daemon logs
	// them.
	logged := func() string {
		data, _ := os.ReadFile(filepath.Join(f.dir, ".fleetstate", fleetup.DaemonLog))
		return string(data)
	}
	if !fleettest.Until(5*time.Second, 50*time.Millisecond, func() bool { return strings.Contains(logged(), "kind=merged member=alice") }) {
		t.Errorf("no merged event in the daemon's log:\n%s", logged())
	}
	for _, want := range []string{"kind=merge_requested member=alice by=operator", "kind=merge_refused member=alice by=operator message=\"member_dirty: ", "kind=merge_refused member=alice by=operator message=\"open_turn: ", "kind=merge_refused member=alice by=operator message=\"check_failed: "} {
		if !strings.Contains(logged(), want) {
			t.Errorf("the daemon's log lacks %q", want)
		}
	}

	// A conflict names its file and changes nothing.
	commitFile(t, project, "README", "one\nlead\n")
	head = gitIn(t, project, "rev-parse", "HEAD")
	commitFile(t, tree, "README", "one\nalice\n")
	if m := refused("conflict"); !slices.Equal(m.Files, []string{"README"}) {
		t.Errorf("conflict in %v; want README", m.Files)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "README")); string(b) != "one\nlead\n" {
		t.Errorf("the lead's README after a conflict: %q", b)
	}

	// down keeps the work tree and its commits; up again finds it.
	alice := gitIn(t, tree, "rev-parse", "HEAD")
	fleetCLI(t, "down", f.file, "--dir", f.dir)
	if says := up(); strings.Contains(says, "made a work tree") {
		t.Errorf("up again made the work tree again:\n%s", says)
	}
	if got := gitIn(t, tree, "rev-parse", "HEAD"); got != alice {
		t.Errorf("alice's work tree at %s after down and up; want %s", got, alice)
	}
	if out := fleetCLI(t, "changes", "alice", "--dir", f.dir); !strings.Contains(out, "README +1 -1") {
		t.Errorf("changes after up again:\n%s", out)
	}
	// A daemon killed outright loses nothing either: up starts another,
	// which merges the work tree as it is. up returns once the new daemon
	// takes the operator's commands (the state directory's token), which
	// the daemon writes anew after it took the directory: three times,
	// for a race that a slow start of the daemon makes likely.
	for range 3 {
		pid := f.record(t).PID
		fleetup.SignalTree(pid, 9)
		if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool { return !fleetup.Alive(pid) }) {
			t.Fatalf("the daemon %d outlived SIGKILL", pid)
		}
		up()
		fleetCLI(t, "members", "--dir", f.dir)
	}
	gitIn(t, tree, "revert", "--no-edit", "--quiet", "HEAD")
	commitFile(t, tree, "more.txt", "more\n")
	var again daemon.Merge
	if err := json.Unmarshal([]byte(fleetCLI(t, "merge", "alice", "--json", "--dir", f.dir)), &again); err != nil || !again.Merged {
		t.Fatalf("merge after the daemon was killed: %+v, %v", again, err)
	}
	if b, err := os.ReadFile(filepath.Join(project, "more.txt")); err != nil || string(b) != "more\n" {
		t.Errorf("more.txt in the lead's checkout: %q, %v", b, err)
	}
	alice = gitIn(t, tree, "rev-parse", "HEAD")
	fleetCLI(t, "down", f.file, "--dir", f.dir)

	// down --worktrees keeps a work tree with uncommitted work, and
	// removes a clean one, keeping its branch.
	if err := os.WriteFile(filepath.Join(tree, "draft.txt"), []byte("draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := fleetCLI(t, "down", f.file, "--dir", f.dir, "--worktrees"); !strings.Contains(out, "alice: kept the work tree "+tree) || !strings.Contains(out, "draft.txt") {
		t.Errorf("down --worktrees with uncommitted work:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(tree, "draft.txt")); err != nil || string(b) != "draft\n" {
		t.Fatalf("the uncommitted work: %q, %v", b, err)
	}
	if err := os.Remove(filepath.Join(tree, "draft.txt")); err != nil {
		t.Fatal(err)
	}
	if out := fleetCLI(t, "down", f.file, "--dir", f.dir, "--worktrees"); !strings.Contains(out, "alice: removed the work tree "+tree+"; its branch alice stays") {
		t.Errorf("down --worktrees:\n%s", out)
	}
	if _, err := os.Stat(tree); !os.IsNotExist(err) {
		t.Errorf("the work tree is still there: %v", err)
	}
	if got := gitIn(t, project, "rev-parse", "refs/heads/alice"); got != alice {
		t.Errorf("branch alice at %s; want %s", got, alice)
	}
}

// TestChangesWithoutWorktrees: a daemon whose fleet has no work trees
// serves no work tree tools, and the commands say so.
func TestChangesWithoutWorktrees(t *testing.T) {
	dir := t.TempDir()
	startDaemon(t, dir)
	for _, cmd := range []string{"changes", "merge"} {
		if _, stderr := fleetCLIFail(t, cmd, "alice", "--dir", dir); !strings.Contains(stderr, "the daemon serves no work trees") {
			t.Errorf("%s on a daemon without work trees: %s", cmd, stderr)
		}
	}
}

// TestWorktreesOnNATSNeedARemote: a fleet kept in NATS may be served from
// machines other than the lead's checkout, and a member's branch reaches
// it only through a git remote: a daemon on NATS refuses a fleet file that
// gives a member a work tree and names no remote, and says what is
// missing.
func TestWorktreesOnNATSNeedARemote(t *testing.T) {
	project := newGitProject(t)
	urls := natsURLs(startNATSNode(t, "n1", "--addr", "127.0.0.1:0"))
	file := filepath.Join(project, "fleet.json")
	fleet := `{"agents":[{"name":"lead","role":"lead"},{"name":"alice","role":"member","command":["sh"],"worktree":true}]}`
	if err := os.WriteFile(file, []byte(fleet), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:0", "--nats", urls, "--lease", natsLease, "--roster", file)
	cmd.Env = append(os.Environ(), "FLEET_STATE_DIRECTORY="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `agents[1].worktree: work trees on a fleet kept in NATS need "remote" in the fleet file`) {
		t.Errorf("serve --nats with a work tree and no remote: %v\n%s", err, out)
	}
}

// acrossFleet is a fleet kept in NATS whose two daemons stand for two
// machines: a, with the lead's checkout (project), and b, with bob's work
// tree (tree) of a clone of its own; both fleet files name remote.
type acrossFleet struct {
	project, remote, tree string
	tokens                map[string]string
	a, b                  *daemonProc
	f                     *fleetnats.Fleet
}

// newAcrossFleet starts an acrossFleet whose lead's fleet file has merge
// settings merge (JSON members of "merge").
func newAcrossFleet(t *testing.T, merge string) *acrossFleet {
	t.Helper()
	x := &acrossFleet{project: newGitProject(t)}
	root := filepath.Dir(x.project)
	clone := filepath.Join(root, "elsewhere")
	x.remote = filepath.Join(root, "remote.git")
	gitIn(t, root, "init", "--quiet", "--bare", x.remote)
	gitIn(t, x.project, "push", "--quiet", x.remote, "HEAD:refs/heads/main")
	gitIn(t, root, "clone", "--quiet", x.remote, clone)
	write := func(path, fleet string) string {
		t.Helper()
		if err := os.WriteFile(path, []byte(fleet), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	leadFile := write(filepath.Join(x.project, "fleet.json"), `{"remote":"`+x.remote+`","merge":{`+merge+`},
		"agents":[{"name":"lead","role":"lead","command":["sh"]}]}`)
	bobFile := write(filepath.Join(clone, "fleet.json"), `{"remote":"`+x.remote+`",
		"agents":[{"name":"bob","role":"member","command":["sh"],"worktree":true}]}`)

	urls := natsURLs(startNATSNode(t, "n1", "--addr", "127.0.0.1:0"))
	x.tokens = natsTokenSet(t, urls, map[string]string{"lead": "lead", "bob": "member"})
	stateA, stateB := t.TempDir(), t.TempDir()
	t.Setenv("FLEET_STATE_DIRECTORY", stateA)
	x.a = startNATSDaemon(t, urls, "--roster", leadFile)
	t.Setenv("FLEET_STATE_DIRECTORY", stateB)
	x.b = startNATSDaemon(t, urls, "--roster", bobFile)
	x.f = natsFleet(t, urls)
	if !fleettest.Until(30*time.Second, 50*time.Millisecond, func() bool { return owner(x.f) != "" }) {
		t.Fatal("no daemon owns the fleet")
	}
	x.tree = filepath.Join(stateB, ".fleetstate", "worktrees", "bob")
	// The folder shows before git has checked the branch out in it.
	var branch []byte
	if !fleettest.Until(30*time.Second, 50*time.Millisecond, func() bool {
		branch, _ = exec.Command("git", "-C", x.tree, "branch", "--show-current").Output()
		return strings.TrimSpace(string(branch)) == "bob"
	}) {
		t.Fatalf("bob's work tree at %s is on %q; want the branch bob, made by its daemon from its clone", x.tree, branch)
	}
	return x
}

// TestMergeAcrossDaemonsNeedsNoApproval: a person's approval of a merge
// is the operator's, and a fleet kept in NATS has no operator a person
// can reach: where the lead's fleet file asks for one, a merge across
// machines is refused at once, not_approved, and says why; nothing moves.
func TestMergeAcrossDaemonsNeedsNoApproval(t *testing.T) {
	x := newAcrossFleet(t, `"approval":true`)
	commitFile(t, x.tree, "bob.txt", "bob's work\n")
	head := gitIn(t, x.project, "rev-parse", "HEAD")
	r := leadCLI(t, []string{"FLEET_TOKEN=" + x.tokens["lead"]}, "", "merge", "bob", "--url", x.a.url)
	if r.code == 0 || !strings.Contains(r.stderr, "not_approved") || !strings.Contains(r.stderr, "merge.approval") {
		t.Fatalf("merge with approval on NATS: exit %d, %s %s; want refused not_approved, naming merge.approval", r.code, r.stdout, r.stderr)
	}
	if now := gitIn(t, x.project, "rev-parse", "HEAD"); now != head {
		t.Fatalf("a refused merge moved the lead's checkout")
	}
}

// TestMergeAcrossDaemons: two daemons serve one fleet kept in NATS, as on
// two machines: one has the lead's checkout, the other bob's work tree,
// made from a clone of its own. Through the git remote both fleet files
// name, the lead sees bob's commit and merges it into its checkout; bob's
// uncommitted work refuses the merge, changing nothing, and a conflict
// names its file; the CLI does the same through a daemon.
func TestMergeAcrossDaemons(t *testing.T) {
	x := newAcrossFleet(t, `"check":"test -f bob.txt"`)
	project, remote, tree, tokens, a, b, f := x.project, x.remote, x.tree, x.tokens, x.a, x.b, x.f
	commitFile(t, tree, "bob.txt", "bob's work\n")
	bobCommit := gitIn(t, tree, "rev-parse", "HEAD")

	lead := dialNATS(t, a.url, tokens["lead"], "lead")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The members' panes are registered a moment after their daemons
	// start: ask until bob's daemon answers.
	var c worktree.Changes
	var err error
	if !fleettest.Until(30*time.Second, 200*time.Millisecond, func() bool {
		err = lead.Call(ctx, "fleet_changes", map[string]any{"member": "bob", "diff": true}, &c)
		return err == nil
	}) {
		t.Fatalf("fleet_changes bob: %v", err)
	}
	if c.Worktree != tree || c.Branch != "bob" || c.Commit != bobCommit || c.Into != "main" || c.Ahead != 1 || c.Behind != 0 ||
		!slices.Equal(c.Files, []worktree.FileChange{{Path: "bob.txt", Added: 1}}) || !strings.Contains(c.Diff, "+bob's work") || len(c.Uncommitted) != 0 {
		t.Fatalf("fleet_changes bob = %+v; want bob's one commit, from %s", c, tree)
	}
	if got := gitIn(t, remote, "rev-parse", "refs/heads/bob"); got != bobCommit {
		t.Errorf("the remote's bob is at %s; want bob's commit %s", got, bobCommit)
	}
	// The owner, and the dashboard, know whose panes have a work tree;
	// the CLI reads bob's changes through either daemon.
	if panes, err := f.Panes(ctx); err != nil || !panes["bob"].Worktree || panes["lead"].Worktree {
		t.Errorf("the registered panes = %+v, %v; want bob's with a work tree, the lead's without", panes, err)
	}
	r := leadCLI(t, []string{"FLEET_TOKEN=" + tokens["lead"]}, "", "changes", "bob", "--url", b.url)
	if r.code != 0 || !strings.Contains(r.stdout, "bob.txt +1 -0") {
		t.Errorf("changes bob through bob's daemon: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	leadHead := gitIn(t, project, "rev-parse", "HEAD")

	// Uncommitted work in bob's tree refuses the merge; the lead's
	// checkout does not move.
	if err := os.WriteFile(filepath.Join(tree, "draft.txt"), []byte("not yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var m daemon.Merge
	if err := lead.Call(ctx, "fleet_merge", map[string]any{"member": "bob"}, &m); err != nil || m.Merged || m.Reason != "member_dirty" || !strings.Contains(m.Message, "draft.txt") {
		t.Fatalf("fleet_merge with bob's draft = %+v, %v; want member_dirty naming draft.txt", m, err)
	}
	if now := gitIn(t, project, "rev-parse", "HEAD"); now != leadHead {
		t.Fatalf("a refused merge moved the lead's checkout from %s to %s", leadHead, now)
	}
	if err := os.Remove(filepath.Join(tree, "draft.txt")); err != nil {
		t.Fatal(err)
	}

	// A merge of a commit the branch is not at is refused.
	if err := lead.Call(ctx, "fleet_merge", map[string]any{"member": "bob", "commit": "0000000"}, &m); err != nil || m.Merged || m.Reason != "branch_moved" {
		t.Fatalf("fleet_merge of a commit bob's branch left = %+v, %v; want branch_moved", m, err)
	}
	// The merge, by the CLI through bob's daemon: the check runs on the
	// merged result in the lead's checkout.
	r = leadCLI(t, []string{"FLEET_TOKEN=" + tokens["lead"]}, "", "merge", "bob", "--commit", bobCommit[:10], "--json", "--url", b.url)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || !m.Merged || m.Branch != "bob" || m.Into != "main" {
		t.Fatalf("merge bob through the remote: exit %d, %s %s; want merged", r.code, r.stdout, r.stderr)
	}
	if head := gitIn(t, project, "rev-parse", "HEAD"); head != m.Commit || gitIn(t, project, "show", "HEAD:bob.txt") != "bob's work" {
		t.Fatalf("the lead's checkout is at %s; want the merge %s holding bob.txt", head, m.Commit)
	}
	if st := gitIn(t, project, "status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Errorf("the merge left the lead's checkout dirty: %s", st)
	}

	// A conflict names its file and changes nothing.
	commitFile(t, project, "README", "the lead's line\n")
	commitFile(t, tree, "README", "bob's line\n")
	leadHead = gitIn(t, project, "rev-parse", "HEAD")
	if err := lead.Call(ctx, "fleet_merge", map[string]any{"member": "bob"}, &m); err != nil || m.Merged || m.Reason != "conflict" || !slices.Equal(m.Files, []string{"README"}) {
		t.Fatalf("fleet_merge of a conflict = %+v, %v; want conflict in README", m, err)
	}
	if now := gitIn(t, project, "rev-parse", "HEAD"); now != leadHead {
		t.Fatalf("a conflict moved the lead's checkout from %s to %s", leadHead, now)
	}
}
