package fleetstatetest

import (
	"testing"

	"github.com/fleetstate/fleetstate"
)

// TB is what a [Home] needs of a test: *testing.T and *rapid.T have it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// A Home is where the fleet of one test of the rendezvous suites lives:
// a state directory, a fleet on a replicated engine. The suites make a
// fresh Home for every test (and for every run of the state machine).
//
// Most tests run in [testing/synctest] bubbles, and Open and Crash are
// called from inside them, as are the store's and the journal's calls to
// the backend. A bubble must not share channels with goroutines outside
// it, as a network connection's are: a Home on such a backend makes every
// call from goroutines of its own, outside any bubble, and waits for it
// on a mutex. To the bubble such a call is blocking I/O, not durably
// blocking, so fake time stands still while it runs, as it does while a
// state directory is written.
type Home interface {
	// Open opens a store and a rendezvous on the fleet, the rendezvous
	// restoring what an earlier one left. While another rendezvous owns
	// the fleet it fails with [fleetstate.ErrFleetOwned]. A rendezvous
	// opened is closed when the test ends.
	Open(t TB, opts *fleetstate.RendezvousOptions) (*fleetstate.Store, *fleetstate.Rendezvous, error)
	// Crash stops r, the last rendezvous opened, as if its process were
	// killed at this instant: its blocked calls return (the test's
	// goroutines must end) and it writes nothing more. Then it does what
	// the world around a killed process does, so that the next Open can
	// own the fleet: a state directory's lock is released with the
	// process; a lease on a replicated engine runs out.
	Crash(t TB, r *fleetstate.Rendezvous)
}

// suite is the context of one test of the rendezvous suites.
type suite struct {
	newHome func(t TB) Home
}

// TestRendezvous runs the rendezvous's flow and failure suites on fleets
// of homes from newHome, one per test: blocking and detached sends,
// questions, tickets, status gating and the member port, disconnects and
// delegation, held outcomes, restarts after a crash, permission requests,
// events. Each runs as
// a subtest named as the test it was in the root package.
//
// The tests of a state directory's own subjects (the lock of its owner,
// the journal's slot files and held log, faults of a disk) are not here:
// they are the root package's tests of the disk.
func TestRendezvous(t *testing.T, newHome func(t TB) Home) {
	s := suite{newHome: newHome}
	for _, tc := range rendezvousSuite {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, s) })
	}
}

// rendezvousSuite lists the tests of TestRendezvous, file by file.
var rendezvousSuite = []struct {
	name string
	test func(t *testing.T, s suite)
}{
	// rendezvous.go
	{"TestSendBlocksUntilReplyWithoutPolling", testSendBlocksUntilReplyWithoutPolling},
	{"TestOutcomeOfBlockingSendHeldUntilLeadsNextCall", testOutcomeOfBlockingSendHeldUntilLeadsNextCall},
	{"TestOutcomeOfBlockingSendCanBeAcked", testOutcomeOfBlockingSendCanBeAcked},
	{"TestClarificationByTurnID", testClarificationByTurnID},
	{"TestAskWindowReturnsDefault", testAskWindowReturnsDefault},
	{"TestDetachedTicketPollAck", testDetachedTicketPollAck},
	{"TestPollAllWaitsForAnyChange", testPollAllWaitsForAnyChange},
	{"TestSendBoundReturnsPendingAndReplyLandsOnTicket", testSendBoundReturnsPendingAndReplyLandsOnTicket},
	{"TestCancelledSendLosesNothing", testCancelledSendLosesNothing},
	{"TestCancelVersusReply", testCancelVersusReply},
	{"TestCloseReleasesBlockedCalls", testCloseReleasesBlockedCalls},
	{"TestBadArguments", testBadArguments},
	{"TestNextEndsOpenTurnAsTurnDone", testNextEndsOpenTurnAsTurnDone},
	{"TestRemoveMemberEndsItsTurns", testRemoveMemberEndsItsTurns},
	// rendezvous_delegate.go
	{"TestSetReadyAddOnReady", testSetReadyAddOnReady},
	{"TestDelegate", testDelegate},
	// rendezvous_disconnect.go
	{"TestDisconnectMidTurnEndsBlockedSend", testDisconnectMidTurnEndsBlockedSend},
	{"TestDisconnectMidAsk", testDisconnectMidAsk},
	{"TestDisconnectOutcomeIsDurable", testDisconnectOutcomeIsDurable},
	{"TestDisconnectWithinPresenceWindow", testDisconnectWithinPresenceWindow},
	{"TestDisconnectMidAskKeepsQuestion", testDisconnectMidAskKeepsQuestion},
	{"TestAbandonedAskWithdrawn", testAbandonedAskWithdrawn},
	{"TestDropEndsTurnAtOnce", testDropEndsTurnAtOnce},
	{"TestNextAfterHandsLostTurnAgain", testNextAfterHandsLostTurnAgain},
	{"TestNextAfterRefusesALateCall", testNextAfterRefusesALateCall},
	{"TestAskAgainTakesTheQuestionOver", testAskAgainTakesTheQuestionOver},
	{"TestActingForALead", testActingForALead},
	{"TestDisconnectQueuedWaitsForReturn", testDisconnectQueuedWaitsForReturn},
	{"TestDisconnectPortMemberKeepsTurn", testDisconnectPortMemberKeepsTurn},
	{"TestDisconnectErrors", testDisconnectErrors},
	{"TestGivenUpCallerLeavesOutcomeOnTicket", testGivenUpCallerLeavesOutcomeOnTicket},
	// rendezvous_held.go
	{"TestHeldAcrossRestarts", testHeldAcrossRestarts},
	{"TestGivenUpCallerOutcomeOutlivesHold", testGivenUpCallerOutcomeOutlivesHold},
	// rendezvous_owner.go
	{"TestCleanGoesThroughTheOwner", testCleanGoesThroughTheOwner},
	{"TestRestoredTurnsOfAMemberThatNeverComesBack", testRestoredTurnsOfAMemberThatNeverComesBack},
	{"TestRestoredTurnKeptByAMemberThatComesBack", testRestoredTurnKeptByAMemberThatComesBack},
	{"TestRestoredTurnsOfAnUnregisteredMemberEnd", testRestoredTurnsOfAnUnregisteredMemberEnd},
	{"TestRestoredQuestionCanBeAnswered", testRestoredQuestionCanBeAnswered},
	{"TestRestoredQuestionWindowEnds", testRestoredQuestionWindowEnds},
	{"TestPollAllWaitsForNews", testPollAllWaitsForNews},
	{"TestCancelQueuedTurnIsNeverDelivered", testCancelQueuedTurnIsNeverDelivered},
	{"TestCancelOpenTurnTellsTheMember", testCancelOpenTurnTellsTheMember},
	{"TestCancelWakesTheBlockedSend", testCancelWakesTheBlockedSend},
	{"TestCancelRefusesOthers", testCancelRefusesOthers},
	{"TestOneWatcherPerMember", testOneWatcherPerMember},
	{"TestMemMemberIsNotPolled", testMemMemberIsNotPolled},
	{"TestPollPage", testPollPage},
	{"TestRemoveRestoredMember", testRemoveRestoredMember},
	{"TestReplyTurnIsBoundToItsTurn", testReplyTurnIsBoundToItsTurn},
	{"TestHoldReturned", testHoldReturned},
	{"TestLargeBriefAndReplySurviveRestarts", testLargeBriefAndReplySurviveRestarts},
	// rendezvous_port.go
	{"TestStatusGating", testStatusGating},
	{"TestUnknownStatusIsNeverDelivered", testUnknownStatusIsNeverDelivered},
	{"TestQuestionIsNeverTypedInto", testQuestionIsNeverTypedInto},
	{"TestCancelInterruptsTheMember", testCancelInterruptsTheMember},
	{"TestBlockedIsDeliverable", testBlockedIsDeliverable},
	{"TestNextWaitsForPickupWithGraceForFastTurns", testNextWaitsForPickupWithGraceForFastTurns},
	{"TestPickupGraceAfterTyping", testPickupGraceAfterTyping},
	{"TestTurnDoneBackendExhausted", testTurnDoneBackendExhausted},
	{"TestTurnDoneEchoedBrief", testTurnDoneEchoedBrief},
	{"TestTurnDonePartialReport", testTurnDonePartialReport},
	{"TestTurnDoneHint", testTurnDoneHint},
	{"TestSlowMemberGoesPendingThenHint", testSlowMemberGoesPendingThenHint},
	{"TestMemberNeverReady", testMemberNeverReady},
	{"TestMemberGoneMidTurn", testMemberGoneMidTurn},
	{"TestNudgeLeadPaneOnceWhenIdle", testNudgeLeadPaneOnceWhenIdle},
	{"TestStateSurvivesRestart", testStateSurvivesRestart},
	{"TestRestoredOpenTurnOfIdlePaneIsTriaged", testRestoredOpenTurnOfIdlePaneIsTriaged},
	// rendezvous_permission.go
	{"TestPermissionAllow", testPermissionAllow},
	{"TestPermissionDenyWithMessage", testPermissionDenyWithMessage},
	{"TestPermissionTimeoutUndecided", testPermissionTimeoutUndecided},
	{"TestPermissionDecidedAfterRestart", testPermissionDecidedAfterRestart},
	{"TestPermissionBadDecisions", testPermissionBadDecisions},
	{"TestPermissionContextCancel", testPermissionContextCancel},
	{"TestPermissionPolicy", testPermissionPolicy},
	// rendezvous_usage.go
	{"TestUsagePerMemberAndTurn", testUsagePerMemberAndTurn},
	{"TestUsageSurvivesRestart", testUsageSurvivesRestart},
	{"TestUsageBadReports", testUsageBadReports},
	// rendezvous_budget.go
	{"TestBudgetRefusesSends", testBudgetRefusesSends},
	{"TestBudgetHoldsQueuedWork", testBudgetHoldsQueuedWork},
	{"TestBudgetEvents", testBudgetEvents},
	{"TestBudgetSurvivesRestart", testBudgetSurvivesRestart},
	{"TestBudgetRenewsDaily", testBudgetRenewsDaily},
	{"TestBudgetReserve", testBudgetReserve},
	{"TestBudgetStopsTheTurn", testBudgetStopsTheTurn},
	{"TestBudgetConcurrentSends", testBudgetConcurrentSends},
	{"TestBudgetInCost", testBudgetInCost},
	// rendezvous_budget_rapid.go
	{"TestBudgetStateMachine", testBudgetStateMachine},
	// events.go
	{"TestEventsOfAFlow", testEventsOfAFlow},
	{"TestEventsOfTicketsAndMembers", testEventsOfTicketsAndMembers},
	{"TestSlowSubscriberGetsAGap", testSlowSubscriberGetsAGap},
	{"TestSubscriptionsEndWithTheRendezvous", testSubscriptionsEndWithTheRendezvous},
}
