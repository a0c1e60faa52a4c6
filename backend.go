package fleetstate

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetstate/fleetstate/internal/dirstore"
	"github.com/fleetstate/fleetstate/internal/names"
	"github.com/spf13/afero"
)

// Backend keeps a store's sessions and files. It is the narrow seam between the
// [Store]'s contract and where the bytes live: a state directory on an
// [afero.Fs] ([Open]), or a replicated engine that several processes on several
// machines share, such as NATS JetStream (package fleetnats, through
// [OpenBackend]). Package fleetstatetest has the suite every Backend passes.
//
// The Store checks every argument (names, IDs, sizes) before it calls a
// Backend, and checks the session rules (which session is current, what listing
// a session without files means); a Backend only keeps data, with the atomicity
// the methods name. A Backend returns errors made with [NewError] for the codes
// its methods name, [CodeUnavailable] when the engine cannot be reached within
// the context's deadline, and on any error has changed nothing. Its methods are
// safe for concurrent use by goroutines and by processes sharing the engine.
type Backend interface {
	// CurrentSession returns the current session; ok is false when none
	// was started since the fleet began or was cleaned.
	CurrentSession(ctx context.Context) (sess Session, ok bool, err error)

	// StartSession makes next the current session and, in the same atomic
	// step, appends the session that was current (if any) to the run log.
	StartSession(ctx context.Context, next Session) error

	// Put stores content as the file id names. Without overwrite it fails
	// with [CodeFileExists] when the file exists, and of concurrent puts of
	// one new name, in any processes, exactly one succeeds. With overwrite
	// the content is replaced atomically: readers see the old content or
	// the new. A name whose folder is a file, or a file name that is a
	// folder of other files, fails with [CodePathConflict].
	Put(ctx context.Context, id FileID, content []byte, overwrite bool) error

	// Get returns the content of the file id names, failing with
	// [CodeSessionNotValid], [CodeAgentNotValid] or [CodeFileNotFound] for
	// the first part of the ID that does not exist.
	Get(ctx context.Context, id FileID) ([]byte, error)

	// List returns the files of session, those of agent only when agent
	// is not empty, in any order, and whether the session has any file.
	// An agent without files in the session has none to list.
	List(ctx context.Context, session, agent string) (files []FileInfo, exists bool, err error)

	// Clean removes every session's files, the current session and the
	// run log. The Store calls it once it found the fleet unowned (see
	// [OwnedBackend]), or for the fleet's owner. A backend that can check
	// ownership in the same step as the removal may refuse with
	// [CodeFleetOwned] while the fleet has another owner.
	Clean(ctx context.Context) error
}

// An OwnedBackend is a [Backend] that also knows which process owns its
// fleet's rendezvous (see [Journal]). A store on it refuses [Store.Clean]
// while the fleet has an owner, as a store on a state directory does, and
// reports the owner in [Store.FleetOwner].
type OwnedBackend interface {
	Backend
	// FleetOwner returns the fleet's owner; ok is false when none owns it.
	FleetOwner(ctx context.Context) (o Owner, ok bool, err error)
}

// Journal keeps a rendezvous's turns: whoever holds one owns the fleet.
// Obtaining a Journal is how a process becomes the fleet's only writer, and a
// Journal whose ownership passed to another process must fail every later write
// (fenced by a lock the kernel drops with the process, or by the engine's
// compare-and-swap, never by clocks), so that two processes never both act on
// one turn. The disk's journal, the default, keeps slot files beside the state
// directory's sessions; package fleetnats keeps the turns on JetStream. Package
// fleetstatetest has the suite every Journal passes.
//
// Records are opaque to a Journal: the rendezvous encodes and decodes them.
// The rendezvous calls a Journal from one goroutine at a time, and ends
// each step of its writer with Flush, off the callers' critical path: a
// Journal may put off Hold and Release until then.
type Journal interface {
	// Load returns the last record saved or held of each turn not
	// released since, in any order.
	Load(ctx context.Context) ([][]byte, error)
	// Save writes rec as the record of the turn id, replacing the one
	// before. When it returns nil the record is durable; on an error the
	// record may or may not have been written, and if ownership was lost
	// the error has the code [CodeUnavailable].
	Save(ctx context.Context, id string, rec []byte) error
	// Hold writes rec as the record of the turn id, whose outcome a call
	// of its lead returned: it changes no more until it is released, but
	// in the rare case of a re-poll, which saves it. saved says that rec
	// is the record last saved. A Journal may keep held records apart,
	// more cheaply, and write them at the next Flush.
	Hold(ctx context.Context, id string, rec []byte, saved bool) error
	// Release forgets the turn id, at once or at the next Flush.
	Release(ctx context.Context, id string) error
	// Flush writes what Hold and Release left due.
	Flush(ctx context.Context) error
	// Reset forgets every turn.
	Reset(ctx context.Context) error
	// Close writes what is due and gives up the fleet's ownership; a
	// later owner takes the turns up from the records.
	Close() error
}

// DefaultJournalTimeout bounds each call of a rendezvous to a [Journal]
// given in [RendezvousOptions]; the disk's journal waits on no one.
const DefaultJournalTimeout = 10 * time.Second

// DefaultBackendTimeout bounds each call of a store to its [Backend] when
// [BackendOptions.Timeout] is zero.
const DefaultBackendTimeout = 10 * time.Second

// BackendOptions configure a [Store] opened with [OpenBackend].
type BackendOptions struct {
	// MaxContentSize is as in [Options].
	MaxContentSize int64
	// Timeout bounds each call to the backend; past it the call fails
	// with [CodeUnavailable]. Zero means DefaultBackendTimeout.
	Timeout time.Duration
}

// OpenBackend returns a store whose sessions and files live in b. Its
// contract is the same as a store's on a state directory: the same names,
// the same errors, the same atomicity. It has no state directory: Dir is
// empty, and Fs is an in-memory file system private to the store.
func OpenBackend(b Backend, opts *BackendOptions) *Store {
	if opts == nil {
		opts = &BackendOptions{}
	}
	max := opts.MaxContentSize
	if max <= 0 {
		max = DefaultMaxContentSize
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultBackendTimeout
	}
	local, err := dirstore.Open(afero.NewMemMapFs(), "", dirstore.Options{NoGitIgnore: true, LockTimeout: DefaultLockTimeout, IsSession: names.IsSessionID})
	if err != nil {
		panic("fleetstate: a folder in memory: " + err.Error()) // MkdirAll on a MemMapFs does not fail
	}
	return &Store{b: b, given: b, timeout: timeout, maxContent: max, local: local}
}

// Backend returns the backend of a store opened with [OpenBackend], or nil
// for a store on a state directory.
func (s *Store) Backend() Backend { return s.given }

// Owner describes the process that owns a fleet.
type Owner struct {
	PID   int       `json:"pid"`
	Addr  string    `json:"addr,omitempty"` // where it serves the fleet, if it said
	Since time.Time `json:"since"`
}

func (o Owner) String() string {
	s := fmt.Sprintf("pid %d", o.PID)
	if o.Addr != "" {
		s += ", " + o.Addr
	}
	return s
}

// OwnedError is the detail of an [ErrFleetOwned] error: the state directory
// and, where it could be read, its owner. Its message names the owner, not
// the directory, since errors may cross the wire to agents; a command that
// reports it names the directory itself.
type OwnedError struct {
	Dir   string
	Owner Owner // zero when the owner did not say who it is
}

func (e *OwnedError) Error() string {
	if e.Owner.PID == 0 {
		return "owner unknown"
	}
	return "owner: " + e.Owner.String()
}

// FleetOwner returns the owner of s's fleet, if a live process owns it.
// A process that owns it without describing itself has a zero PID.
func (s *Store) FleetOwner() (Owner, bool, error) { return s.fleetOwner("fleet owner") }

func (s *Store) fleetOwner(op string) (Owner, bool, error) {
	ob, ok := s.b.(OwnedBackend)
	if !ok {
		return Owner{}, false, nil
	}
	ctx, cancel := s.bctx()
	defer cancel()
	o, owned, err := ob.FleetOwner(ctx)
	if err != nil {
		return Owner{}, false, withOp(op, err)
	}
	return o, owned, nil
}
