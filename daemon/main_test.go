package daemon_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test left a goroutine behind: a daemon not
// closed, a subscription not ended, a connection not closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
