package fleetstate

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/internal/fsx"
	"github.com/spf13/afero"
)

// How a state directory gets one owner.
//
// The process whose Rendezvous runs on a state directory owns the fleet
// kept there: it alone reads and writes the rendezvous state. On the
// operating system's file system ownership is an exclusive flock(2) on
// .fleetstate/owner, held for the life of the Rendezvous; the kernel
// releases it when the process dies, however it dies, so a crash never
// leaves a directory owned. The owner writes who it is (pid, address) into
// the same file, for the error that a second process gets. The file is
// never removed: removing a lock file races with a process about to lock it.
//
// On other file systems (afero's in-memory one) the directory lives in one
// process only, and ownership is an entry in memOwners, keyed by the file
// system and the directory. That table is the package's one piece of
// package-level state, for a reason: ownership must hold across every
// Store of the process that shares the file system, and a marker file on
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
	Addr  string    `json:"addr,omitempty"` // where it serves the fleet, if it said
	Since time.Time `json:"since"`
}

func (o Owner) String() string {
	s := fmt.Sprintf("pid %d", o.PID)
	if o.Addr != "" {
		s += ", " + o.Addr
	}
	return s
}

// OwnedError is the detail of an [ErrFleetOwned] error: the state directory
// and, where it could be read, its owner. Its message names the owner, not
// the directory, since errors may cross the wire to agents; a command that
// reports it names the directory itself.
type OwnedError struct {
	Dir   string
	Owner Owner // zero when the owner did not say who it is
}

func (e *OwnedError) Error() string {
	if e.Owner.PID == 0 {
		return "owner unknown"
	}
	return "owner: " + e.Owner.String()
}

// ownerLock is a held ownership of a state directory.
type ownerLock struct {
	file *os.File // the locked descriptor on the operating system's file system
	key  ownerKey // on other file systems: the entry in memOwners
}

// acquireOwner makes this process the owner of s's fleet, or fails with
// [ErrFleetOwned] naming the owner. addr says where this process serves
// the fleet; it may be empty.
func (s *Store) acquireOwner(op, addr string) (*ownerLock, error) {
	// FleetOwner and Clean of other processes hold the lock for an
	// instant to look: a short retry keeps such a look from refusing a
	// process that starts at that moment. (In memory there are no other
	// processes.)
	var l *ownerLock
	for try := 0; ; try++ {
		var ok bool
		var err error
		if l, ok, err = s.tryOwner(op); err != nil {
			return nil, err
		}
		if ok {
			break
		}
		if try == ownerRetries || !s.osFs {
			return nil, s.ownedError(op)
		}
		time.Sleep(ownerRetryPause)
	}
	if err := l.describe(Owner{PID: os.Getpid(), Addr: addr, Since: time.Now().UTC()}); err != nil {
		l.release()
		return nil, s.ioError(op, err)
	}
	return l, nil
}

// tryOwner takes ownership if nobody holds it, without describing the
// owner: Clean holds it this way while it removes the rendezvous state.
func (s *Store) tryOwner(op string) (l *ownerLock, ok bool, err error) {
	l = &ownerLock{}
	if !s.osFs {
		l.key = ownerKey{s.fs, s.dir}
		if _, taken := memOwners.LoadOrStore(l.key, Owner{}); taken {
			return nil, false, nil
		}
		return l, true, nil
	}
	f, err := os.OpenFile(s.path(privateDir, ownerFile), os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, false, s.ioError(op, err)
	}
	if ok, err := fsx.TryLock(f); err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, false, s.ioError(op, err)
		}
		return nil, false, nil
	}
	l.file = f
	return l, true, nil
}

// describe records who the owner is: in the lock file, or in memOwners.
func (l *ownerLock) describe(o Owner) error {
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

// release gives ownership up.
func (l *ownerLock) release() {
	if l.file != nil {
		_ = l.file.Truncate(0) // best effort: a stale description is harmless
		l.file.Close()         // closing the descriptor releases the lock
		return
	}
	memOwners.Delete(l.key)
}

// readOwner reads the description of s's owner; zero if it gave none.
func (s *Store) readOwner() Owner {
	var o Owner
	if !s.osFs {
		v, _ := memOwners.Load(ownerKey{s.fs, s.dir})
		o, _ = v.(Owner)
		return o
	}
	if data, err := afero.ReadFile(s.fs, s.path(privateDir, ownerFile)); err == nil {
		_ = json.Unmarshal(data, &o)
	}
	return o
}

// ownedError names the owner of s's fleet as well as it can be read.
func (s *Store) ownedError(op string) error {
	return &Error{Code: CodeFleetOwned, Op: op, Err: &OwnedError{Dir: s.dir, Owner: s.readOwner()}}
}

// FleetOwner returns the owner of s's fleet, if a live process owns it.
// A process that owns it without describing itself has a zero PID.
func (s *Store) FleetOwner() (Owner, bool, error) {
	if s.backend != nil {
		return s.backendOwner("fleet owner")
	}
	l, ok, err := s.tryOwner("fleet owner")
	if err != nil {
		return Owner{}, false, err
	}
	if ok {
		l.release()
		return Owner{}, false, nil
	}
	return s.readOwner(), true, nil
}
