package loop

import (
	"testing"
	"testing/synctest"
	"time"
)

// start runs Run with the step answers gives, and reports when
// each round ran, from the start, on the returned channel.
func start(done, kick <-chan struct{}, answers func(n int) (bool, <-chan struct{}, time.Duration)) (<-chan time.Duration, <-chan struct{}) {
	at := make(chan time.Duration, 100)
	ended := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(ended)
		n := 0
		Run(done, time.Second, kick, func() (bool, <-chan struct{}, time.Duration) {
			n++
			at <- time.Since(t0)
			return answers(n)
		})
	}()
	return at, ended
}

func drain(at <-chan time.Duration) []time.Duration {
	var out []time.Duration
	for {
		select {
		case d := <-at:
			out = append(out, d)
		default:
			return out
		}
	}
}

func TestRunTicksKicksAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kick := make(chan struct{}, 1)
		at, ended := start(make(chan struct{}), kick, func(n int) (bool, <-chan struct{}, time.Duration) {
			return n < 5, nil, 0
		})
		synctest.Wait()
		if got := drain(at); len(got) != 1 || got[0] != 0 {
			t.Fatalf("rounds at %v before the first tick; want one, at once", got)
		}
		kick <- struct{}{}
		synctest.Wait()
		if got := drain(at); len(got) != 1 || got[0] != 0 {
			t.Fatalf("a kick gave rounds at %v; want one, at once", got)
		}
		<-ended
		if got := drain(at); len(got) != 3 || got[0] != time.Second || got[2] != 3*time.Second {
			t.Fatalf("ticked rounds at %v; want 1s, 2s, 3s, and then the step's end", got)
		}
	})
}

func TestRunWaitsForNoticeOrRecheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		first, second := make(chan struct{}), make(chan struct{})
		at, ended := start(done, nil, func(n int) (bool, <-chan struct{}, time.Duration) {
			if n == 1 {
				return true, first, 0 // only on notice: no ticks
			}
			return true, second, 5 * time.Second // on notice, or in 5 s
		})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := drain(at); len(got) != 1 {
			t.Fatalf("rounds at %v while a notice is pending; want only the first", got)
		}
		close(first)
		synctest.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		close(done)
		<-ended
		if got := drain(at); len(got) != 2 || got[0] != 10*time.Second || got[1] != 15*time.Second {
			t.Fatalf("rounds at %v; want 10s (the notice), 15s (the recheck)", got)
		}
	})
}
