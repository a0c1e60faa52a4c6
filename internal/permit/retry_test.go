package permit

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// An entry with an unconfirmed decision is not pending; its writes are
// tried after waits that double up to RetryLast, and none after it ends.
func TestRetryBacksOffAndEndsWithTheEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d Desk
		e := NewEntry(Request{ID: "perm-1", Member: "bob", Tool: "Bash", Deadline: time.Now().Add(time.Hour)})
		d.Add(e, func() {})
		e.Unconfirmed = &Decision{Behavior: Allow, By: "operator"}
		if e.Pending() || d.PendingOf("bob") != 0 || d.Pending() != nil {
			t.Fatal("an entry with an unconfirmed decision counts as pending")
		}
		// mu is the rendezvous's lock, which a write takes.
		var mu sync.Mutex
		start := time.Now()
		var waits []time.Duration
		var write func()
		write = func() {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, time.Since(start))
			start = time.Now()
			if len(waits) < 6 {
				e.Retry(write)
			}
		}
		mu.Lock()
		e.Retry(write)
		mu.Unlock()
		time.Sleep(time.Minute)
		mu.Lock()
		want := []time.Duration{RetryFirst, 2 * RetryFirst, 4 * RetryFirst, 8 * RetryFirst, RetryLast, RetryLast}
		if len(waits) != len(want) {
			t.Fatalf("waits %v; want %v", waits, want)
		}
		for i := range want {
			if waits[i] != want[i] {
				t.Fatalf("waits %v; want %v", waits, want)
			}
		}
		e.Retry(func() { t.Error("a write was tried after the entry ended") })
		if !d.End(e) {
			t.Fatal("End of an entry with an unconfirmed decision: not undecided")
		}
		mu.Unlock()
		time.Sleep(time.Minute)
	})
}
