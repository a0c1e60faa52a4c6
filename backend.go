package fleetstate

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/afero"
)

// Backend keeps a store's sessions and files somewhere other than a state
// directory on an [afero.Fs]: in a replicated engine that several
// processes on several machines share, such as NATS JetStream (package
// fleetnats). It is the narrow seam between the [Store]'s contract and
// where the bytes live.
//
// The Store checks every argument (names, IDs, sizes) before it calls a
// Backend, and checks the session rules (which session is current, what
// listing a session without files means); a Backend only keeps data, with
// the atomicity the methods name. A Backend returns errors made with
// [NewError] for the codes its methods name, [CodeUnavailable] when the
// engine cannot be reached within the context's deadline, and on any
// error has changed nothing. Its methods are safe for concurrent use by
// goroutines and by processes sharing the engine.
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
	// run log.
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
	s := &Store{
		fs:             afero.NewMemMapFs(),
		dir:            "",
		maxContent:     opts.MaxContentSize,
		lockTimeout:    DefaultLockTimeout,
		now:            time.Now,
		backend:        b,
		backendTimeout: opts.Timeout,
	}
	if s.maxContent <= 0 {
		s.maxContent = DefaultMaxContentSize
	}
	if s.backendTimeout <= 0 {
		s.backendTimeout = DefaultBackendTimeout
	}
	return s
}

// Backend returns the backend of a store opened with [OpenBackend], or nil
// for a store on a state directory.
func (s *Store) Backend() Backend { return s.backend }

// bctx is the context of one call to the backend.
func (s *Store) bctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.backendTimeout)
}

// withOp sets the operation of a backend's error to op, so that messages
// read as a state directory's would.
func withOp(op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok && e.Op == "" {
		c := *e
		c.Op = op
		return &c
	}
	if _, ok := err.(*Error); ok {
		return err
	}
	return &Error{Code: CodeInternal, Op: op, Err: err}
}

func (s *Store) backendCurrent(op string) (Session, error) {
	ctx, cancel := s.bctx()
	defer cancel()
	sess, ok, err := s.backend.CurrentSession(ctx)
	if err != nil {
		return Session{}, withOp(op, err)
	}
	if !ok {
		return Session{}, &Error{Code: CodeNoActiveSession, Op: op}
	}
	return sess, nil
}

func (s *Store) backendNewSession(op string, sess Session) (Session, error) {
	ctx, cancel := s.bctx()
	defer cancel()
	if err := s.backend.StartSession(ctx, sess); err != nil {
		return Session{}, withOp(op, err)
	}
	return sess, nil
}

func (s *Store) backendPut(op string, id FileID, content []byte, overwrite bool) (FileID, error) {
	ctx, cancel := s.bctx()
	defer cancel()
	if err := s.backend.Put(ctx, id, content, overwrite); err != nil {
		return FileID{}, withOp(op, err)
	}
	return id, nil
}

func (s *Store) backendGet(op string, id FileID) ([]byte, error) {
	ctx, cancel := s.bctx()
	defer cancel()
	data, err := s.backend.Get(ctx, id)
	if err != nil {
		return nil, withOp(op, err)
	}
	if int64(len(data)) > s.maxContent {
		return nil, newError(CodeContentTooLarge, op, "%d bytes, limit %d", len(data), s.maxContent)
	}
	return data, nil
}

func (s *Store) backendList(op, session, agent string, isCurrent bool) ([]FileInfo, error) {
	ctx, cancel := s.bctx()
	defer cancel()
	files, exists, err := s.backend.List(ctx, session, agent)
	if err != nil {
		return nil, withOp(op, err)
	}
	if !exists {
		if !isCurrent {
			if sess, err := s.backendCurrent(op); err == nil && sess.ID == session {
				isCurrent = true
			}
		}
		if isCurrent {
			return []FileInfo{}, nil
		}
		return nil, newError(CodeSessionNotValid, op, "%s", quote(session))
	}
	if files == nil {
		files = []FileInfo{}
	}
	sortFiles(files)
	return files, nil
}

func (s *Store) backendOwner(op string) (Owner, bool, error) {
	ob, ok := s.backend.(OwnedBackend)
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

func (s *Store) backendClean(op string) error {
	ctx, cancel := s.bctx()
	defer cancel()
	return withOp(op, s.backend.Clean(ctx))
}

// sortFiles puts files in the order List promises: by agent, then name.
func sortFiles(files []FileInfo) {
	slices.SortFunc(files, func(a, b FileInfo) int {
		if c := strings.Compare(a.ID.agent, b.ID.agent); c != 0 {
			return c
		}
		return strings.Compare(a.ID.name, b.ID.name)
	})
}
