package dirstore

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/internal/fsx"
	"github.com/spf13/afero"
)

// How a state directory gets one owner.
//
// The process whose rendezvous runs on a state directory owns the fleet
// kept there: it alone reads and writes the rendezvous state. On the
// operating system's file system ownership is an exclusive flock(2) on
// .fleetstate/owner, held for the life of the rendezvous; the kernel
// releases it when the process dies, however it dies, so a crash never
// leaves a directory owned. The owner writes who it is (pid, address) into
// the same file, for the error that a second process gets. The file is
// never removed: removing a lock file races with a process about to lock it.
//
// On other file systems (afero's in-memory one) the directory lives in one
// process only, and ownership is an entry in memOwners, keyed by the file
// system and the directory. That table is the package's one piece of
// package-level state, for a reason: ownership must hold across every
// store of the process that shares the file system, and a marker file on
// that file system could outlive its owner when a removal fails.
const ownerFile = "owner"

// memOwners holds the owners of state directories on file systems other
// than the operating system's: ownerKey to Owner.
var memOwners sync.Map

type ownerKey struct {
	fs  afero.Fs
	dir string
}

// How long a new owner tries before it takes the directory for owned.
const (
	ownerRetries    = 20
	ownerRetryPause = 10 * time.Millisecond
)

// Owner describes the process that owns a state directory's fleet.
type Owner struct {
	PID   int       `json:"pid"`
	Addr  string    `json:"addr,omitempty"`
	Since time.Time `json:"since"`
}

// OwnerLock is a held ownership of a state directory.
type OwnerLock struct {
	d    *Dir
	file *os.File // the locked descriptor on the operating system's file system
	key  ownerKey // on other file systems: the entry in memOwners
}

// AcquireOwner makes this process the owner of the directory's fleet, or
// fails with KindOwned. addr says where this process serves the fleet; it
// may be empty. While the lock is held, Clean through this Dir needs no
// second one.
func (d *Dir) AcquireOwner(addr string) (*OwnerLock, error) {
	// FleetOwner and Clean of other processes hold the lock for an
	// instant to look: a short retry keeps such a look from refusing a
	// process that starts at that moment. (In memory there are no other
	// processes.)
	var l *OwnerLock
	for try := 0; ; try++ {
		var ok bool
		var err error
		if l, ok, err = d.tryOwner(); err != nil {
			return nil, err
		}
		if ok {
			break
		}
		if try == ownerRetries || !d.osFs {
			return nil, &Error{Kind: KindOwned}
		}
		time.Sleep(ownerRetryPause)
	}
	if err := l.describe(Owner{PID: os.Getpid(), Addr: addr, Since: time.Now().UTC()}); err != nil {
		l.Release()
		return nil, d.IOError(err)
	}
	d.ownerMu.Lock()
	d.held = l
	d.ownerMu.Unlock()
	return l, nil
}

// tryOwner takes ownership if nobody holds it, without describing the
// owner: Clean holds it this way while it removes the rendezvous state.
func (d *Dir) tryOwner() (l *OwnerLock, ok bool, err error) {
	l = &OwnerLock{d: d}
	if !d.osFs {
		l.key = ownerKey{d.fs, d.dir}
		if _, taken := memOwners.LoadOrStore(l.key, Owner{}); taken {
			return nil, false, nil
		}
		return l, true, nil
	}
	f, oerr := os.OpenFile(d.Join(PrivateDir, ownerFile), os.O_RDWR|os.O_CREATE, FilePerm)
	if oerr != nil {
		return nil, false, d.IOError(oerr)
	}
	if ok, lerr := fsx.TryLock(f); lerr != nil || !ok {
		f.Close()
		if lerr != nil {
			return nil, false, d.IOError(lerr)
		}
		return nil, false, nil
	}
	l.file = f
	return l, true, nil
}

// lookOwner is tryOwner for a look (FleetOwner, Clean): while another
// holds the lock without having described itself, it is a look like this
// one, held for an instant, and a short retry gets past it; a described
// holder is the owner.
func (d *Dir) lookOwner() (l *OwnerLock, ok bool, err error) {
	for try := 0; ; try++ {
		if l, ok, err = d.tryOwner(); err != nil || ok {
			return l, ok, err
		}
		if try == ownerRetries || d.ReadOwner().PID != 0 {
			return nil, false, nil
		}
		time.Sleep(ownerRetryPause)
	}
}

// describe records who the owner is: in the lock file, or in memOwners.
func (l *OwnerLock) describe(o Owner) error {
	if l.file == nil {
		memOwners.Store(l.key, o)
		return nil
	}
	info, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if err := l.file.Truncate(0); err != nil {
		return err
	}
	_, err = l.file.WriteAt(info, 0)
	return err
}

// Release gives ownership up.
func (l *OwnerLock) Release() {
	l.d.ownerMu.Lock()
	if l.d.held == l {
		l.d.held = nil
	}
	l.d.ownerMu.Unlock()
	if l.file != nil {
		_ = l.file.Truncate(0) // best effort: a stale description is harmless
		l.file.Close()         // closing the descriptor releases the lock
		return
	}
	memOwners.Delete(l.key)
}

// ReadOwner reads the description of the fleet's owner; zero if it gave
// none.
func (d *Dir) ReadOwner() Owner {
	var o Owner
	if !d.osFs {
		v, _ := memOwners.Load(ownerKey{d.fs, d.dir})
		o, _ = v.(Owner)
		return o
	}
	if data, err := afero.ReadFile(d.fs, d.Join(PrivateDir, ownerFile)); err == nil {
		_ = json.Unmarshal(data, &o)
	}
	return o
}

// FleetOwner returns the owner of the fleet, if a live process owns it.
// An owner describes itself the instant it takes the lock, so a holder
// still without a description once lookOwner gave up is a look held
// longer: another process's Clean, removing the sessions. No rendezvous
// owns the fleet then; a Clean of this process waits for that one on the
// session lock.
func (d *Dir) FleetOwner() (Owner, bool, error) {
	l, ok, err := d.lookOwner()
	if err != nil {
		return Owner{}, false, err
	}
	if ok {
		l.Release()
		return Owner{}, false, nil
	}
	o := d.ReadOwner()
	return o, o.PID != 0, nil
}
