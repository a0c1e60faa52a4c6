package agentconf

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// excludeComment heads the lines fleetstate up adds to a repository's
// exclude file, so that a reader knows where they came from.
const excludeComment = "# agent configuration that fleetstate up wrote"

// KeepOutOfGit keeps the files up wrote into workdir out of git: each one
// that git does not track is added to the repository's exclude file
// (.git/info/exclude, shared by its work trees), which changes no file of
// the repository. It returns the files git tracks, which it cannot keep
// out: up says so. A workdir outside a repository, or a machine without
// git, has nothing to keep out.
func KeepOutOfGit(workdir string, files []string) (tracked []string, err error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil
	}
	top, err := gitOut(workdir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, nil // not a repository
	}
	exclude, err := gitOut(workdir, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude")
	if err != nil {
		return nil, err
	}
	have, err := os.ReadFile(exclude)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	lines := strings.Split(string(have), "\n")
	var add []string
	for _, f := range files {
		rel, err := filepath.Rel(top, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // outside the repository
		}
		rel = filepath.ToSlash(rel)
		if _, err := gitOut(top, "ls-files", "--error-unmatch", "--", rel); err == nil {
			tracked = append(tracked, f)
			continue
		}
		line := "/" + rel
		if !slices.Contains(lines, line) && !slices.Contains(add, line) {
			add = append(add, line)
		}
	}
	if len(add) == 0 {
		return tracked, nil
	}
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return tracked, err
	}
	out := bytes.TrimRight(have, "\n")
	if len(out) > 0 {
		out = append(out, '\n')
	}
	out = append(out, excludeComment+"\n"+strings.Join(add, "\n")+"\n"...)
	return tracked, os.WriteFile(exclude, out, 0o644)
}

// gitOut runs git in dir and returns its output, trimmed.
func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// ProjectRoot returns the folder that Claude Code and Codex key their
// trust of dir on: for a folder in a git repository, the root of the main
// repository, also from a linked work tree (git worktree add), whose own
// path neither CLI looks up; else dir itself. The path is absolute.
func ProjectRoot(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	if _, err := exec.LookPath("git"); err != nil {
		return abs
	}
	common, err := gitOut(abs, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err == nil && filepath.Base(common) == ".git" {
		return filepath.Dir(common)
	}
	if top, err := gitOut(abs, "rev-parse", "--show-toplevel"); err == nil && top != "" {
		return top // a submodule, or a repository with its git folder elsewhere
	}
	return abs
}

// ClaudeConfigPath returns the file in which Claude Code keeps the user's
// settings, trusted folders among them, for an agent whose environment
// getenv reads: .claude.json in $CLAUDE_CONFIG_DIR, else in $HOME.
func ClaudeConfigPath(getenv func(string) string) string {
	if d := getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return filepath.Join(d, ".claude.json")
	}
	return filepath.Join(getenv("HOME"), ".claude.json")
}

// ClaudeTrusts reports whether Claude Code, whose user configuration is
// the file config, has been told to trust the folder dir, or a folder
// above it: its first run in a folder it does not trust asks, in the
// terminal, and waits. An unreadable file counts as not trusted.
func ClaudeTrusts(config, dir string) bool {
	obj, err := readJSONObject(config)
	if err != nil {
		return false
	}
	projects, _ := obj["projects"].(map[string]any)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for _, d := range []string{ProjectRoot(dir), abs} {
		for ; ; d = filepath.Dir(d) {
			p, _ := projects[d].(map[string]any)
			if ok, _ := p["hasTrustDialogAccepted"].(bool); ok {
				return true
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return false
}

// TrustClaude records in config, Claude Code's user configuration, that
// the folder dir is trusted, under the key Claude Code looks up
// ([ProjectRoot]), as its answer "Yes, I trust this folder" does; the
// rest of the file is kept. It reports whether it wrote.
func TrustClaude(config, dir string) (bool, error) {
	if ClaudeTrusts(config, dir) {
		return false, nil
	}
	obj, err := readJSONObject(config)
	if err != nil {
		return false, err
	}
	projects, err := object(obj, config, "projects")
	if err != nil {
		return false, err
	}
	root := ProjectRoot(dir)
	p, err := object(projects, config, root)
	if err != nil {
		return false, err
	}
	p["hasTrustDialogAccepted"] = true
	return writeJSONFile(config, obj, true)
}
