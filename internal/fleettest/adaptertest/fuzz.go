package adaptertest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// FuzzDir is the state directory of the fuzz targets' stores.
const FuzzDir = "/fuzz-state"

// FuzzBounds keep every blocking tool short, so that a fuzz input can wait
// only milliseconds.
var FuzzBounds = fleetstate.RendezvousOptions{
	SendTimeout:  2 * time.Millisecond,
	AskTimeout:   2 * time.Millisecond,
	ReadyTimeout: 2 * time.Millisecond,
	MaxWait:      2 * time.Millisecond,
	PollInterval: time.Millisecond,
}

// Fuzzed is the adapter the fuzz targets call: a store in memory at
// FuzzDir with a session named fuzz, on a file system that records any
// change outside it, and a rendezvous of FuzzBounds with the members scout
// and miner, both ready. Roles are configured.
type Fuzzed struct {
	FS         *ConfinedFS
	Store      *fleetstate.Store
	Rendezvous *fleetstate.Rendezvous
	Adapter    *mcpadapter.Adapter
}

// NewFuzzed returns a new Fuzzed; the test's cleanup closes its
// rendezvous.
func NewFuzzed(tb testing.TB) *Fuzzed {
	tb.Helper()
	fsys := &ConfinedFS{Fs: afero.NewMemMapFs(), Root: FuzzDir}
	st, err := fleetstate.Open(fsys, FuzzDir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.NewSession("fuzz"); err != nil {
		tb.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, &FuzzBounds)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rv.Close() })
	for _, m := range []string{"scout", "miner"} {
		if err := rv.AddMember(m, nil); err != nil {
			tb.Fatal(err)
		}
		if err := rv.SetReady(m, true); err != nil {
			tb.Fatal(err)
		}
	}
	a := mcpadapter.New(st, rv, &mcpadapter.Options{RolesConfigured: func() bool { return true }})
	return &Fuzzed{FS: fsys, Store: st, Rendezvous: rv, Adapter: a}
}

// CheckConfined fails tb if anything was written outside the state
// directory.
func (f *Fuzzed) CheckConfined(tb testing.TB) {
	tb.Helper()
	if p := f.FS.escaped.Load(); p != nil {
		tb.Fatalf("%s was written outside the state directory", *p)
	}
}

// ConfinedFS records the first call that would change the file system
// outside Root.
type ConfinedFS struct {
	afero.Fs
	Root    string
	escaped atomic.Pointer[string]
}

func (c *ConfinedFS) check(paths ...string) {
	for _, p := range paths {
		p = filepath.Clean(p)
		if p != c.Root && !strings.HasPrefix(p, c.Root+"/") {
			c.escaped.CompareAndSwap(nil, &p)
		}
	}
}

// Create records a name outside Root, and creates the file.
func (c *ConfinedFS) Create(name string) (afero.File, error) { c.check(name); return c.Fs.Create(name) }

// Mkdir records a name outside Root, and makes the directory.
func (c *ConfinedFS) Mkdir(name string, perm fs.FileMode) error {
	c.check(name)
	return c.Fs.Mkdir(name, perm)
}

// MkdirAll records a name outside Root, and makes the directories.
func (c *ConfinedFS) MkdirAll(name string, perm fs.FileMode) error {
	c.check(name)
	return c.Fs.MkdirAll(name, perm)
}

// OpenFile records a name outside Root opened to be changed, and opens the
// file.
func (c *ConfinedFS) OpenFile(name string, flag int, perm fs.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		c.check(name)
	}
	return c.Fs.OpenFile(name, flag, perm)
}

// Remove records a name outside Root, and removes the file.
func (c *ConfinedFS) Remove(name string) error { c.check(name); return c.Fs.Remove(name) }

// RemoveAll records a name outside Root, and removes the tree.
func (c *ConfinedFS) RemoveAll(name string) error { c.check(name); return c.Fs.RemoveAll(name) }

// Rename records a name outside Root, and renames the file.
func (c *ConfinedFS) Rename(o, n string) error { c.check(o, n); return c.Fs.Rename(o, n) }

// Chmod records a name outside Root, and changes the file's mode.
func (c *ConfinedFS) Chmod(name string, m fs.FileMode) error {
	c.check(name)
	return c.Fs.Chmod(name, m)
}

// Chtimes records a name outside Root, and changes the file's times.
func (c *ConfinedFS) Chtimes(name string, a, m time.Time) error {
	c.check(name)
	return c.Fs.Chtimes(name, a, m)
}

// LstatIfPossible is the file system's own.
func (c *ConfinedFS) LstatIfPossible(name string) (fs.FileInfo, bool, error) {
	return c.Fs.(afero.Lstater).LstatIfPossible(name)
}
