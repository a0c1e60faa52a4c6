package dirstore

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fleetstate/fleetstate/internal/fsx"
	"github.com/spf13/afero"
)

// File describes a stored file: its agent, its slash-separated name below
// the agent's folder, its size and its time of change.
type File struct {
	Agent, Name string
	Size        int64
	ModTime     time.Time
}

// Put stores content as name (slash-separated) of agent in session, whose
// folders are made as needed. Without overwrite it fails with KindExists
// if the file exists, and of several concurrent puts of one new name, in
// any processes, exactly one succeeds. With overwrite the content is
// swapped in atomically. A folder where the file goes, or a file where a
// folder is needed, is KindPathConflict; a folder of the session that went
// away under the put (the sessions were cleaned) is KindNoSession, found
// by current, which returns the current session's ID.
func (d *Dir) Put(session, agent, name string, content []byte, overwrite bool, current func() (string, error)) error {
	parts := append([]string{session, agent}, strings.Split(name, "/")...)
	depth, info, err := d.existing(parts)
	if err != nil {
		return err
	}
	if depth == len(parts) {
		if info.IsDir() {
			return failf(KindPathConflict, "%s is a directory", Quote(name))
		}
		if !overwrite {
			return &Error{Kind: KindExists}
		}
	}
	final := d.Join(parts...)
	// inspect saw every folder up to depth: the file's own folder needs
	// making only if it was not among them.
	if depth < len(parts)-1 {
		if err := d.fs.MkdirAll(filepath.Dir(final), DirPerm); err != nil {
			d.removeFolders(parts, depth)
			return d.cleanedUnder(session, current, d.IOError(err))
		}
	}
	if err := d.WriteFile(final, content, overwrite, true); err != nil {
		d.removeFolders(parts, depth)
		return d.cleanedUnder(session, current, err)
	}
	return nil
}

// cleanedUnder tells apart, in the error of a put, a folder that went away
// while the file was written: the sessions were cleaned meanwhile, by
// another process or goroutine. That is no failure of the disk, and the
// caller is told what happened: there is no current session, or not the
// one the put began in.
func (d *Dir) cleanedUnder(session string, current func() (string, error), err *Error) error {
	// MkdirAll racing the removal of a folder says either: the folder is
	// gone, or it existed when mkdir ran and was gone when it looked again.
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if cur, cerr := current(); cerr == nil && cur == session {
		return err
	}
	return failf(KindNoSession, "the sessions were cleaned while the file was written")
}

// removeFolders undoes the folders a failed Put made: those of parts (the
// last of which is the file) from index depth on, deepest first, stopping
// at the first that is not empty, so that a folder another writer has put
// a file in since stays. The operating system refuses to remove a folder
// that is not empty; other file systems (afero's in-memory one removes a
// folder with its entries still in it) are asked first, under commitMu,
// which their commits take too.
func (d *Dir) removeFolders(parts []string, depth int) {
	if !d.osFs {
		d.commitMu.Lock()
		defer d.commitMu.Unlock()
	}
	for i := len(parts) - 1; i > depth; i-- {
		dir := d.Join(parts[:i]...)
		if !d.osFs {
			if names, err := d.readDirNames(dir); err != nil || len(names) > 0 {
				return
			}
		}
		if err := d.fs.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}

// readDirNames returns up to one name of the entries of dir: enough to
// tell whether it is empty.
func (d *Dir) readDirNames(dir string) ([]string, error) {
	f, err := d.fs.Open(dir)
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

// Get returns the content of name of agent in session, at most max bytes.
// The kinds say which part is missing: KindSessionMissing,
// KindAgentMissing or KindFileMissing; a larger file is KindTooLarge.
func (d *Dir) Get(session, agent, name string, max int64) ([]byte, error) {
	if data, ok, err := d.getDirect(session, agent, name, max); ok {
		return data, err
	}
	parts := append([]string{session, agent}, strings.Split(name, "/")...)
	depth, info, err := d.inspect(parts)
	// A file where the ID needs a folder means that what the ID names does
	// not exist: depth, the index of that file, says which part is missing.
	if err != nil && err.Kind != KindPathConflict {
		return nil, err
	}
	switch {
	case depth == 0:
		return nil, &Error{Kind: KindSessionMissing}
	case depth == 1:
		return nil, &Error{Kind: KindAgentMissing}
	case depth < len(parts) || !info.Mode().IsRegular():
		return nil, &Error{Kind: KindFileMissing}
	case info.Size() > max:
		return nil, failf(KindTooLarge, "%d bytes, limit %d", info.Size(), max)
	}
	f, oerr := d.fs.Open(d.Join(parts...))
	if oerr != nil {
		if errors.Is(oerr, fs.ErrNotExist) {
			return nil, &Error{Kind: KindFileMissing}
		}
		return nil, d.IOError(oerr)
	}
	defer f.Close()
	return d.readContent(f, info.Size(), max)
}

// getDirect reads the file in one open, where the file system allows it
// without following a symbolic link (see openDirect). ok is false when it
// does not apply or the file is not plainly there (missing, not a regular
// file, too large): the caller then walks the path to tell why.
func (d *Dir) getDirect(session, agent, name string, max int64) (data []byte, ok bool, err error) {
	if d.directOpen == openChecked {
		return nil, false, nil
	}
	f, oerr := d.openDirect(d.Join(session, agent, filepath.FromSlash(name)))
	if oerr != nil {
		return nil, false, nil
	}
	defer f.Close()
	fi, serr := f.Stat()
	if serr != nil || !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, false, nil
	}
	data, err = d.readContent(f, fi.Size(), max)
	return data, true, err
}

// readContent reads f, whose size was size when it was checked. It reads
// one byte past the limit so that a file that grew since is still refused
// rather than truncated. The buffer is sized once, so content is copied
// once, and bytes.Buffer does not clear it before it is filled.
func (d *Dir) readContent(f io.Reader, size, max int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(size, max)) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, d.IOError(err)
	}
	if int64(buf.Len()) > max {
		return nil, failf(KindTooLarge, "more than %d bytes", max)
	}
	return buf.Bytes(), nil
}

// List returns the regular files of session, of agent only when agent is
// not empty, in no particular order, and whether the session has a folder.
// Symbolic links and temporary files are never listed; temporary files
// older than StaleTempAge are leftovers of crashed writers and are
// removed. Names are returned as they are on disk: the caller drops those
// no valid name can address.
func (d *Dir) List(session, agent string) (files []File, exists bool, err error) {
	depth, info, ierr := d.inspect([]string{session})
	if ierr != nil {
		return nil, false, ierr
	}
	if depth == 0 || !info.IsDir() {
		return nil, false, nil
	}
	files = []File{}
	var agents []string
	if agent != "" {
		// walk opens the agent's folder by name, which would follow a link.
		if _, _, ierr := d.inspect([]string{session, agent}); ierr != nil {
			return nil, true, ierr
		}
		agents = []string{agent}
	} else {
		entries, rerr := d.ReadDir(d.Join(session))
		if rerr != nil {
			return nil, true, d.IOError(rerr)
		}
		for _, e := range entries {
			if e.IsDir() {
				agents = append(agents, e.Name())
			}
		}
	}
	for _, a := range agents {
		files, err = d.walk(session, a, "", files)
		if err != nil {
			return nil, true, d.IOError(err)
		}
	}
	return files, true, nil
}

// walk appends to files the regular files below folder rel of agent's
// directory. It skips symbolic links and temporary files, removing the
// stale ones.
func (d *Dir) walk(session, agent, rel string, files []File) ([]File, error) {
	dir := d.Join(session, agent, rel)
	entries, err := d.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return files, nil
		}
		return files, err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, TempPrefix) {
			if e.Mode().IsRegular() && d.Now().Sub(e.ModTime()) > StaleTempAge {
				_ = d.fs.Remove(filepath.Join(dir, name)) // best effort; the next List retries
			}
			continue
		}
		full := name
		if rel != "" {
			full = rel + "/" + name
		}
		switch {
		case e.IsDir():
			if files, err = d.walk(session, agent, full, files); err != nil {
				return files, err
			}
		case e.Mode().IsRegular():
			files = append(files, File{Agent: agent, Name: full, Size: e.Size(), ModTime: e.ModTime()})
		}
	}
	return files, nil
}

// ReadDir lists a directory without following symbolic links in it: on
// the operating system's file system Readdir reports links as links.
func (d *Dir) ReadDir(dir string) ([]os.FileInfo, error) {
	f, err := d.fs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdir(-1)
}

// inspect walks parts below the state directory from the top and returns
// how many of them exist and the information of the deepest that does. No
// component may be a symbolic link (KindPathEscape) and every component
// that exists, except the last, must be a directory (KindPathConflict).
func (d *Dir) inspect(parts []string) (depth int, info os.FileInfo, err *Error) {
	p := d.Join(parts...)
	end := len(d.dir)
	for i, part := range parts {
		end += 1 + len(part)
		fi, lerr := d.lstat(p[:end])
		if lerr != nil {
			if errors.Is(lerr, fs.ErrNotExist) || errors.Is(lerr, syscall.ENOTDIR) {
				return i, info, nil
			}
			return i, info, d.IOError(lerr)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return i, info, failf(KindPathEscape, "%s is a symbolic link", Quote(strings.Join(parts[:i+1], "/")))
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return i, info, failf(KindPathConflict, "%s is a file, not a folder", Quote(strings.Join(parts[:i+1], "/")))
		}
		info = fi
	}
	return len(parts), info, nil
}

// existing is inspect, shortened where the file system holds no symbolic
// links (see openPlain): there a regular file at the full path means that
// every component above it is a folder, so one stat answers. Anything
// else is walked component by component.
func (d *Dir) existing(parts []string) (depth int, info os.FileInfo, err error) {
	if d.directOpen == openPlain {
		if fi, serr := d.fs.Stat(d.Join(parts...)); serr == nil && fi.Mode().IsRegular() {
			return len(parts), fi, nil
		}
	}
	depth, info, ierr := d.inspect(parts)
	if ierr != nil {
		return depth, info, ierr
	}
	return depth, info, nil
}

func (d *Dir) lstat(p string) (os.FileInfo, error) {
	if l, ok := d.fs.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(p)
		return fi, err
	}
	return d.fs.Stat(p)
}

// WriteFile writes data to the file final atomically: it writes a
// temporary file in the same folder and then renames it over final (with
// exchange, swaps it in: see fsx.Replace), or, without overwrite, links it
// to final, which fails with KindExists if final exists. On error nothing
// is left behind.
//
// Puts swap (exchange): a file put is the caller's, and SyncWrites is
// there for a caller who needs it to outlive a power failure. The store's
// and the journal's own files (current_run.txt, a rewritten slot, the
// compacted held log) are renamed over, which on ext4 writes the new
// file's data back first: a power failure then leaves the old content or
// the new, never an empty file that would lose the session or every held
// outcome at once.
func (d *Dir) WriteFile(final string, data []byte, overwrite, exchange bool) (err *Error) {
	dir := filepath.Dir(final)
	f, terr := afero.TempFile(d.fs, dir, TempPrefix+"*")
	if errors.Is(terr, fs.ErrNotExist) {
		// A failed put of another writer took back the folder after this
		// one made it (see removeFolders): make it again, once.
		if terr = d.fs.MkdirAll(dir, DirPerm); terr == nil {
			f, terr = afero.TempFile(d.fs, dir, TempPrefix+"*")
		}
	}
	if terr != nil {
		return d.IOError(terr)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = d.fs.Remove(tmp) // best effort: a leftover is ignored and swept later
		}
	}()
	if werr := WriteAndClose(f, data, d.syncWrites, nil); werr != nil {
		return d.IOError(werr)
	}
	return d.commit(tmp, final, overwrite, exchange)
}

// commit moves the finished temporary file tmp to final.
func (d *Dir) commit(tmp, final string, overwrite, exchange bool) *Error {
	if d.osFs {
		if overwrite {
			replace := os.Rename
			if exchange {
				replace = fsx.Replace
			}
			if err := replace(tmp, final); err != nil {
				return d.conflictOrIO(err, final)
			}
			return nil
		}
		// A hard link is created only if final does not exist, atomically
		// and across processes; the temporary name is dropped after.
		if err := os.Link(tmp, final); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return &Error{Kind: KindExists}
			}
			return d.conflictOrIO(err, final)
		}
		_ = os.Remove(tmp) // the file is stored; a leftover name is swept later
		return nil
	}
	// Other file systems live in this process only, so the mutex makes the
	// check and the rename one step. Rename on them may replace a
	// directory, which the check also refuses.
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	fi, err := d.fs.Stat(final)
	switch {
	case err == nil && fi.IsDir():
		return failf(KindPathConflict, "%s is a directory", Quote(d.Rel(final)))
	case err == nil && !overwrite:
		return &Error{Kind: KindExists}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return d.IOError(err)
	}
	if err := d.fs.Rename(tmp, final); err != nil {
		return d.IOError(err)
	}
	return nil
}

func (d *Dir) conflictOrIO(err error, final string) *Error {
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
		return failf(KindPathConflict, "%s is a directory", Quote(d.Rel(final)))
	}
	return d.IOError(err)
}

// WriteAndClose writes data to f, flushes it to stable storage when sync
// is set, and closes f, returning the first error. If the write or the
// flush fails, undo (when not nil) runs on f before it is closed.
func WriteAndClose(f afero.File, data []byte, sync bool, undo func(afero.File)) error {
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

// openMode says how a file below the state directory may be opened in one
// step, without first checking each component of its path for a symbolic
// link (see inspect).
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
var errNoDirectOpen = errors.New("dirstore: no direct open")

// openDirect opens the file at path for reading in one step, following no
// symbolic link, or fails. The file may turn out to be a folder or a
// special file: the caller checks. On any failure the caller walks the
// path with inspect, which tells exactly what is wrong.
func (d *Dir) openDirect(path string) (afero.File, error) {
	switch d.directOpen {
	case openPlain:
		return d.fs.Open(path)
	case openNoLinks:
		f, err := fsx.OpenNoFollow(path)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, errNoDirectOpen
}
