package agentconf

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

// TestKeepOutOfGit: the files up writes that git does not track are
// added to the repository's exclude file once, in a work tree too, so
// that git status shows none of them; a tracked file is reported, not
// excluded; a folder outside any repository is left alone.
func TestKeepOutOfGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := filepath.Join(t.TempDir(), "repo")
	git(t, filepath.Dir(repo), "init", "-q", repo)
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".claude", "settings.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "README", ".claude/settings.json")
	git(t, repo, "commit", "-q", "-m", "init")
	tree := filepath.Join(filepath.Dir(repo), "alice")
	git(t, repo, "worktree", "add", "-q", tree)

	for _, dir := range []string{repo, tree} {
		mcp := filepath.Join(dir, ".mcp.json")
		if err := os.WriteFile(mcp, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		settings := filepath.Join(dir, ".claude", "settings.json")
		for range 2 { // twice: one line each, not two
			tracked, err := KeepOutOfGit(dir, []string{mcp, settings})
			if err != nil {
				t.Fatal(err)
			}
			if len(tracked) != 1 || tracked[0] != settings {
				t.Errorf("KeepOutOfGit(%s) tracked = %v; want the tracked settings file", dir, tracked)
			}
		}
		out, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=all").Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), ".mcp.json") {
			t.Errorf("git status in %s still shows .mcp.json:\n%s", dir, out)
		}
	}
	exclude, err := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(exclude), "/.mcp.json\n"); n != 1 {
		t.Errorf("exclude file holds the .mcp.json line %d times; want once:\n%s", n, exclude)
	}

	outside := t.TempDir()
	if tracked, err := KeepOutOfGit(outside, []string{filepath.Join(outside, ".mcp.json")}); err != nil || tracked != nil {
		t.Errorf("KeepOutOfGit outside a repository = %v, %v; want nothing", tracked, err)
	}
}

// TestClaudeTrusts reads Claude Code's record of trusted folders: a
// folder is trusted when it, or a folder above it, is.
func TestClaudeTrusts(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	config := filepath.Join(home, ".claude.json")
	if ClaudeTrusts(config, dir) {
		t.Error("trusted without a ~/.claude.json")
	}
	cfg := `{"projects":{"` + dir + `":{"hasTrustDialogAccepted":true},"/elsewhere":{"hasTrustDialogAccepted":false}}}`
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if !ClaudeTrusts(config, dir) || !ClaudeTrusts(config, filepath.Join(dir, "sub")) {
		t.Error("not trusted though ~/.claude.json says so")
	}
	if ClaudeTrusts(config, "/elsewhere") {
		t.Error("trusted though ~/.claude.json says not")
	}
}

// TestTrustClaudeOfWorkTree: Claude Code keys the trust of a git work tree
// on the main repository's root; TrustClaude records it there, keeps the
// rest of the file, and a second call writes nothing.
func TestTrustClaudeOfWorkTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	base := t.TempDir()
	repo, wt := filepath.Join(base, "repo"), filepath.Join(base, "alice")
	for _, args := range [][]string{
		{"init", "-q", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"},
		{"-C", repo, "worktree", "add", "-q", wt},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if got, want := ProjectRoot(wt), repo; got != want {
		t.Errorf("ProjectRoot(work tree) = %s; want the main repository %s", got, want)
	}
	config := filepath.Join(t.TempDir(), ".claude.json")
	if err := os.WriteFile(config, []byte(`{"theme":"dark","projects":{"/other":{"x":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err := TrustClaude(config, wt); err != nil || !w {
		t.Fatalf("TrustClaude = %v, %v; want written", w, err)
	}
	var cfg struct {
		Theme    string                    `json:"theme"`
		Projects map[string]map[string]any `json:"projects"`
	}
	data, _ := os.ReadFile(config)
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Theme != "dark" || cfg.Projects["/other"]["x"] != float64(1) {
		t.Errorf("the rest of the file was not kept: %s", data)
	}
	if cfg.Projects[repo]["hasTrustDialogAccepted"] != true {
		t.Errorf("no trust under the main repository %s: %s", repo, data)
	}
	if _, ok := cfg.Projects[wt]; ok {
		t.Errorf("trust under the work tree's own path, which Claude Code does not read: %s", data)
	}
	if w, err := TrustClaude(config, wt); err != nil || w {
		t.Errorf("second TrustClaude = %v, %v; want nothing written", w, err)
	}
}
