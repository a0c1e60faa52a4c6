//go:build !race

package fleetnats_test

const raceEnabled = false
