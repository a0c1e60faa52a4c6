package fleetstate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// The rendezvous tests whose subject is a state directory's: the owner's
// lock on it (package fleetnats's TestOwnOneOwner tests the lease), what a
// clean leaves in it on disk, its session lock file, a slow disk under the
// journal's slot files. The rest of the owner's tests are in package
// fleetstatetest's rendezvous suites, which run on every backend.

// ---- one owner -------------------------------------------------------------

// A second rendezvous on a directory that one owns is refused with a named
// error naming the owner, in memory and on disk; once the owner closes, the
// directory can be owned again.
func TestOneOwnerPerStateDirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   afero.Fs
		dir  func(t *testing.T) string
	}{
		{"memory", afero.NewMemMapFs(), func(*testing.T) string { return "/state" }},
		{"disk", afero.NewOsFs(), func(t *testing.T) string { return filepath.Join(t.TempDir(), "state") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			opts := &fleetstate.Options{NoGitIgnore: true}
			st := open(t, tc.fs, dir, opts)
			r, err := fleetstate.NewRendezvous(st, &fleetstate.RendezvousOptions{Addr: "http://127.0.0.1:7333/mcp"})
			if err != nil {
				t.Fatal(err)
			}
			// Another Store on the same directory, as another process has.
			st2 := open(t, tc.fs, dir, opts)
			_, err = fleetstate.NewRendezvous(st2, nil)
			if !errors.Is(err, fleetstate.ErrFleetOwned) {
				t.Fatalf("second NewRendezvous = %v; want %s", err, fleetstate.CodeFleetOwned)
			}
			var owned *fleetstate.OwnedError
			if !errors.As(err, &owned) || owned.Owner.PID != os.Getpid() || owned.Owner.Addr != "http://127.0.0.1:7333/mcp" || owned.Dir != st2.Dir() {
				t.Fatalf("second NewRendezvous detail %+v; want this process's pid, the owner's address and the directory", owned)
			}
			if o, ok, err := st2.FleetOwner(); err != nil || !ok || o.PID != os.Getpid() {
				t.Fatalf("FleetOwner = %+v, %v, %v; want this process", o, ok, err)
			}
			r.Close()
			if _, ok, err := st2.FleetOwner(); err != nil || ok {
				t.Fatalf("FleetOwner after Close = %v, %v; want none", ok, err)
			}
			r2, err := fleetstate.NewRendezvous(st2, nil)
			if err != nil {
				t.Fatalf("NewRendezvous after the owner closed: %v", err)
			}
			r2.Close()
		})
	}
}

// The state directory may hold what the store did not make (here it is a
// git work tree): a clean removes only sessions, the store's own files and
// the rendezvous state.
func TestCleanRemovesOnlyWhatTheStoreMade(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		".git/HEAD":   "ref: refs/heads/main\n",
		"src/main.go": "package main\n",
		"README.md":   "mine\n",
		"11111111-2222-3333-4444-55555555555.txt": "not a session folder\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := open(t, afero.NewOsFs(), dir, &fleetstate.Options{NoGitIgnore: true})
	r, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first, err := st.NewSession("one")
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, "scout", "a/b.md", "x", false)
	if _, err := st.NewSession("two"); err != nil {
		t.Fatal(err)
	}
	put(t, st, "scout", "c.md", "y", false)
	if err := r.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SendDetached("lead", "scout", "work"); err != nil {
		t.Fatal(err)
	}
	if err := r.Clean(); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{first.ID, "current_run.txt", "previous_run_log.txt", ".fleetstate/rendezvous"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the clean (%v)", gone, err)
		}
	}
	for _, kept := range []string{".git/HEAD", "src/main.go", "README.md", "11111111-2222-3333-4444-55555555555.txt"} {
		if _, err := os.Stat(filepath.Join(dir, kept)); err != nil {
			t.Errorf("%s, which the store did not make, is gone: %v", kept, err)
		}
	}
}

// ---- restarts --------------------------------------------------------------

// ---- cancel ----------------------------------------------------------------

// ---- watchers --------------------------------------------------------------

// ---- paging ----------------------------------------------------------------

// A session lock that another process holds past the lock timeout (a
// process stopped while holding it) makes Open and NewSession fail with a
// named error instead of waiting for ever; once it is let go, they work.
func TestSessionLockWaitIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	opts := &fleetstate.Options{NoGitIgnore: true, LockTimeout: 50 * time.Millisecond}
	st := open(t, afero.NewOsFs(), dir, opts)
	f, err := os.OpenFile(filepath.Join(dir, ".fleetstate", "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := st.NewSession("blocked"); !errors.Is(err, fleetstate.ErrInternal) {
		t.Fatalf("NewSession under a held lock = %v; want %s", err, fleetstate.CodeInternal)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("NewSession waited %v; want about the lock timeout", d)
	}
	if _, err := st.CurrentSession(); !errors.Is(err, fleetstate.ErrNoActiveSession) {
		t.Fatalf("a refused NewSession changed the session: %v", err)
	}
	f.Close() // lets the lock go
	if _, err := st.NewSession("free"); err != nil {
		t.Fatalf("NewSession once the lock is free: %v", err)
	}
}

// While a write of the journal waits on a slow disk, polls and member
// lists are answered: the rendezvous's lock is not held across the write.
func TestSlowDiskDoesNotBlockReaders(t *testing.T) {
	g := &gatedFS{Fs: afero.NewMemMapFs()}
	st := open(t, g, "/state", nil)
	r, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	o, _ := r.SendDetached("lead", "scout", "task")
	if _, ok, err := r.Next(context.Background(), "scout", time.Second); !ok || err != nil {
		t.Fatalf("Next = %v, %v", ok, err)
	}
	gate, waiting := g.shut()
	replied := make(chan error, 1)
	go func() { replied <- r.Reply("scout", "done") }()
	<-waiting // the reply's write is at the slow disk
	read := make(chan struct{})
	go func() {
		defer close(read)
		r.Members()
		if p, err := r.Poll(context.Background(), "lead", o.Ticket, 0); err != nil || p.State != fleetstate.TicketWorking {
			t.Errorf("Poll during the slow write = %+v, %v; want the turn still working", p, err)
		}
		r.PollAll(context.Background(), "lead", 0)
	}()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		close(gate) // let the write go, so that the test ends
		t.Fatal("polls blocked behind a write to a slow disk")
	}
	select {
	case err := <-replied:
		t.Fatalf("Reply returned before its write did: %v", err)
	default:
	}
	close(gate)
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	if p, _ := r.Poll(context.Background(), "lead", o.Ticket, 0); p.Content != "done" {
		t.Fatalf("ticket after the write = %+v", p)
	}
}

// gatedFS holds appends to the rendezvous's slot files while its gate is
// shut, as a slow disk would.
type gatedFS struct {
	afero.Fs
	mu      sync.Mutex
	gate    chan struct{} // nil: open; otherwise writes wait for it to close
	waiting chan struct{} // closed when a write first waits at the gate
}

func (g *gatedFS) shut() (gate, waiting chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.waiting = make(chan struct{}), make(chan struct{})
	return g.gate, g.waiting
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	g.mu.Lock()
	gate, waiting := g.gate, g.waiting
	if gate != nil && flag&os.O_APPEND != 0 && strings.Contains(name, "turns") {
		select {
		case <-waiting:
		default:
			close(waiting)
		}
	} else {
		gate = nil
	}
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.Fs.OpenFile(name, flag, perm)
}
