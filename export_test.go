package fleetstate

// Crash stops r as if its process were killed at this instant: blocked
// calls return (the test's goroutines must end), nothing more is written,
// and the ownership of the state directory is given up, as the operating
// system gives up the locks of a dead process.
func Crash(r *Rendezvous) { _ = r.shutdown(true) }
