package fleetstate

import (
	"context"
	"errors"
	"testing"
)

// TestWithOpBackendTimeout: a backend call cut by its own bound answers
// ERR_UNAVAILABLE, not a cancellation by the caller (who set no
// deadline) and not an internal error.
func TestWithOpBackendTimeout(t *testing.T) {
	err := withOp("persist turn", context.DeadlineExceeded)
	if CodeOf(err) != CodeUnavailable || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("withOp(deadline) = %v (%s); want ERR_UNAVAILABLE, not a context error", err, CodeOf(err))
	}
	if err := withOp("x", errors.New("disk on fire")); CodeOf(err) != CodeInternal {
		t.Errorf("withOp(other) = %v; want ERR_INTERNAL", err)
	}
}
