package fleetstatetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test left a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
