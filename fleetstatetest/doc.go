// Package fleetstatetest holds the conformance suites of fleetstate's
// seams: the tests a backend must pass, callable from any package's
// ordinary go test, as [testing/fstest.TestFS] is for an [io/fs.FS].
//
//   - [TestStateDir] and [TestBackend] run the store contract on state
//     directories and on [fleetstate.Backend] implementations, and
//     [TestStoreStateMachine] the store's rapid state machine on either.
//   - [TestJournal] runs the contract of a [fleetstate.Journal] on the
//     fleets a [JournalFleet] owns.
//   - [TestRendezvous] runs the flow and failure suites of the rendezvous,
//     and [TestRendezvousStateMachine] its rapid state machine, on fleets
//     that a [Home] opens.
//
// Each suite runs its tests as subtests named as the tests they were, so
// that go test -run selects them by the same names on every backend. A
// test of what only some backends have (a state directory's layout, its
// lock) is skipped on the others, saying why.
//
// The rendezvous suites run most tests in [testing/synctest] bubbles, so
// a Home whose backend talks over the network must make its calls from
// goroutines outside any bubble (see [Home]).
package fleetstatetest
