package fleetstate

import "github.com/fleetstate/fleetstate/internal/dirstore"

// Crash stops r as if its process were killed at this instant: blocked
// calls return (the test's goroutines must end), nothing more is written,
// and the ownership of the state directory is given up, as the operating
// system gives up the locks of a dead process.
func Crash(r *Rendezvous) { _ = r.shutdown(true) }

// Parked returns how many Next calls of member wait on its empty FIFO, to
// which a send may hand its message at once.
func Parked(r *Rendezvous, member string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.members[member]; m != nil {
		return len(m.takers)
	}
	return 0
}

// SetHeldLogMin sets the size of r's held log below which it is never
// compacted (1 MiB otherwise), so that tests see compactions.
func SetHeldLogMin(r *Rendezvous, n int64) {
	r.lockW()
	defer r.unlockW()
	r.j.Journal().(*dirstore.Journal).SetCompactMin(n)
}
