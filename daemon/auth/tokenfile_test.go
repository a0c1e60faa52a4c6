package auth_test

import (
	"testing"

	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
)

// TestDiskTokenFile: the token file of a state directory keeps the
// TokenFile contract, two handles standing for two processes.
func TestDiskTokenFile(t *testing.T) {
	adaptertest.TestTokenFile(t, func(t *testing.T) (a, b auth.TokenFile) {
		st, _ := adaptertest.OpenStore(t)
		return auth.DiskTokenFile(st), auth.DiskTokenFile(st)
	})
}
