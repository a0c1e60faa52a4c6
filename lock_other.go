//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package fleetstate

import "os"

// tryLockFileExclusive always succeeds where flock is not available: one
// owner per state directory is then a rule of this process only.
func tryLockFileExclusive(*os.File) (bool, error) { return true, nil }
