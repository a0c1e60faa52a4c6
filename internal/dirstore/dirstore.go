// Package dirstore keeps a fleet's sessions and files in a state directory
// on an [afero.Fs], in the layout of the TypeScript server fleet-state-mgr:
// current_run.txt holds "ID:::NAME", previous_run_log.txt one line per
// archived session, and a file sits at <dir>/<session>/<agent>/<name>.
// What fleetstate keeps for itself lives under the private folder
// .fleetstate, which fleet-state-mgr never writes.
//
// It is the disk backend's plumbing: atomic writes (a temporary file
// renamed, linked or exchanged into place), walks that never follow a
// symbolic link out of the directory, the session lock, and the fleet's
// owner lock. It knows nothing of the library's IDs or error codes: names
// arrive checked, and failures come back as an [*Error] of a [Kind] that
// the caller maps onto its own codes.
package dirstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
)

// Names inside the state directory.
const (
	CurrentRunFile = "current_run.txt"
	RunLogFile     = "previous_run_log.txt"
	PrivateDir     = ".fleetstate"
	// RendezvousDir is the folder of the private folder where the
	// rendezvous keeps its state; Clean removes it with the sessions.
	RendezvousDir = "rendezvous"
	// TempPrefix starts the names of the store's temporary files; no
	// stored file's name may start with it.
	TempPrefix = ".fleetstate-tmp-"
	// StaleTempAge is how old a temporary file must be before it is taken
	// for the leftover of a crashed writer and removed.
	StaleTempAge = 10 * time.Minute

	lockFile = "lock"
)

// Permissions of what the store creates: the state directory holds other
// agents' work and credentials, so it is private to its owner.
const (
	DirPerm  = 0o700
	FilePerm = 0o600
)

// A Kind says what went wrong, for the caller to map onto its codes.
type Kind int

const (
	KindIO             Kind = iota // the file system failed; Err is its error, paths relative
	KindExists                     // a create found the file there
	KindSessionMissing             // a read found no folder for the session
	KindAgentMissing               // … no folder for the agent
	KindFileMissing                // … no such regular file
	KindPathConflict               // a file where a folder is needed, or the reverse
	KindPathEscape                 // a symbolic link on the way
	KindTooLarge                   // the content is past the limit
	KindNoSession                  // no current session, or it was cleaned under a put
	KindOwned                      // another process owns the fleet
)

// Error is a failure of the store. Err is the detail (for the kinds other
// than KindIO, a message that reads after the caller's code) or the file
// system's error.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("dirstore: kind %d", e.Kind)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func failf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}

// Quote quotes s for an error message, clipped so that hostile input of
// any length gives a message of bounded size.
func Quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

// Options configure a [Dir].
type Options struct {
	// SyncWrites flushes each file to stable storage before a write
	// returns.
	SyncWrites bool
	// NoGitIgnore stops Open from adding the state directory to the
	// .gitignore of the git work tree that contains it.
	NoGitIgnore bool
	// LockTimeout bounds the wait for the session lock that another
	// process holds. It must be positive.
	LockTimeout time.Duration
	// IsSession reports whether a name of the state directory's top is a
	// session's folder, for Clean.
	IsSession func(name string) bool
}

// Dir is a state directory. It is safe for concurrent use by goroutines,
// and several processes may open the same directory of the operating
// system's file system.
type Dir struct {
	fs   afero.Fs
	dir  string
	osFs bool // fs is the operating system's, so hard links and flock work
	// directOpen says how Get may open a file in one step instead of
	// checking each component of its path first: see openDirect.
	directOpen  openMode
	syncWrites  bool
	lockTimeout time.Duration
	isSession   func(string) bool

	// commitMu makes the check and the rename of a write one step on file
	// systems other than the operating system's, where no exclusive link
	// is available. Those file systems live in this process only.
	commitMu sync.Mutex
	// sessionMu serialises session changes within the process; a file
	// lock does it across processes.
	sessionMu sync.Mutex

	// ownerMu guards held.
	ownerMu sync.Mutex
	// held is the ownership this Dir holds for a rendezvous, if any:
	// Clean through the owner needs no second lock.
	held *OwnerLock
}

// Open opens the state directory dir on fsys, creating it and its private
// folder if needed. dir must be clean, and absolute on the operating
// system's file system.
func Open(fsys afero.Fs, dir string, opts Options) (*Dir, error) {
	d := &Dir{
		fs:          fsys,
		dir:         dir,
		osFs:        IsOsFs(fsys),
		syncWrites:  opts.SyncWrites,
		lockTimeout: opts.LockTimeout,
		isSession:   opts.IsSession,
	}
	if d.isSession == nil {
		d.isSession = func(string) bool { return false }
	}
	if !opts.NoGitIgnore && strings.ContainsAny(dir, "\n\r") {
		return nil, &Error{Kind: KindIO, Err: errDirLineBreak}
	}
	if err := d.fs.MkdirAll(filepath.Join(d.dir, PrivateDir), DirPerm); err != nil {
		return nil, d.IOError(err)
	}
	d.directOpen = directOpenMode(d.fs, d.osFs, d.dir)
	if !opts.NoGitIgnore {
		if err := d.ignoreInGit(); err != nil {
			return nil, d.IOError(err)
		}
	}
	return d, nil
}

// IsOsFs reports whether fsys is the operating system's file system.
func IsOsFs(fsys afero.Fs) bool {
	switch fsys.(type) {
	case *afero.OsFs, afero.OsFs:
		return true
	}
	return false
}

// Fs returns the file system of the directory.
func (d *Dir) Fs() afero.Fs { return d.fs }

// Path returns the state directory.
func (d *Dir) Path() string { return d.dir }

// OsFs reports whether the directory is on the operating system's file
// system.
func (d *Dir) OsFs() bool { return d.osFs }

// SyncWrites reports whether writes are flushed to stable storage.
func (d *Dir) SyncWrites() bool { return d.syncWrites }

// Now returns the time against which temporary files and free slots age.
func (d *Dir) Now() time.Time { return time.Now() }

// Private returns the path of name (its folders separated by /) inside
// the private folder.
func (d *Dir) Private(name string) string {
	return d.Join(PrivateDir, filepath.FromSlash(name))
}

// Join joins components below the state directory. The components are
// checked names, never empty, "." or "..", so joining them needs no
// cleaning.
func (d *Dir) Join(parts ...string) string {
	n := len(d.dir)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(d.dir)
	for _, p := range parts {
		if p == "" {
			continue
		}
		b.WriteByte(filepath.Separator)
		b.WriteString(p)
	}
	return b.String()
}

// Rel returns p relative to the state directory, for messages.
func (d *Dir) Rel(p string) string {
	r, err := filepath.Rel(d.dir, p)
	if err != nil {
		return filepath.Base(p)
	}
	return filepath.ToSlash(r)
}

// IOError wraps a file-system error as KindIO. Paths in it are made
// relative to the state directory, so that messages never reveal where
// the store lives on the host.
func (d *Dir) IOError(err error) *Error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = &fs.PathError{Op: pe.Op, Path: d.Rel(pe.Path), Err: pe.Err}
	case errors.As(err, &le):
		err = &os.LinkError{Op: le.Op, Old: d.Rel(le.Old), New: d.Rel(le.New), Err: le.Err}
	}
	return &Error{Kind: KindIO, Err: err}
}
