package daemon

import "time"

// SetNotifyBound makes each run of c's notification command bounded by d
// instead of 10 s, so that a test of the bound takes a moment.
func SetNotifyBound(c *Config, d time.Duration) { c.notifyBound = d }
