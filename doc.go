// Package fleetstate lets a fleet of AI agents share files and hand each
// other work.
//
// # Files
//
// A [Store] keeps files in a state directory on an [afero.Fs]: the
// operating system's in production, an in-memory one in tests. Each file
// belongs to a session and to the agent that wrote it and is addressed by a
// [FileID], whose text form is
//
//	fsm::file::SESSION_ID::AGENT_NAME::FILE_NAME
//
// The directory layout is that of the TypeScript MCP server fleet-state-mgr,
// so either program can read what the other wrote:
//
//	.ai-fleet-state/
//	    current_run.txt        the current session, "ID:::NAME"
//	    previous_run_log.txt   one "ID:::NAME" line per earlier session
//	    SESSION_ID/AGENT_NAME/FILE_NAME
//
// Agent and file names are checked before any I/O ([ValidateAgentName],
// [ValidateFileName]); nothing outside the state directory is ever read or
// written, and symbolic links inside it are not followed. Writes go to a
// temporary file in the target's folder and are renamed into place, so a
// reader sees the old content or the new and a crash leaves no torn file.
//
// # Sessions
//
// [Store.NewSession] starts a session and archives the one before it;
// [Store.CurrentSession] reads it back. Put and List work in the current
// session; Get reads any session whose directory still exists.
// [Store.Clean] removes every session and what else the store made, and
// nothing it did not make; while a Rendezvous owns the directory, clean
// through [Rendezvous.Clean].
//
// # Rendezvous
//
// A [Rendezvous] is where a lead hands work to member agents and gets the
// answers back. Each message opens a turn, and each turn ends in one
// [Outcome]: reply, question, turn_done, or failed with a [Reason].
//
//   - Delegation: [Rendezvous.Send] blocks, without polling, until the
//     member replies with [Rendezvous.Reply].
//   - Clarification: a member's [Rendezvous.Ask] makes the lead's send
//     return a question with a turn ID; [Rendezvous.Answer] with that turn
//     ID resumes the member's turn and waits for its next outcome. An ask
//     that gets no answer in its window returns the member's default.
//   - Detached delegation: [Rendezvous.SendDetached] returns a ticket at
//     once; [Rendezvous.Poll] and [Rendezvous.PollAll] read it (and can
//     wait for a change); [Rendezvous.Ack] drops it. A send that hits its
//     bound, or whose context ends, also leaves its outcome on a ticket:
//     no answer is lost.
//   - Turn-done fallback: a member reached through a [Member] port that
//     goes from WORKING to IDLE without replying has its pane tail read and
//     classified as backend_exhausted, echoed_brief, or turn_done (marked
//     partial when clipped).
//   - Status gating: a member's FIFO is delivered one message per turn,
//     only while it is IDLE or BLOCKED and ready; UNKNOWN is never written
//     to. A member without a port pulls its messages with [Rendezvous.Next].
//   - A member whose connection goes is told to [Rendezvous.Disconnect]:
//     it is no longer ready, and a member that pulls its messages loses
//     its open turn, which ends failed with reason member_gone. A member
//     removed with [Rendezvous.RemoveMember] (its token revoked) has its
//     turns end at once.
//   - Cancel: [Rendezvous.Cancel] ends a queued or open turn, failed with
//     reason cancelled; the member learns it on its next call for the turn
//     ([ErrTurnCancelled]).
//   - Permission requests: a member's agent asks whether it may use a
//     tool with [Rendezvous.RequestPermission], which blocks until
//     [Rendezvous.DecidePermission] (the operator, a lead) or a
//     [PermissionPolicy] decides, or its window passes undecided: never
//     an allow by default. A pending request survives a restart of the
//     owner, and a retry with the same key finds its decision.
//
// Every outcome of an ended turn names its ticket. One that a call
// returned stays held there until the lead's next call (or, with
// [RendezvousOptions.HoldReturned], until acked or for that long, also
// across a restart), so an outcome lost with a connection can still be
// polled.
//
// # Ownership and restarts
//
// A Rendezvous owns its state directory's fleet: while it is open no other
// Rendezvous, in this process or another, opens there ([ErrFleetOwned]
// names the owner), and only it writes the fleet's state. On the operating
// system's file system ownership is a flock that the kernel releases when
// the process dies. Queued messages, open turns, questions and held
// outcomes are written under the state directory and restored by the next
// owner: a member that had a turn open counts as ready for
// [RendezvousOptions.RejoinTimeout] and its turn ends member_gone if it
// does not come back; a question keeps what was left of its window.
//
// # Errors
//
// An error of the package is an [*Error] carrying a [Code], whose string is
// the wire code MCP clients see, such as "ERR_FILE_EXISTS", with one
// exception: a blocking method whose context ends returns ctx.Err()
// unwrapped (context.Canceled or context.DeadlineExceeded), as the
// standard library does. Use errors.Is with the sentinels
// ([ErrFileExists], …) or [CodeOf]:
//
//	if errors.Is(err, fleetstate.ErrFileExists) { … }
//
// # Concurrency
//
// A Store and a Rendezvous are safe for concurrent use. Every blocking
// method of the Rendezvous takes a context and has a bound of its own.
// Several processes may share one state directory on the operating
// system's file system: a put without overwrite is an exclusive create (a
// hard link that fails if the name exists), and session changes take a
// file lock.
//
// # Backends
//
// [Open] keeps a store in a state directory; [OpenBackend] keeps it in any
// other [Backend], such as package fleetmem (memory) or fleetnats (NATS
// JetStream, for fleets served by several daemons), with the rendezvous's
// [Journal] beside it. Package fleetstatetest holds the suites every
// backend passes. The package imports no MCP or terminal code: package
// mcpadapter serves a Store and a Rendezvous as MCP tools, package daemon
// is the server to embed, and package tmux is the [Member] port of a
// terminal pane.
package fleetstate
