package fleetstate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/internal/dirstore"
	"github.com/fleetstate/fleetstate/internal/names"
	"github.com/spf13/afero"
)

// DefaultDirName is the name of the state directory when neither the caller
// nor the environment names one. It is relative to the working directory.
const DefaultDirName = ".ai-fleet-state"

// EnvStateDir is the environment variable that overrides [DefaultDirName].
const EnvStateDir = "FLEET_STATE_DIRECTORY"

// DefaultMaxContentSize is the largest content a store accepts when
// [Options.MaxContentSize] is zero.
const DefaultMaxContentSize = 16 << 20

// Options configure a [Store]. A nil *Options means the defaults documented
// on each field.
type Options struct {
	// MaxContentSize bounds the content of one file, in bytes, for Put and
	// Get. Zero means DefaultMaxContentSize.
	MaxContentSize int64

	// SyncWrites makes Put flush each file to stable storage before it returns.
	// Without it a put survives the crash of the process (the file is swapped
	// in atomically) but not necessarily a power failure: a file put in the
	// last seconds before one (until the operating system writes it back, about
	// 30 s on Linux) may come back empty, as may one it replaced in that time.
	SyncWrites bool

	// NoGitIgnore stops Open from adding the state directory to the
	// .gitignore of the git work tree that contains it.
	NoGitIgnore bool

	// LockTimeout bounds the wait for the state directory's session lock,
	// which Open, NewSession and Clean take, when another process holds
	// it. Zero means DefaultLockTimeout.
	LockTimeout time.Duration
}

// DefaultLockTimeout is how long a store waits for the session lock that
// another process holds before it gives up with an error: a session change
// takes milliseconds, so a longer hold is a stopped or stuck process.
const DefaultLockTimeout = 30 * time.Second

// Store keeps files per session and per agent. [Open] keeps them in a
// state directory on an [afero.Fs], in the layout of fleet-state-mgr;
// [OpenBackend] keeps them in any other [Backend], such as NATS JetStream.
// The contract is the same either way: the Store checks every argument
// before its backend sees it, and keeps the session rules.
//
// A Store is safe for concurrent use by multiple goroutines, and several
// processes may open stores on the same directory of the operating system's
// file system (or on the same JetStream fleet): writes are atomic,
// create-if-absent is exclusive across processes, and session changes are
// serialised.
type Store struct {
	b          Backend
	given      Backend       // b when given to OpenBackend, for Backend
	timeout    time.Duration // of each call to b; zero means none
	maxContent int64

	// local is where the store keeps what is not session data (a server's
	// tokens, the rendezvous's state on disk): the state directory, or for a
	// store on another backend a private folder in memory.
	local *dirstore.Dir
	dir   string // the state directory; empty on another backend
}

// DefaultDir returns the state directory used when none is given: the value
// of FLEET_STATE_DIRECTORY if set, otherwise [DefaultDirName]. A relative
// result is relative to the working directory.
func DefaultDir() string {
	if d := os.Getenv(EnvStateDir); d != "" {
		return d
	}
	return DefaultDirName
}

// Open opens the store kept in dir on fsys, creating the directory if
// needed. A nil fsys means the operating system's file system; an empty dir
// means [DefaultDir]. On the operating system's file system a relative dir
// is made absolute once, so later changes of the working directory do not
// move the store.
func Open(fsys afero.Fs, dir string, opts *Options) (*Store, error) {
	const op = "open"
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	if opts == nil {
		opts = &Options{}
	}
	if dir == "" {
		dir = DefaultDir()
	}
	if dirstore.IsOsFs(fsys) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, &Error{Code: CodeInternal, Op: op, Err: err}
		}
		dir = abs
	}
	lockTimeout := opts.LockTimeout
	if lockTimeout <= 0 {
		lockTimeout = DefaultLockTimeout
	}
	d, err := dirstore.Open(fsys, filepath.Clean(dir), dirstore.Options{
		SyncWrites:  opts.SyncWrites,
		NoGitIgnore: opts.NoGitIgnore,
		LockTimeout: lockTimeout,
		IsSession:   names.IsSessionID,
	})
	if err != nil {
		return nil, withOp(op, dirError(nil, err))
	}
	max := opts.MaxContentSize
	if max <= 0 {
		max = DefaultMaxContentSize
	}
	// Calls to the disk get no deadline: they do not wait on anyone.
	return &Store{b: &dirBackend{d: d, max: max}, maxContent: max, local: d, dir: d.Path()}, nil
}

// Dir returns the state directory; empty for a store opened with [OpenBackend].
func (s *Store) Dir() string { return s.dir }

// PrivatePath returns the path, on the store's file system, of name (its
// folders separated by /) inside the folder of the state directory where
// fleetstate keeps what is not session data, such as a server's tokens.
// Cleaning the sessions keeps that folder's files (the rendezvous's state
// aside), and fleet-state-mgr never writes there.
func (s *Store) PrivatePath(name string) string { return s.local.Private(name) }

// Fs returns the file system the store is kept on: for a store opened
// with [OpenBackend], an in-memory file system private to the store.
func (s *Store) Fs() afero.Fs { return s.local.Fs() }

// FileInfo describes a stored file.
type FileInfo struct {
	ID      FileID
	Size    int64
	ModTime time.Time
}

// Put stores content as file name of agent in the current session and
// returns its ID. The name is a relative slash-separated path; its folders
// are created as needed. Without overwrite, Put fails with [ErrFileExists]
// if the file exists, and of several concurrent puts of one new name exactly
// one succeeds. With overwrite the content is replaced atomically: readers
// see the old content or the new, never a mix.
//
// Names are checked before any I/O. On every error the store is unchanged.
func (s *Store) Put(agent, name string, content []byte, overwrite bool) (FileID, error) {
	const op = "put"
	if err := checkAgentName(op, agent); err != nil {
		return FileID{}, err
	}
	if err := checkFileName(op, name); err != nil {
		return FileID{}, err
	}
	if int64(len(content)) > s.maxContent {
		return FileID{}, newError(CodeContentTooLarge, op, "%d bytes, limit %d", len(content), s.maxContent)
	}
	sess, err := s.current(op)
	if err != nil {
		return FileID{}, err
	}
	id := FileID{session: sess.ID, agent: agent, name: name}
	ctx, cancel := s.bctx()
	defer cancel()
	if err := s.b.Put(ctx, id, content, overwrite); err != nil {
		return FileID{}, withOp(op, err)
	}
	return id, nil
}

// Get returns the content of the file id names. The session need not be the
// current one: any session whose directory still exists is readable. The
// errors say which part is missing: [ErrSessionNotValid],
// [ErrAgentNotValid] or [ErrFileNotFound].
func (s *Store) Get(id FileID) ([]byte, error) {
	const op = "get"
	if !id.IsValid() {
		return nil, newError(CodeCanOnlyRetrieveFiles, op, "zero file ID")
	}
	ctx, cancel := s.bctx()
	defer cancel()
	data, err := s.b.Get(ctx, id)
	if err != nil {
		return nil, withOp(op, err)
	}
	if int64(len(data)) > s.maxContent {
		return nil, newError(CodeContentTooLarge, op, "%d bytes, limit %d", len(data), s.maxContent)
	}
	return data, nil
}

// List returns the files of a session, of one agent if agent is not empty,
// sorted by agent and file name. An empty session means the current one.
// A session that has no directory is [ErrSessionNotValid] unless it is the
// current session, whose directory appears only with its first file; an
// agent without files gives an empty list.
//
// Temporary files of writes in progress are never listed; those older than
// ten minutes are leftovers of crashed writers and List removes them.
func (s *Store) List(session, agent string) ([]FileInfo, error) {
	const op = "list"
	if agent != "" {
		if err := checkAgentName(op, agent); err != nil {
			return nil, err
		}
	}
	isCurrent := false
	if session == "" {
		sess, err := s.current(op)
		if err != nil {
			return nil, err
		}
		session, isCurrent = sess.ID, true
	} else if !names.IsSessionID(session) {
		return nil, newError(CodeSessionNotValid, op, "%s is not a lower-case UUID", quote(session))
	}
	ctx, cancel := s.bctx()
	defer cancel()
	files, exists, err := s.b.List(ctx, session, agent)
	if err != nil {
		return nil, withOp(op, err)
	}
	if !exists {
		// The current session's folder appears only with its first file.
		if !isCurrent {
			if sess, err := s.current(op); err == nil && sess.ID == session {
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
	slices.SortFunc(files, func(a, b FileInfo) int {
		if c := strings.Compare(a.ID.agent, b.ID.agent); c != 0 {
			return c
		}
		return strings.Compare(a.ID.name, b.ID.name)
	})
	return files, nil
}

// bctx is the context of one call to the backend.
func (s *Store) bctx() (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), s.timeout)
}

// withOp sets the operation of a backend's error to op, so that messages
// read alike whatever the backend.
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
	if errors.Is(err, context.DeadlineExceeded) {
		// The bound of a backend call (Options.Timeout), never a
		// caller's: the backend did not answer in time.
		return &Error{Code: CodeUnavailable, Op: op, Err: errors.New("the backend did not answer in time")}
	}
	return &Error{Code: CodeInternal, Op: op, Err: err}
}
