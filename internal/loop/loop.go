// Package loop runs the rounds of a watcher: a step now, and again at
// every tick, kick or change notice, until the step says it is done or
// the owner closes.
package loop

import "time"

// Step does one round. It reports whether to go on; changed, when not
// nil, is a notice that replaces the ticks (the source says when it
// changes), and recheck, when positive, is when to run again regardless
// of the notice.
type Step func() (more bool, changed <-chan struct{}, recheck time.Duration)

// Run runs step now, and again whenever kick fires, every interval (for
// a source that gives no notice), at its notice, or at its recheck, until
// step reports false or done is closed.
func Run(done <-chan struct{}, interval time.Duration, kick <-chan struct{}, step Step) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		more, changed, recheck := step()
		if !more {
			return
		}
		tick := ticker.C
		var again <-chan time.Time
		if changed != nil {
			tick = nil
			if recheck > 0 {
				timer.Reset(recheck)
				again = timer.C
			}
		}
		select {
		case <-done:
			return
		case <-tick:
		case <-kick:
		case <-changed:
		case <-again:
		}
	}
}
