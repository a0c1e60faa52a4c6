package fleetstate_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests and then checks that none left a goroutine
// behind. A child process that a test started from this binary (see
// helperProcess) does its part instead and runs no test at all.
func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(helperProcess(role))
	}
	goleak.VerifyTestMain(m)
}
