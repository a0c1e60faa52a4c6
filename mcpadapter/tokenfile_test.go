package mcpadapter_test

import (
	"testing"

	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// TestDiskTokenFile: the token file of a state directory keeps the
// TokenFile contract, two handles standing for two processes.
func TestDiskTokenFile(t *testing.T) {
	adaptertest.TestTokenFile(t, func(t *testing.T) (a, b mcpadapter.TokenFile) {
		st, _ := adaptertest.OpenStore(t)
		return mcpadapter.DiskTokenFile(st), mcpadapter.DiskTokenFile(st)
	})
}
