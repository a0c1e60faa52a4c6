//go:build !unix

package fleetnats_test

import "time"

// cpuTime is not measured here: the benchmarks report no cpu-µs/op.
func cpuTime() time.Duration { return 0 }
