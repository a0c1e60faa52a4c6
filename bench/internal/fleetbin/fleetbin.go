// Package fleetbin builds the fleetstate binaries a benchmark measures:
// this module's, and optionally that of another tree to compare with.
package fleetbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build makes a temporary directory named after pattern (as
// [os.MkdirTemp] does) and builds this module's fleetstate command there
// as bin, and, when baseDir is not empty, the one of the tree at baseDir
// as base. It returns the directory, which the caller removes, and the
// binaries' paths; base is where the base binary is, built or not. The
// environment's GOTOOLCHAIN and GOFLAGS apply to both builds.
func Build(pattern, baseDir string) (dir, bin, base string, err error) {
	dir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", "", "", err
	}
	bin = filepath.Join(dir, "fleetstate")
	base = filepath.Join(dir, "fleetstate-base")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetstate/fleetstate/cmd/fleetstate").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", "", "", fmt.Errorf("build fleetstate: %v\n%s", err, out)
	}
	if baseDir != "" {
		if out, err := exec.Command("go", "build", "-C", baseDir, "-o", base, "./cmd/fleetstate").CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", "", "", fmt.Errorf("build fleetstate in %s: %v\n%s", baseDir, err, out)
		}
	}
	return dir, bin, base, nil
}
