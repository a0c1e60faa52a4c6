//go:build !linux

package fleetstate

import (
	"errors"
	"os"
)

// noFollowSupported is false: there is no one-step open that refuses
// every symbolic link on the way here, so each component is checked.
const noFollowSupported = false

func openNoFollow(string) (*os.File, error) { return nil, errors.ErrUnsupported }
