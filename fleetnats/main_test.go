package fleetnats_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests and then checks that none left a goroutine
// behind: each test shuts its NATS server down and closes its connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
