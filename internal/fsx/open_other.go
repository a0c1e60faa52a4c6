//go:build !linux

package fsx

import (
	"errors"
	"os"
)

// NoFollowSupported is false: there is no one-step open that refuses
// every symbolic link on the way here, so each component is checked.
const NoFollowSupported = false

// OpenNoFollow is not supported here: see [NoFollowSupported].
func OpenNoFollow(string) (*os.File, error) { return nil, errors.ErrUnsupported }
