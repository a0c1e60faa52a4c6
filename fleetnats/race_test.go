//go:build race

package fleetnats_test

// raceEnabled says that the tests were built with -race, so that the
// suite run in a child process is too.
const raceEnabled = true
