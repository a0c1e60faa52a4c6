package fleetstate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fleetstate/fleetstate/internal/fsx"
	"github.com/google/uuid"
	"github.com/spf13/afero"
)

// Session is a run of work that groups the files agents write. Its ID is a
// random UUID; its name is the caller's label for it.
type Session struct {
	ID   string
	Name string
}

// String returns the session as current_run.txt holds it: "ID:::NAME".
func (s Session) String() string { return s.ID + sessionSep + s.Name }

// NewSession starts a session named name and makes it the current one. The
// session that was current is appended, one line "ID:::NAME", to
// previous_run_log.txt. The new session's directory appears only with its
// first file. Files of earlier sessions stay readable by ID.
func (s *Store) NewSession(name string) (Session, error) {
	const op = "new session"
	if err := validateSessionName(name); err != nil {
		return Session{}, &Error{Code: CodeInvalidSessionName, Op: op, Err: errors.New(quote(name) + ": " + err.Error())}
	}
	sess := Session{ID: uuid.NewString(), Name: name}
	if s.backend != nil {
		return s.backendNewSession(op, sess)
	}
	unlock, err := s.lock(op)
	if err != nil {
		return Session{}, err
	}
	defer unlock()
	old, err := afero.ReadFile(s.fs, s.path(currentRunFile))
	undo := func() {}
	switch {
	case err == nil:
		line := append(bytes.TrimRight(old, "\r\n"), '\n')
		if undo, err = s.appendFile(s.path(runLogFile), line); err != nil {
			return Session{}, s.ioError(op, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return Session{}, s.ioError(op, err)
	}
	if err := s.writeFile(op, s.path(currentRunFile), []byte(sess.String()), true, false); err != nil {
		// The old session stays current, so it must not stay archived:
		// a retry would archive it twice.
		undo()
		return Session{}, err
	}
	return sess, nil
}

// CurrentSession returns the current session, or [ErrNoActiveSession] if
// none was started since the directory was created or cleaned.
func (s *Store) CurrentSession() (Session, error) { return s.current("get session") }

func (s *Store) current(op string) (Session, error) {
	if s.backend != nil {
		return s.backendCurrent(op)
	}
	data, err := afero.ReadFile(s.fs, s.path(currentRunFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Session{}, &Error{Code: CodeNoActiveSession, Op: op}
		}
		return Session{}, s.ioError(op, err)
	}
	id, name, ok := strings.Cut(strings.TrimRight(string(data), "\r\n"), sessionSep)
	if !ok || !isSessionID(id) {
		return Session{}, newError(CodeNoActiveSession, op, "%s does not hold ID:::NAME", currentRunFile)
	}
	return Session{ID: id, Name: name}, nil
}

// Clean removes what the store and the rendezvous made in the state
// directory: every session folder, current_run.txt, previous_run_log.txt,
// leftover temporary files and the rendezvous state. Anything else in the
// directory stays, and so does what the store keeps as configuration under
// its private folder (the tokens, the locks). Afterwards there is no
// current session.
//
// While a [Rendezvous] owns the directory's fleet, in this process or
// another, Clean fails with [ErrFleetOwned] and changes nothing: clean
// through [Rendezvous.Clean], which ends the fleet's turns too.
func (s *Store) Clean() error {
	const op = "clean sessions"
	if s.backend != nil {
		if o, owned, err := s.backendOwner(op); err != nil {
			return err
		} else if owned {
			return &Error{Code: CodeFleetOwned, Op: op, Err: &OwnedError{Owner: o}}
		}
		return s.clean(op)
	}
	unlock, err := s.lock(op)
	if err != nil {
		return err
	}
	defer unlock()
	owner, ok, err := s.tryOwner(op)
	if err != nil {
		return err
	}
	if !ok {
		return s.ownedError(op)
	}
	defer owner.release()
	return s.clean(op)
}

// clean is Clean with the session lock and the fleet's ownership held.
func (s *Store) clean(op string) error {
	if s.backend != nil {
		return s.backendClean(op)
	}
	entries, err := s.readDir(s.dir)
	if err != nil {
		return s.ioError(op, err)
	}
	// current_run.txt goes first: from then on no put lands in the old
	// session, and a crash halfway leaves no current session rather than a
	// current one without its files.
	if err := s.fs.Remove(s.path(currentRunFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.ioError(op, err)
	}
	for _, e := range entries {
		name := e.Name()
		ours := name == runLogFile || strings.HasPrefix(name, tempPrefix) ||
			isSessionID(name) && (e.IsDir() || e.Mode()&fs.ModeSymlink != 0)
		if !ours {
			continue
		}
		if err := s.removeAll(s.path(name)); err != nil {
			return s.ioError(op, err)
		}
	}
	if err := s.fs.RemoveAll(s.path(privateDir, rendezvousDir)); err != nil {
		return s.ioError(op, err)
	}
	return nil
}

// removeAll removes the tree p. A put of another process that read the
// current session just before the clean may fill a folder while it is
// being removed; the removal is then tried again (the put fails, or its
// file goes with the session), a bounded number of times.
func (s *Store) removeAll(p string) error {
	var err error
	for range 20 {
		if err = s.fs.RemoveAll(p); err == nil || !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return err
		}
	}
	return err
}

// rendezvousDir is the folder of the private folder where the rendezvous
// keeps its state; Clean removes it with the sessions.
const rendezvousDir = "rendezvous"

// appendFile appends data to the file name in one write, so that lines from
// several processes never interleave. A failed append, such as one cut
// short by a full disk, is taken back; so is a successful one when the
// caller calls undo. The caller holds the session lock, so nobody else
// appends meanwhile.
func (s *Store) appendFile(name string, data []byte) (undo func(), err error) {
	size := int64(-1) // the file did not exist
	if fi, err := s.fs.Stat(name); err == nil {
		size = fi.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	undo = func() {
		// Best effort: a disk that refused the append rarely refuses to
		// shrink a file.
		if size < 0 {
			_ = s.fs.Remove(name)
		} else if f, err := s.fs.OpenFile(name, os.O_WRONLY, filePerm); err == nil {
			_ = f.Truncate(size)
			_ = f.Close()
		}
	}
	f, err := s.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, filePerm)
	if err != nil {
		return nil, err
	}
	if err := writeAndClose(f, data, s.syncWrites, nil); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// writeAndClose writes data to f, flushes it to stable storage when sync is
// set, and closes f, returning the first error. If the write or the flush
// fails, undo (when not nil) runs on f before it is closed.
func writeAndClose(f afero.File, data []byte, sync bool, undo func(afero.File)) error {
	_, err := f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if err != nil && undo != nil {
		undo(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// lock serialises session changes: within the process by the mutex, across
// processes by an exclusive lock on a file of the private folder where the
// file system is the operating system's. A lock another process holds for
// longer than the store's lock timeout (a process stopped while holding
// it) is an error, not a wait without end.
func (s *Store) lock(op string) (unlock func(), err error) {
	s.sessionMu.Lock()
	if !s.osFs {
		return s.sessionMu.Unlock, nil
	}
	f, err := os.OpenFile(s.path(privateDir, lockFile), os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		s.sessionMu.Unlock()
		return nil, s.ioError(op, err)
	}
	if err := lockWithin(f, s.lockTimeout); err != nil {
		f.Close()
		s.sessionMu.Unlock()
		return nil, s.ioError(op, err)
	}
	return func() {
		f.Close() // closing the descriptor releases the lock
		s.sessionMu.Unlock()
	}, nil
}

// ignoreInGit adds the state directory to the .gitignore at the top of the
// git work tree that contains it, unless a line there already names it.
// The entry is the directory's path anchored at the top ("/rel/"), with
// git's pattern characters escaped, so that it matches that directory and
// nothing else: see [gitIgnoreEntry].
func (s *Store) ignoreInGit() error {
	if !filepath.IsAbs(s.dir) {
		return nil
	}
	root := ""
	for d := filepath.Dir(s.dir); ; d = filepath.Dir(d) {
		if _, err := s.fs.Stat(filepath.Join(d, ".git")); err == nil {
			root = d
			break
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
	rel, err := filepath.Rel(root, s.dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil
	}
	pattern, err := gitIgnorePattern(filepath.ToSlash(rel))
	if err != nil {
		return err
	}
	unlock, err := s.lock("open")
	if err != nil {
		return err
	}
	defer unlock()
	gi := filepath.Join(root, ".gitignore")
	old, err := afero.ReadFile(s.fs, gi)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for line := range strings.SplitSeq(string(old), "\n") {
		if strings.Trim(trimGitIgnoreLine(line), "/") == pattern {
			return nil
		}
	}
	entry := "/" + pattern + "/\n"
	if len(old) > 0 && old[len(old)-1] != '\n' {
		entry = "\n" + entry
	}
	f, err := s.fs.OpenFile(gi, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(entry)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// errDirLineBreak refuses a state directory that no .gitignore line can
// name. Open checks for it before it creates anything.
var errDirLineBreak = errors.New("the state directory's path has a line break, which no .gitignore line can name; rename it or set Options.NoGitIgnore")

// gitIgnorePattern escapes rel, a slash-separated path, for a .gitignore
// line of the form "/rel/". Git reads "*", "?", "[" and "\\" in a pattern
// as wildcards and escapes; a backslash before each makes it literal. The
// other characters that are special in a .gitignore need no escape in
// that form: "!" and "#" are special only as a line's first character,
// which is the anchoring "/", and spaces are dropped only at a line's end,
// which is the closing "/". A line break cannot be written in a pattern at
// all, so a directory whose path has one is refused with a named error.
func gitIgnorePattern(rel string) (string, error) {
	if strings.ContainsAny(rel, "\n\r") {
		return "", errDirLineBreak
	}
	var b strings.Builder
	for _, c := range rel {
		switch c {
		case '\\', '*', '?', '[':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String(), nil
}

// trimGitIgnoreLine trims a .gitignore line as git reads it: a carriage
// return and trailing spaces go, unless the last space is escaped; leading
// spaces stay, for git they are part of the pattern.
func trimGitIgnoreLine(line string) string {
	line = strings.TrimSuffix(line, "\r")
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
		line = line[:len(line)-1]
	}
	return line
}

// lockWithin takes an exclusive lock on f, trying again with growing pauses
// while another process holds it, for at most d.
func lockWithin(f *os.File, d time.Duration) error {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		ok, err := fsx.TryLock(f)
		if err != nil || ok {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("the session lock is held by another process for over %v", d)
		}
		time.Sleep(min(pause, time.Until(deadline)+time.Millisecond))
		pause = min(2*pause, 50*time.Millisecond)
	}
}
