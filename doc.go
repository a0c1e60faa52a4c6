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
// [Store.Clean] removes every session.
//
// # Rendezvous
//
// The rendezvous half of the package (delegation from a lead to member
// agents) is documented with its type.
//
// # Errors
//
// Every error the package returns is an [*Error] carrying a [Code], whose
// string is the wire code MCP clients see, such as "ERR_FILE_EXISTS". Use
// errors.Is with the sentinels ([ErrFileExists], …) or [CodeOf]:
//
//	if errors.Is(err, fleetstate.ErrFileExists) { … }
//
// # Concurrency
//
// A Store is safe for concurrent use. Several processes may share one state
// directory on the operating system's file system: a put without overwrite
// is an exclusive create (a hard link that fails if the name exists), and
// session changes take a file lock.
package fleetstate
