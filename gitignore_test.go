package fleetstate_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// TestGitIgnoreEscapesPatterns opens a store in folders whose names hold
// git's pattern characters, and asks git itself what the entry written to
// .gitignore ignores: the token file inside the state directory, and not a
// sibling folder that the name read as a pattern would match.
func TestGitIgnoreEscapesPatterns(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed for this test: ", err)
	}
	tests := []struct {
		name    string
		dir     string // the state directory, below the work tree
		sibling string // a folder that must stay visible
	}{
		{"CharacterClass", "state[dev]", "statd"},
		{"Star", "*", "notes"},
		{"StarInName", "state*", "state-old"},
		{"Question", "stat?", "stats"},
		{"LeadingBang", "!keep", "keep"},
		{"LeadingHash", "#state", "state"},
		{"LeadingSpace", " state", "state"},
		{"TrailingSpace", "state ", "state"},
		{"Backslash", `st\ate`, "state"},
		{"Nested", "sub/[x]*", "sub/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			git(t, root, "init", "-q")
			if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(tt.sibling)), 0o755); err != nil {
				t.Fatal(err)
			}
			siblingFile := filepath.Join(tt.sibling, "tokens.json")
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(siblingFile)), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, filepath.FromSlash(tt.dir))
			for range 2 { // the second open must not add a second line
				if _, err := fleetstate.Open(afero.NewOsFs(), dir, nil); err != nil {
					t.Fatalf("Open(%q): %v", tt.dir, err)
				}
			}
			inside := filepath.Join(tt.dir, ".fleetstate", "tokens.json")
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(inside)), []byte("[]"), 0o600); err != nil {
				t.Fatal(err)
			}
			gi, err := os.ReadFile(filepath.Join(root, ".gitignore"))
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(gi), "\n"); n != 1 {
				t.Fatalf(".gitignore = %q; want one line", gi)
			}
			if !ignored(t, root, inside) {
				t.Errorf("git does not ignore %q with .gitignore %q", inside, gi)
			}
			if ignored(t, root, siblingFile) {
				t.Errorf("git ignores the sibling %q with .gitignore %q", siblingFile, gi)
			}
		})
	}
}

// TestGitIgnoreRefusesLineBreak: no .gitignore line can name a folder
// whose name has a line break; Open says so and creates nothing.
func TestGitIgnoreRefusesLineBreak(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "state\n!x")
	_, err := fleetstate.Open(afero.NewOsFs(), dir, nil)
	if err == nil || !strings.Contains(err.Error(), "line break") {
		t.Fatalf("Open = %v; want an error naming the line break", err)
	}
	if strings.Contains(err.Error(), root) {
		t.Errorf("the error %q reveals the host path", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open made the folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, ".gitignore")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open wrote .gitignore: %v", err)
	}
	if _, err := fleetstate.Open(afero.NewOsFs(), dir, &fleetstate.Options{NoGitIgnore: true}); err != nil {
		t.Errorf("Open with NoGitIgnore: %v", err)
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// ignored asks git check-ignore whether path (relative to root) is ignored.
func ignored(t *testing.T, root, path string) bool {
	t.Helper()
	cmd := exec.Command("git", "check-ignore", "-q", "--", path)
	cmd.Dir = root
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false
	}
	t.Fatalf("git check-ignore %q: %v", path, err)
	return false
}
