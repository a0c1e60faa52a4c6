package fleettest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// IsolatedGit sets git up for t alone: no user or system configuration, a
// committer named Lead, and main as the first branch of a new repository.
// The processes t starts inherit it. It skips t if git is not installed.
func IsolatedGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	cfg := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(cfg, []byte("[user]\n\tname = Lead\n\temail = lead@example.com\n[init]\n\tdefaultBranch = main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}
