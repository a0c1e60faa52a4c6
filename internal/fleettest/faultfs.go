package fleettest

import (
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
)

// FaultFS is an afero.Fs that fails chosen operations on demand, as a disk
// that is full, read-only or broken would. Operations are named by [Op];
// a rule fails the operation it names on paths that contain its path
// fragment, every time, until it is cleared. Everything else goes to the
// file system below. A FaultFS is safe for concurrent use.
//
// A FaultFS is not the operating system's file system, so a store on it
// takes the portable commit path (stat and rename under a mutex) rather
// than hard links: the real-disk tests cover the other path.
type FaultFS struct {
	afero.Fs

	mu    sync.Mutex
	rules []*FaultRule // guarded by mu
	hits  map[Op]int   // guarded by mu; failures injected, per operation
}

// Op names an operation a rule can fail.
type Op string

const (
	OpCreate   Op = "create"   // OpenFile with O_CREATE, Create
	OpOpen     Op = "open"     // Open, OpenFile without O_CREATE
	OpWrite    Op = "write"    // File.Write, WriteAt, WriteString
	OpSync     Op = "sync"     // File.Sync
	OpClose    Op = "close"    // File.Close (after the file is closed below)
	OpRename   Op = "rename"   // Rename
	OpMkdir    Op = "mkdir"    // Mkdir, MkdirAll
	OpRemove   Op = "remove"   // Remove, RemoveAll
	OpStat     Op = "stat"     // Stat, LstatIfPossible
	OpReaddir  Op = "readdir"  // File.Readdir, Readdirnames
	OpChmod    Op = "chmod"    // Chmod
	OpTruncate Op = "truncate" // File.Truncate
	OpReadFile Op = "read"     // File.Read, ReadAt
	OpChtimes  Op = "chtimes"  // Chtimes
)

// A FaultRule fails op on paths containing path. times < 0 means every time;
// short > 0 makes a failing write write that many bytes first, as a disk
// that fills up in the middle of a write does.
type FaultRule struct {
	op    Op
	path  string
	err   error
	times int
	short int
}

// NewFaultFS returns a FaultFS over below, with no rule yet.
func NewFaultFS(below afero.Fs) *FaultFS { return &FaultFS{Fs: below, hits: map[Op]int{}} }

// Fail adds a rule that fails op on paths containing path with err, every
// time until cleared.
func (f *FaultFS) Fail(o Op, path string, err error) *FaultRule {
	return f.add(&FaultRule{op: o, path: path, err: err, times: -1})
}

// FailShort adds a rule that makes writes to paths containing path write
// n bytes and then fail with err.
func (f *FaultFS) FailShort(path string, n int, err error) *FaultRule {
	return f.add(&FaultRule{op: OpWrite, path: path, err: err, times: -1, short: n})
}

func (f *FaultFS) add(r *FaultRule) *FaultRule {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, r)
	return r
}

// Clear removes every rule: space returns, the disk is healthy again.
func (f *FaultFS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Injected returns how many failures were injected for o. A test whose
// fault must have fired checks it, so that a change in which calls an
// operation makes cannot turn the test into one that injects nothing.
func (f *FaultFS) Injected(o Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[o]
}

// check returns the rule that fails o on path now, if any.
func (f *FaultFS) check(o Op, path string) *FaultRule {
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

func (f *FaultFS) pathErr(o Op, path string) error {
	if r := f.check(o, path); r != nil {
		return &fs.PathError{Op: string(o), Path: path, Err: r.err}
	}
	return nil
}

func (f *FaultFS) Name() string { return "FaultFS(" + f.Fs.Name() + ")" }

func (f *FaultFS) Create(name string) (afero.File, error) {
	if err := f.pathErr(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.Fs.Create(name)
	return f.wrap(file, err)
}

func (f *FaultFS) Mkdir(name string, perm os.FileMode) error {
	if err := f.pathErr(OpMkdir, name); err != nil {
		return err
	}
	return f.Fs.Mkdir(name, perm)
}

func (f *FaultFS) MkdirAll(name string, perm os.FileMode) error {
	// A real MkdirAll that fails part way leaves the folders it made;
	// failing only when one is missing keeps the rule from firing on
	// folders that exist.
	if _, err := f.Fs.Stat(name); err != nil {
		if err := f.pathErr(OpMkdir, name); err != nil {
			return err
		}
	}
	return f.Fs.MkdirAll(name, perm)
}

func (f *FaultFS) Open(name string) (afero.File, error) {
	if err := f.pathErr(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.Fs.Open(name)
	return f.wrap(file, err)
}

func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	o := OpOpen
	if flag&os.O_CREATE != 0 {
		o = OpCreate
	}
	if err := f.pathErr(o, name); err != nil {
		return nil, err
	}
	file, err := f.Fs.OpenFile(name, flag, perm)
	return f.wrap(file, err)
}

func (f *FaultFS) Remove(name string) error {
	if err := f.pathErr(OpRemove, name); err != nil {
		return err
	}
	return f.Fs.Remove(name)
}

func (f *FaultFS) RemoveAll(path string) error {
	if err := f.pathErr(OpRemove, path); err != nil {
		return err
	}
	return f.Fs.RemoveAll(path)
}

func (f *FaultFS) Rename(oldname, newname string) error {
	if r := f.check(OpRename, newname); r != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: r.err}
	}
	return f.Fs.Rename(oldname, newname)
}

func (f *FaultFS) Stat(name string) (os.FileInfo, error) {
	if err := f.pathErr(OpStat, name); err != nil {
		return nil, err
	}
	return f.Fs.Stat(name)
}

func (f *FaultFS) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	if err := f.pathErr(OpStat, name); err != nil {
		return nil, false, err
	}
	if l, ok := f.Fs.(afero.Lstater); ok {
		return l.LstatIfPossible(name)
	}
	fi, err := f.Fs.Stat(name)
	return fi, false, err
}

func (f *FaultFS) Chmod(name string, mode os.FileMode) error {
	if err := f.pathErr(OpChmod, name); err != nil {
		return err
	}
	return f.Fs.Chmod(name, mode)
}

func (f *FaultFS) Chtimes(name string, atime, mtime time.Time) error {
	if err := f.pathErr(OpChtimes, name); err != nil {
		return err
	}
	return f.Fs.Chtimes(name, atime, mtime)
}

func (f *FaultFS) wrap(file afero.File, err error) (afero.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// faultFile is a file of a FaultFS.
type faultFile struct {
	afero.File
	fs *FaultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if r := f.fs.check(OpWrite, f.Name()); r != nil {
		n := 0
		if r.short > 0 {
			n, _ = f.File.Write(p[:min(r.short, len(p))])
		}
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: r.err}
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.pathErr(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fs.pathErr(OpReadFile, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.pathErr(OpReadFile, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.pathErr(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.pathErr(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if ferr := f.fs.pathErr(OpClose, f.Name()); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

func (f *faultFile) Readdir(n int) ([]os.FileInfo, error) {
	if err := f.fs.pathErr(OpReaddir, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Readdir(n)
}

func (f *faultFile) Readdirnames(n int) ([]string, error) {
	if err := f.fs.pathErr(OpReaddir, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Readdirnames(n)
}
