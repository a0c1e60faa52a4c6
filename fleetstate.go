package fleetstate

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetstate/fleetstate/internal/fsx"
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

// Names inside the state directory. Everything the store or the rendezvous
// keeps for itself lives under privateDir, which fleet-state-mgr never
// writes; the rest is fleet-state-mgr's layout.
const (
	currentRunFile = "current_run.txt"
	runLogFile     = "previous_run_log.txt"
	privateDir     = ".fleetstate"
	lockFile       = "lock"
	sessionSep     = ":::"
	// staleTempAge is how old a temporary file must be before the store
	// takes it for the leftover of a crashed writer and removes it.
	staleTempAge = 10 * time.Minute
)

// Permissions of what the store creates: the state directory holds other
// agents' work and, later, credentials, so it is private to its owner.
const (
	dirPerm  = 0o700
	filePerm = 0o600
)

// Options configure a [Store]. A nil *Options means the defaults documented
// on each field.
type Options struct {
	// MaxContentSize bounds the content of one file, in bytes, for Put and
	// Get. Zero means DefaultMaxContentSize.
	MaxContentSize int64

	// SyncWrites makes Put flush each file to stable storage before it
	// returns. Without it a put survives the crash of the process (the
	// file is swapped in atomically) but not necessarily a power failure:
	// a file put in the last seconds before one (until the operating
	// system writes it back, about 30 s on Linux) may come back empty, as
	// may one it replaced in that time.
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

// Store keeps files per session and per agent in a state directory on an
// [afero.Fs], in the layout of fleet-state-mgr.
//
// A Store is safe for concurrent use by multiple goroutines, and several
// processes may open stores on the same directory of the operating system's
// file system: writes are atomic, create-if-absent is exclusive across
// processes, and session changes are serialised by a file lock.
type Store struct {
	fs   afero.Fs
	dir  string
	osFs bool // fs is the operating system's, so hard links and flock work
	// directOpen says how Get may open a file in one step instead of
	// checking each component of its path first: see openDirect.
	directOpen  openMode
	maxContent  int64
	syncWrites  bool
	lockTimeout time.Duration
	now         func() time.Time // seam for tests of stale temporary files

	// commitMu makes the check and the rename of a write one step on file
	// systems other than the operating system's, where no exclusive link
	// is available. Those file systems live in this process only.
	commitMu sync.Mutex
	// sessionMu serialises session changes within the process; a file lock
	// does it across processes.
	sessionMu sync.Mutex

	// backend, when not nil, keeps the sessions and files instead of fs
	// (see OpenBackend).
	backend        Backend
	backendTimeout time.Duration
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
	s := &Store{
		fs:          fsys,
		osFs:        isOsFs(fsys),
		maxContent:  opts.MaxContentSize,
		syncWrites:  opts.SyncWrites,
		lockTimeout: opts.LockTimeout,
		now:         time.Now,
	}
	if s.lockTimeout <= 0 {
		s.lockTimeout = DefaultLockTimeout
	}
	if s.maxContent <= 0 {
		s.maxContent = DefaultMaxContentSize
	}
	if s.osFs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, &Error{Code: CodeInternal, Op: op, Err: err}
		}
		dir = abs
	}
	s.dir = filepath.Clean(dir)
	if !opts.NoGitIgnore && strings.ContainsAny(s.dir, "\n\r") {
		return nil, &Error{Code: CodeInternal, Op: op, Err: errDirLineBreak}
	}
	if err := s.fs.MkdirAll(filepath.Join(s.dir, privateDir), dirPerm); err != nil {
		return nil, s.ioError(op, err)
	}
	s.directOpen = directOpenMode(s.fs, s.osFs, s.dir)
	if !opts.NoGitIgnore {
		if err := s.ignoreInGit(); err != nil {
			return nil, s.ioError(op, err)
		}
	}
	return s, nil
}

func isOsFs(fsys afero.Fs) bool {
	switch fsys.(type) {
	case *afero.OsFs, afero.OsFs:
		return true
	}
	return false
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

// PrivatePath returns the path, on the store's file system, of name (its
// folders separated by /) inside the folder of the state directory where
// fleetstate keeps what is not session data, such as a server's tokens.
// Cleaning the sessions keeps that folder's files (the rendezvous's state
// aside), and fleet-state-mgr never writes there.
func (s *Store) PrivatePath(name string) string {
	return s.path(privateDir, filepath.FromSlash(name))
}

// Fs returns the file system the store is kept on.
func (s *Store) Fs() afero.Fs { return s.fs }

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
	if s.backend != nil {
		return s.backendPut(op, id, content, overwrite)
	}
	parts := id.parts()
	depth, info, err := s.existing(op, parts)
	if err != nil {
		return FileID{}, err
	}
	if depth == len(parts) {
		if info.IsDir() {
			return FileID{}, newError(CodePathConflict, op, "%s is a directory", quote(name))
		}
		if !overwrite {
			return FileID{}, newError(CodeFileExists, op, "%s", quote(id.String()))
		}
	}
	final := s.path(parts...)
	// inspect saw every folder up to depth: the file's own folder needs
	// making only if it was not among them.
	if depth < len(parts)-1 {
		if err := s.fs.MkdirAll(filepath.Dir(final), dirPerm); err != nil {
			s.removeFolders(parts, depth)
			return FileID{}, s.cleanedUnder(op, sess, s.ioError(op, err))
		}
	}
	if err := s.writeFile(op, final, content, overwrite, true); err != nil {
		if CodeOf(err) == CodeFileExists {
			err = newError(CodeFileExists, op, "%s", quote(id.String()))
		}
		s.removeFolders(parts, depth)
		return FileID{}, s.cleanedUnder(op, sess, err)
	}
	return id, nil
}

// cleanedUnder tells apart, in the error of a put, a folder that went away
// while the file was written: the sessions were cleaned meanwhile, by
// another process or goroutine. That is no failure of the disk, and the
// caller is told what happened: there is no current session, or not the
// one the put began in.
func (s *Store) cleanedUnder(op string, sess Session, err error) error {
	// MkdirAll racing the removal of a folder says either: the folder is
	// gone, or it existed when mkdir ran and was gone when it looked again.
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if cur, cerr := s.current(op); cerr == nil && cur.ID == sess.ID {
		return err
	}
	return newError(CodeNoActiveSession, op, "the sessions were cleaned while the file was written")
}

// removeFolders undoes the folders a failed Put made: those of parts (the
// last of which is the file) from index depth on, deepest first, stopping
// at the first that is not empty, so that a folder another writer has put
// a file in since stays. The operating system refuses to remove a folder
// that is not empty; other file systems (afero's in-memory one removes a
// folder with its entries still in it) are asked first, under commitMu,
// which their commits take too.
func (s *Store) removeFolders(parts []string, depth int) {
	if !s.osFs {
		s.commitMu.Lock()
		defer s.commitMu.Unlock()
	}
	for i := len(parts) - 1; i > depth; i-- {
		dir := s.path(parts[:i]...)
		if !s.osFs {
			if names, err := s.readDirNames(dir); err != nil || len(names) > 0 {
				return
			}
		}
		if err := s.fs.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}

// readDirNames returns up to one name of the entries of dir: enough to
// tell whether it is empty.
func (s *Store) readDirNames(dir string) ([]string, error) {
	f, err := s.fs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
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
	if s.backend != nil {
		return s.backendGet(op, id)
	}
	if data, ok, err := s.getDirect(op, id); ok {
		return data, err
	}
	parts := id.parts()
	depth, info, err := s.inspect(op, parts)
	// A file where the ID needs a folder means that what the ID names does
	// not exist: depth, the index of that file, says which part is missing.
	if err != nil && CodeOf(err) != CodePathConflict {
		return nil, err
	}
	switch {
	case depth == 0:
		return nil, newError(CodeSessionNotValid, op, "%s", quote(id.session))
	case depth == 1:
		return nil, newError(CodeAgentNotValid, op, "%s in session %s", quote(id.agent), id.session)
	case depth < len(parts) || !info.Mode().IsRegular():
		return nil, newError(CodeFileNotFound, op, "%s", quote(id.String()))
	case info.Size() > s.maxContent:
		return nil, newError(CodeContentTooLarge, op, "%d bytes, limit %d", info.Size(), s.maxContent)
	}
	f, err := s.fs.Open(s.path(parts...))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, newError(CodeFileNotFound, op, "%s", quote(id.String()))
		}
		return nil, s.ioError(op, err)
	}
	defer f.Close()
	return s.readContent(op, f, info.Size())
}

// getDirect reads the file id names in one open, where the file system
// allows it without following a symbolic link (see openDirect). ok is
// false when it does not apply or the file is not plainly there (missing,
// not a regular file, too large): the caller then walks the path to tell
// why.
func (s *Store) getDirect(op string, id FileID) (data []byte, ok bool, err error) {
	if s.directOpen == openChecked {
		return nil, false, nil
	}
	f, err := s.openDirect(s.path(id.session, id.agent, filepath.FromSlash(id.name)))
	if err != nil {
		return nil, false, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > s.maxContent {
		return nil, false, nil
	}
	data, err = s.readContent(op, f, fi.Size())
	return data, true, err
}

// readContent reads f, whose size was size when it was checked. It reads
// one byte past the limit so that a file that grew since is still refused
// rather than truncated. The buffer is sized once, so content is copied
// once, and bytes.Buffer does not clear it before it is filled.
func (s *Store) readContent(op string, f io.Reader, size int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(size, s.maxContent)) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, s.maxContent+1)); err != nil {
		return nil, s.ioError(op, err)
	}
	if int64(buf.Len()) > s.maxContent {
		return nil, newError(CodeContentTooLarge, op, "more than %d bytes", s.maxContent)
	}
	return buf.Bytes(), nil
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
	} else if !isSessionID(session) {
		return nil, newError(CodeSessionNotValid, op, "%s is not a lower-case UUID", quote(session))
	}
	if s.backend != nil {
		return s.backendList(op, session, agent, isCurrent)
	}
	depth, info, err := s.inspect(op, []string{session})
	if err != nil {
		return nil, err
	}
	if depth == 0 || !info.IsDir() {
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
	files := []FileInfo{}
	var agents []string
	if agent != "" {
		// walk opens the agent's folder by name, which would follow a link.
		if _, _, err := s.inspect(op, []string{session, agent}); err != nil {
			return nil, err
		}
		agents = []string{agent}
	} else {
		entries, err := s.readDir(s.path(session))
		if err != nil {
			return nil, s.ioError(op, err)
		}
		for _, e := range entries {
			if e.IsDir() && validateAgentName(e.Name()) == nil {
				agents = append(agents, e.Name())
			}
		}
	}
	for _, a := range agents {
		files, err = s.walk(session, a, "", files)
		if err != nil {
			return nil, s.ioError(op, err)
		}
	}
	sortFiles(files)
	return files, nil
}

// walk appends to files the regular files below folder rel of agent's
// directory. It skips symbolic links, names no valid ID can address and
// temporary files, removing the stale ones.
func (s *Store) walk(session, agent, rel string, files []FileInfo) ([]FileInfo, error) {
	dir := s.path(session, agent, rel)
	entries, err := s.readDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return files, nil
		}
		return files, err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			if e.Mode().IsRegular() && s.now().Sub(e.ModTime()) > staleTempAge {
				_ = s.fs.Remove(filepath.Join(dir, name)) // best effort; the next List retries
			}
			continue
		}
		if validateSegment(name) != nil {
			continue
		}
		full := name
		if rel != "" {
			full = rel + "/" + name
		}
		switch {
		case e.IsDir():
			if files, err = s.walk(session, agent, full, files); err != nil {
				return files, err
			}
		case e.Mode().IsRegular() && len(full) <= MaxFileNameLen:
			files = append(files, FileInfo{
				ID:      FileID{session: session, agent: agent, name: full},
				Size:    e.Size(),
				ModTime: e.ModTime(),
			})
		}
	}
	return files, nil
}

// readDir lists a directory without following symbolic links in it: on the
// operating system's file system Readdir reports links as links.
func (s *Store) readDir(dir string) ([]os.FileInfo, error) {
	f, err := s.fs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdir(-1)
}

// parts returns the path components of id below the state directory.
func (id FileID) parts() []string {
	return append([]string{id.session, id.agent}, strings.Split(id.name, "/")...)
}

// path joins components below the state directory. The components are
// checked names, never empty, "." or "..", so joining them needs no
// cleaning.
func (s *Store) path(parts ...string) string {
	n := len(s.dir)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(s.dir)
	for _, p := range parts {
		if p == "" {
			continue
		}
		b.WriteByte(filepath.Separator)
		b.WriteString(p)
	}
	return b.String()
}

// inspect walks parts below the state directory from the top and returns
// how many of them exist and the information of the deepest that does. No
// component may be a symbolic link ([ErrPathEscape]) and every component
// that exists, except the last, must be a directory ([ErrPathConflict]).
func (s *Store) inspect(op string, parts []string) (depth int, info os.FileInfo, err error) {
	p := s.path(parts...)
	end := len(s.dir)
	for i, part := range parts {
		end += 1 + len(part)
		fi, err := s.lstat(p[:end])
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return i, info, nil
			}
			return i, info, s.ioError(op, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return i, info, newError(CodePathEscape, op, "%s is a symbolic link", quote(strings.Join(parts[:i+1], "/")))
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return i, info, newError(CodePathConflict, op, "%s is a file, not a folder", quote(strings.Join(parts[:i+1], "/")))
		}
		info = fi
	}
	return len(parts), info, nil
}

// existing is inspect, shortened where the file system holds no symbolic
// links (see openPlain): there a regular file at the full path means that
// every component above it is a folder, so one stat answers. Anything else
// is walked component by component.
func (s *Store) existing(op string, parts []string) (depth int, info os.FileInfo, err error) {
	if s.directOpen == openPlain {
		if fi, err := s.fs.Stat(s.path(parts...)); err == nil && fi.Mode().IsRegular() {
			return len(parts), fi, nil
		}
	}
	return s.inspect(op, parts)
}

func (s *Store) lstat(p string) (os.FileInfo, error) {
	if l, ok := s.fs.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(p)
		return fi, err
	}
	return s.fs.Stat(p)
}

// writeFile writes data to the file final atomically: it writes a temporary
// file in the same folder and then renames it over final (with exchange,
// swaps it in: see fsx.Replace), or, without overwrite, links it to final,
// which fails if final exists. On error nothing is left behind.
//
// Puts swap (exchange): a file put is the caller's, and SyncWrites is
// there for a caller who needs it to outlive a power failure. The store's
// and the journal's own files (current_run.txt, a rewritten slot, the
// compacted held log) are renamed over, which on ext4 writes the new
// file's data back first: a power failure then leaves the old content or
// the new, never an empty file that would lose the session or every held
// outcome at once.
func (s *Store) writeFile(op, final string, data []byte, overwrite, exchange bool) (err error) {
	dir := filepath.Dir(final)
	f, err := afero.TempFile(s.fs, dir, tempPrefix+"*")
	if errors.Is(err, fs.ErrNotExist) {
		// A failed put of another writer took back the folder after this
		// one made it (see removeFolders): make it again, once.
		if err = s.fs.MkdirAll(dir, dirPerm); err == nil {
			f, err = afero.TempFile(s.fs, dir, tempPrefix+"*")
		}
	}
	if err != nil {
		return s.ioError(op, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = s.fs.Remove(tmp) // best effort: a leftover is ignored and swept later
		}
	}()
	if err = writeAndClose(f, data, s.syncWrites, nil); err != nil {
		return s.ioError(op, err)
	}
	return s.commit(op, tmp, final, overwrite, exchange)
}

// commit moves the finished temporary file tmp to final.
func (s *Store) commit(op, tmp, final string, overwrite, exchange bool) error {
	if s.osFs {
		if overwrite {
			replace := os.Rename
			if exchange {
				replace = fsx.Replace
			}
			if err := replace(tmp, final); err != nil {
				return s.conflictOrIO(op, err, final)
			}
			return nil
		}
		// A hard link is created only if final does not exist, atomically
		// and across processes; the temporary name is dropped after.
		if err := os.Link(tmp, final); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return &Error{Code: CodeFileExists, Op: op}
			}
			return s.conflictOrIO(op, err, final)
		}
		_ = os.Remove(tmp) // the file is stored; a leftover name is swept later
		return nil
	}
	// Other file systems live in this process only, so the mutex makes the
	// check and the rename one step. Rename on them may replace a
	// directory, which the check also refuses.
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	fi, err := s.fs.Stat(final)
	switch {
	case err == nil && fi.IsDir():
		return newError(CodePathConflict, op, "%s is a directory", quote(s.rel(final)))
	case err == nil && !overwrite:
		return &Error{Code: CodeFileExists, Op: op}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return s.ioError(op, err)
	}
	if err := s.fs.Rename(tmp, final); err != nil {
		return s.ioError(op, err)
	}
	return nil
}

func (s *Store) conflictOrIO(op string, err error, final string) error {
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
		return newError(CodePathConflict, op, "%s is a directory", quote(s.rel(final)))
	}
	return s.ioError(op, err)
}

// rel returns p relative to the state directory, for messages.
func (s *Store) rel(p string) string {
	r, err := filepath.Rel(s.dir, p)
	if err != nil {
		return filepath.Base(p)
	}
	return filepath.ToSlash(r)
}

// ioError wraps a file-system error as [CodeInternal]. Paths in it are made
// relative to the state directory, so that messages never reveal where the
// store lives on the host.
func (s *Store) ioError(op string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = &fs.PathError{Op: pe.Op, Path: s.rel(pe.Path), Err: pe.Err}
	case errors.As(err, &le):
		err = &os.LinkError{Op: le.Op, Old: s.rel(le.Old), New: s.rel(le.New), Err: le.Err}
	}
	return &Error{Code: CodeInternal, Op: op, Err: err}
}

// openMode says how a file below the state directory may be opened in one
// step, without first checking each component of its path for a symbolic
// link (see [Store.inspect]).
type openMode int

const (
	// openChecked: no one-step open; every component is checked first.
	openChecked openMode = iota
	// openPlain: the file system cannot hold symbolic links (it is in
	// memory, or it cannot even tell a link from its target), so a plain
	// Open follows none.
	openPlain
	// openNoLinks: the operating system's file system, where the kernel
	// refuses to follow any symbolic link on the way (openat2 with
	// RESOLVE_NO_SYMLINKS on Linux). The state directory's own path has no
	// link in it, so a refusal means a link inside the state directory.
	openNoLinks
)

// directOpenMode returns the one-step open available for a store in dir.
func directOpenMode(fsys afero.Fs, osFs bool, dir string) openMode {
	if osFs {
		if !fsx.NoFollowSupported {
			return openChecked
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil || real != dir {
			return openChecked
		}
		return openNoLinks
	}
	if _, ok := fsys.(*afero.MemMapFs); ok {
		return openPlain
	}
	if _, ok := fsys.(afero.Lstater); !ok {
		return openPlain
	}
	return openChecked
}

// errNoDirectOpen means that a file cannot be opened in one step here.
var errNoDirectOpen = errors.New("fleetstate: no direct open")

// openDirect opens the file at path for reading in one step, following no
// symbolic link, or fails. The file may turn out to be a folder or a
// special file: the caller checks. On any failure the caller walks the
// path with inspect, which tells exactly what is wrong.
func (s *Store) openDirect(path string) (afero.File, error) {
	switch s.directOpen {
	case openPlain:
		return s.fs.Open(path)
	case openNoLinks:
		f, err := fsx.OpenNoFollow(path)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, errNoDirectOpen
}
