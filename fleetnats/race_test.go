//go:build race

package fleetnats_test

// raceEnabled says that the tests were built with -race, which slows the
// server down about tenfold.
const raceEnabled = true
