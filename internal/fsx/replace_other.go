//go:build !linux

package fsx

import "os"

// Replace puts the finished file tmp at final with a rename, which
// readers see as one step.
func Replace(tmp, final string) error {
	return os.Rename(tmp, final)
}
