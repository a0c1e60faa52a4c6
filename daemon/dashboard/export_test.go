package dashboard

import "time"

// SetClock makes d read the time from now. Call it before d
// serves.
func SetClock(d *Dashboard, now func() time.Time) { d.now = now }

// Turns returns how many turns d's transcripts hold.
func Turns(d *Dashboard) int {
	d.tr.mu.Lock()
	defer d.tr.mu.Unlock()
	return len(d.tr.order)
}
