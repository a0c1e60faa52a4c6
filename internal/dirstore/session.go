package dirstore

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
	"github.com/spf13/afero"
)

// ReadCurrent returns the content of current_run.txt without its line
// break; ok is false when there is none.
func (d *Dir) ReadCurrent() (line string, ok bool, err error) {
	data, rerr := afero.ReadFile(d.fs, d.Join(CurrentRunFile))
	if rerr != nil {
		if errors.Is(rerr, fs.ErrNotExist) {
			return "", false, nil
		}
		return "", false, d.IOError(rerr)
	}
	return strings.TrimRight(string(data), "\r\n"), true, nil
}

// StartSession makes line ("ID:::NAME") the current session and, in the
// same step under the session lock, appends the session that was current
// (if any) to the run log. On an error the old session stays current and
// is not archived.
func (d *Dir) StartSession(line string) error {
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	old, rerr := afero.ReadFile(d.fs, d.Join(CurrentRunFile))
	undo := func() {}
	switch {
	case rerr == nil:
		entry := append(bytes.TrimRight(old, "\r\n"), '\n')
		var aerr error
		if undo, aerr = d.appendFile(d.Join(RunLogFile), entry); aerr != nil {
			return d.IOError(aerr)
		}
	case !errors.Is(rerr, fs.ErrNotExist):
		return d.IOError(rerr)
	}
	if werr := d.WriteFile(d.Join(CurrentRunFile), []byte(line), true, false); werr != nil {
		// The old session stays current, so it must not stay archived:
		// a retry would archive it twice.
		undo()
		return werr
	}
	return nil
}

// Clean removes what the store and the rendezvous made in the state
// directory: every session folder, current_run.txt, previous_run_log.txt,
// leftover temporary files and the rendezvous state. Anything else stays,
// and so does the configuration under the private folder. It holds the
// session lock and the fleet's ownership while it works, and fails with
// KindOwned, changing nothing, while another owns the fleet; the
// ownership this Dir holds itself (see AcquireOwner) is no obstacle.
func (d *Dir) Clean() error {
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	d.ownerMu.Lock()
	self := d.held != nil
	d.ownerMu.Unlock()
	if !self {
		owner, ok, err := d.lookOwner()
		if err != nil {
			return err
		}
		if !ok {
			return &Error{Kind: KindOwned}
		}
		defer owner.Release()
	}
	return d.clean()
}

// clean is Clean with the session lock and the fleet's ownership held.
func (d *Dir) clean() error {
	entries, err := d.ReadDir(d.dir)
	if err != nil {
		return d.IOError(err)
	}
	// current_run.txt goes first: from then on no put lands in the old
	// session, and a crash halfway leaves no current session rather than a
	// current one without its files.
	if err := d.fs.Remove(d.Join(CurrentRunFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.IOError(err)
	}
	for _, e := range entries {
		name := e.Name()
		ours := name == RunLogFile || strings.HasPrefix(name, TempPrefix) ||
			d.isSession(name) && (e.IsDir() || e.Mode()&fs.ModeSymlink != 0)
		if !ours {
			continue
		}
		if err := d.removeAll(d.Join(name)); err != nil {
			return d.IOError(err)
		}
	}
	if err := d.fs.RemoveAll(d.Join(PrivateDir, RendezvousDir)); err != nil {
		return d.IOError(err)
	}
	return nil
}

// removeAll removes the tree p. A put of another process that read the
// current session just before the clean may fill a folder while it is
// being removed; the removal is then tried again (the put fails, or its
// file goes with the session), a bounded number of times.
func (d *Dir) removeAll(p string) error {
	var err error
	for range 20 {
		if err = d.fs.RemoveAll(p); err == nil || !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return err
		}
	}
	return err
}

// appendFile appends data to the file name in one write, so that lines from
// several processes never interleave. A failed append, such as one cut
// short by a full disk, is taken back; so is a successful one when the
// caller calls undo. The caller holds the session lock, so nobody else
// appends meanwhile.
func (d *Dir) appendFile(name string, data []byte) (undo func(), err error) {
	size := int64(-1) // the file did not exist
	if fi, err := d.fs.Stat(name); err == nil {
		size = fi.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	undo = func() {
		// Best effort: a disk that refused the append rarely refuses to
		// shrink a file.
		if size < 0 {
			_ = d.fs.Remove(name)
		} else if f, err := d.fs.OpenFile(name, os.O_WRONLY, FilePerm); err == nil {
			_ = f.Truncate(size)
			_ = f.Close()
		}
	}
	f, err := d.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, FilePerm)
	if err != nil {
		return nil, err
	}
	if err := WriteAndClose(f, data, d.syncWrites, nil); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// lock serialises session changes: within the process by the mutex, across
// processes by an exclusive lock on a file of the private folder where the
// file system is the operating system's. A lock another process holds for
// longer than the lock timeout (a process stopped while holding it) is an
// error, not a wait without end.
func (d *Dir) lock() (unlock func(), err error) {
	d.sessionMu.Lock()
	if !d.osFs {
		return d.sessionMu.Unlock, nil
	}
	f, oerr := os.OpenFile(d.Join(PrivateDir, lockFile), os.O_RDWR|os.O_CREATE, FilePerm)
	if oerr != nil {
		d.sessionMu.Unlock()
		return nil, d.IOError(oerr)
	}
	if lerr := lockWithin(f, d.lockTimeout); lerr != nil {
		f.Close()
		d.sessionMu.Unlock()
		return nil, d.IOError(lerr)
	}
	return func() {
		f.Close() // closing the descriptor releases the lock
		d.sessionMu.Unlock()
	}, nil
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

// ignoreInGit adds the state directory to the .gitignore at the top of the
// git work tree that contains it, unless a line there already names it.
// The entry is the directory's path anchored at the top ("/rel/"), with
// git's pattern characters escaped, so that it matches that directory and
// nothing else: see [gitIgnorePattern].
func (d *Dir) ignoreInGit() error {
	if !filepath.IsAbs(d.dir) {
		return nil
	}
	root := ""
	for p := filepath.Dir(d.dir); ; p = filepath.Dir(p) {
		if _, err := d.fs.Stat(filepath.Join(p, ".git")); err == nil {
			root = p
			break
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
	rel, err := filepath.Rel(root, d.dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil
	}
	pattern, err := gitIgnorePattern(filepath.ToSlash(rel))
	if err != nil {
		return err
	}
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	gi := filepath.Join(root, ".gitignore")
	old, err := afero.ReadFile(d.fs, gi)
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
	f, err := d.fs.OpenFile(gi, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
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
