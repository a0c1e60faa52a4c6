package agentconf

import (
	"bytes"
	"encoding/json"
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

// ClaudeTrusts reports whether Claude Code has been told to trust the
// folder dir: its first run in a folder asks, in the terminal, and waits.
// It reads the user's ~/.claude.json (home); an unreadable file counts as
// not trusted.
func ClaudeTrusts(home, dir string) bool {
	data, err := os.ReadFile(filepath.Join(home, ".claude.json"))
	if err != nil {
		return false
	}
	var cfg struct {
		Projects map[string]struct {
			Trusted bool `json:"hasTrustDialogAccepted"`
		} `json:"projects"`
	}
	if json.Unmarshal(data, &cfg) != nil {
		return false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	return cfg.Projects[abs].Trusted
}
