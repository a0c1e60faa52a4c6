package fleetstate_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
)

// The helpers of the rendezvous tests of a state directory, as package
// fleetstatetest's suites have them.

func wantCode(t *testing.T, err error, code fleetstate.Code) {
	t.Helper()
	if got := fleetstate.CodeOf(err); got != code {
		t.Fatalf("error = %v (code %q); want code %s", err, got, code)
	}
}

// async runs fn in a goroutine and returns a channel with its outcome.
func async(fn func() (fleetstate.Outcome, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		o, err := fn()
		ch <- result{o, err}
	}()
	return ch
}

type result struct {
	o   fleetstate.Outcome
	err error
}

// settle lets fake time pass, then waits until every goroutine of the
// bubble is durably blocked.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}
