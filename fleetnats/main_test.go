package fleetnats_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test left a goroutine behind: a connection not
// closed, a watcher not stopped, a server not shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
