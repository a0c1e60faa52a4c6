//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package fleetstate

import "os"

// lockFileExclusive is a no-op where flock is not available: session
// changes are then serialised within one process only.
func lockFileExclusive(*os.File) error { return nil }

// tryLockFileExclusive always succeeds where flock is not available: one
// owner per state directory is then a rule of this process only.
func tryLockFileExclusive(*os.File) (bool, error) { return true, nil }
