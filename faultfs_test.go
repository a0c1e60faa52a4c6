package fleetstate_test

import (
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/afero"
)

// faultFS is an afero.Fs that fails chosen operations on demand, as a disk
// that is full, read-only or broken would. Operations are named by op
// below; a rule fails the operations it names on paths that contain its
// path fragment, every time or only the first n times, until it is
// cleared. Everything else goes to the file system below.
//
// A faultFS is not the operating system's file system, so a store on it
// takes the portable commit path (stat and rename under a mutex) rather
// than hard links: the real-disk tests cover the other path.
type faultFS struct {
	afero.Fs

	mu    sync.Mutex
	rules []*faultRule // guarded by mu
	hits  map[op]int   // guarded by mu; failures injected, per operation
}

// op names an operation a rule can fail.
type op string

const (
	opCreate   op = "create"   // OpenFile with O_CREATE, Create
	opOpen     op = "open"     // Open, OpenFile without O_CREATE
	opWrite    op = "write"    // File.Write, WriteAt, WriteString
	opSync     op = "sync"     // File.Sync
	opClose    op = "close"    // File.Close (after the file is closed below)
	opRename   op = "rename"   // Rename
	opMkdir    op = "mkdir"    // Mkdir, MkdirAll
	opRemove   op = "remove"   // Remove, RemoveAll
	opStat     op = "stat"     // Stat, LstatIfPossible
	opReaddir  op = "readdir"  // File.Readdir, Readdirnames
	opChmod    op = "chmod"    // Chmod
	opTruncate op = "truncate" // File.Truncate
	opReadFile op = "read"     // File.Read, ReadAt
	opChtimes  op = "chtimes"  // Chtimes
)

// faultRule fails op on paths containing path. times < 0 means every time;
// short > 0 makes a failing write write that many bytes first, as a disk
// that fills up in the middle of a write does.
type faultRule struct {
	op    op
	path  string
	err   error
	times int
	short int
}

func newFaultFS(below afero.Fs) *faultFS { return &faultFS{Fs: below, hits: map[op]int{}} }

// fail adds a rule that fails op on paths containing path with err, every
// time until cleared.
func (f *faultFS) fail(o op, path string, err error) *faultRule {
	return f.add(&faultRule{op: o, path: path, err: err, times: -1})
}

// failShort adds a rule that makes writes to paths containing path write
// n bytes and then fail with err.
func (f *faultFS) failShort(path string, n int, err error) *faultRule {
	return f.add(&faultRule{op: opWrite, path: path, err: err, times: -1, short: n})
}

func (f *faultFS) add(r *faultRule) *faultRule {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, r)
	return r
}

// clear removes every rule: space returns, the disk is healthy again.
func (f *faultFS) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// injected returns how many failures were injected for o.
func (f *faultFS) injected(o op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[o]
}

// check returns the rule that fails o on path now, if any.
func (f *faultFS) check(o op, path string) *faultRule {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.op != o || !strings.Contains(path, r.path) || r.times == 0 {
			continue
		}
		if r.times > 0 {
			r.times--
		}
		f.hits[o]++
		return r
	}
	return nil
}

func (f *faultFS) pathErr(o op, path string) error {
	if r := f.check(o, path); r != nil {
		return &fs.PathError{Op: string(o), Path: path, Err: r.err}
	}
	return nil
}

func (f *faultFS) Name() string { return "faultFS(" + f.Fs.Name() + ")" }

func (f *faultFS) Create(name string) (afero.File, error) {
	if err := f.pathErr(opCreate, name); err != nil {
		return nil, err
	}
	file, err := f.Fs.Create(name)
	return f.wrap(file, err)
}

func (f *faultFS) Mkdir(name string, perm os.FileMode) error {
	if err := f.pathErr(opMkdir, name); err != nil {
		return err
	}
	return f.Fs.Mkdir(name, perm)
}

func (f *faultFS) MkdirAll(name string, perm os.FileMode) error {
	// A real MkdirAll that fails part way leaves the folders it made;
	// failing only when one is missing keeps the rule from firing on
	// folders that exist.
	if _, err := f.Fs.Stat(name); err != nil {
		if err := f.pathErr(opMkdir, name); err != nil {
			return err
		}
	}
	return f.Fs.MkdirAll(name, perm)
}

func (f *faultFS) Open(name string) (afero.File, error) {
	if err := f.pathErr(opOpen, name); err != nil {
		return nil, err
	}
	file, err := f.Fs.Open(name)
	return f.wrap(file, err)
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	o := opOpen
	if flag&os.O_CREATE != 0 {
		o = opCreate
	}
	if err := f.pathErr(o, name); err != nil {
		return nil, err
	}
	file, err := f.Fs.OpenFile(name, flag, perm)
	return f.wrap(file, err)
}

func (f *faultFS) Remove(name string) error {
	if err := f.pathErr(opRemove, name); err != nil {
		return err
	}
	return f.Fs.Remove(name)
}

func (f *faultFS) RemoveAll(path string) error {
	if err := f.pathErr(opRemove, path); err != nil {
		return err
	}
	return f.Fs.RemoveAll(path)
}

func (f *faultFS) Rename(oldname, newname string) error {
	if r := f.check(opRename, newname); r != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: r.err}
	}
	return f.Fs.Rename(oldname, newname)
}

func (f *faultFS) Stat(name string) (os.FileInfo, error) {
	if err := f.pathErr(opStat, name); err != nil {
		return nil, err
	}
	return f.Fs.Stat(name)
}

func (f *faultFS) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	if err := f.pathErr(opStat, name); err != nil {
		return nil, false, err
	}
	if l, ok := f.Fs.(afero.Lstater); ok {
		return l.LstatIfPossible(name)
	}
	fi, err := f.Fs.Stat(name)
	return fi, false, err
}

func (f *faultFS) Chmod(name string, mode os.FileMode) error {
	if err := f.pathErr(opChmod, name); err != nil {
		return err
	}
	return f.Fs.Chmod(name, mode)
}

func (f *faultFS) Chtimes(name string, atime, mtime time.Time) error {
	if err := f.pathErr(opChtimes, name); err != nil {
		return err
	}
	return f.Fs.Chtimes(name, atime, mtime)
}

func (f *faultFS) wrap(file afero.File, err error) (afero.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// faultFile is a file of a faultFS.
type faultFile struct {
	afero.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if r := f.fs.check(opWrite, f.Name()); r != nil {
		n := 0
		if r.short > 0 {
			n, _ = f.File.Write(p[:min(r.short, len(p))])
		}
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: r.err}
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.pathErr(opWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fs.pathErr(opReadFile, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.pathErr(opReadFile, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.pathErr(opSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.pathErr(opTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if ferr := f.fs.pathErr(opClose, f.Name()); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

func (f *faultFile) Readdir(n int) ([]os.FileInfo, error) {
	if err := f.fs.pathErr(opReaddir, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Readdir(n)
}

func (f *faultFile) Readdirnames(n int) ([]string, error) {
	if err := f.fs.pathErr(opReaddir, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Readdirnames(n)
}

// Errors a disk gives.
var (
	errNoSpace  = syscall.ENOSPC
	errReadOnly = syscall.EROFS
	errIO       = syscall.EIO
)
