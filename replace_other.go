//go:build !linux

package fleetstate

import "os"

// replaceFile puts the finished file tmp at final with a rename, which
// readers see as one step.
func replaceFile(tmp, final string) error {
	return os.Rename(tmp, final)
}
