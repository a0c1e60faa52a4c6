// Package fleetmem keeps a fleet in memory: a [fleetstate.Backend] for the
// store and a [fleetstate.Journal] for the rendezvous, with the same
// contract as the disk and JetStream backends and nothing else behind it,
// and a [Member] port for agents that run in the same process.
//
// A [Fleet] is the unit: its [Backend] keeps a store's sessions and files,
// it holds the rendezvous's turn records, and its [Journal] is the one
// owner's handle on them. A Backend of its own, a zero one, is a store
// with no owner to mind.
//
// It is the reference implementation of the seams, as hashicorp/raft's
// InmemStore is of its LogStore: small enough to read in one sitting, run
// against the same conformance suites as the real backends (package
// fleetstatetest), and useful on its own for tests and for programs whose
// fleet lives and dies with one process.
package fleetmem

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
)

// Backend is a store's sessions and files in memory. The zero value is an
// empty fleet, ready to use; a Backend is safe for concurrent use.
type Backend struct {
	mu      sync.Mutex
	current *fleetstate.Session
	runLog  []string
	// sessions maps a session's ID to its agents, each agent's folder
	// tree flattened: a slash-separated path to a file's content, or to
	// nil for a folder.
	sessions map[string]map[string]map[string]*file
	now      func() time.Time
	fleet    *Fleet // whose owner refuses Clean; nil for none
}

type file struct {
	data    []byte // nil for a folder
	modTime time.Time
}

var _ fleetstate.OwnedBackend = (*Backend)(nil)

// FleetOwner implements [fleetstate.OwnedBackend]: the owner of the
// [Fleet] whose Backend b is, if a journal holds it.
func (b *Backend) FleetOwner(context.Context) (fleetstate.Owner, bool, error) {
	if b.fleet == nil {
		return fleetstate.Owner{}, false, nil
	}
	b.fleet.mu.Lock()
	defer b.fleet.mu.Unlock()
	if !b.fleet.owned {
		return fleetstate.Owner{}, false, nil
	}
	return b.fleet.owner, true, nil
}

// CurrentSession implements [fleetstate.Backend].
func (b *Backend) CurrentSession(context.Context) (fleetstate.Session, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current == nil {
		return fleetstate.Session{}, false, nil
	}
	return *b.current, true, nil
}

// StartSession implements [fleetstate.Backend].
func (b *Backend) StartSession(_ context.Context, next fleetstate.Session) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current != nil {
		b.runLog = append(b.runLog, b.current.String())
	}
	b.current = &next
	return nil
}

// RunLog returns the archived sessions, one "ID:::NAME" line each, as
// previous_run_log.txt holds them on disk.
func (b *Backend) RunLog(context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	for _, l := range b.runLog {
		s.WriteString(l)
		s.WriteByte('\n')
	}
	return s.String(), nil
}

// Snapshot describes everything b keeps, one entry per session marker,
// folder and file, the run log and the current session, so that a test
// can tell whether a call changed anything (fleetstatetest.Snapshotter).
func (b *Backend) Snapshot(context.Context) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{"runlog": strings.Join(b.runLog, "\n")}
	if b.current != nil {
		out["current"] = b.current.String()
	}
	for sess, agents := range b.sessions {
		out[sess] = "session"
		for agent, tree := range agents {
			out[sess+"/"+agent] = "agent"
			for name, f := range tree {
				if f.data == nil {
					out[sess+"/"+agent+"/"+name] = "folder"
				} else {
					out[sess+"/"+agent+"/"+name] = fmt.Sprintf("%q %v", f.data, f.modTime.UnixNano())
				}
			}
		}
	}
	return out, nil
}

// Put implements [fleetstate.Backend].
func (b *Backend) Put(_ context.Context, id fleetstate.FileID, content []byte, overwrite bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	tree := b.sessions[id.Session()][id.Agent()]
	name := id.Name()
	if f, ok := tree[name]; ok {
		if f.data == nil {
			return conflict(name, "is a folder")
		}
		if !overwrite {
			return &fleetstate.Error{Code: fleetstate.CodeFileExists, Err: errors.New(quote(id.String()))}
		}
	}
	segs := strings.Split(name, "/")
	for i := 1; i < len(segs); i++ {
		if f, ok := tree[strings.Join(segs[:i], "/")]; ok && f.data != nil {
			return conflict(strings.Join(segs[:i], "/"), "is a file, not a folder")
		}
	}
	if b.sessions == nil {
		b.sessions = map[string]map[string]map[string]*file{}
	}
	agents := b.sessions[id.Session()]
	if agents == nil {
		agents = map[string]map[string]*file{}
		b.sessions[id.Session()] = agents
	}
	if tree == nil {
		tree = map[string]*file{}
		agents[id.Agent()] = tree
	}
	now := b.clock()
	for i := 1; i < len(segs); i++ {
		tree[strings.Join(segs[:i], "/")] = &file{modTime: now}
	}
	data := make([]byte, len(content), max(len(content), 1)) // never nil: nil marks a folder
	copy(data, content)
	tree[name] = &file{data: data, modTime: now}
	return nil
}

// Get implements [fleetstate.Backend].
func (b *Backend) Get(_ context.Context, id fleetstate.FileID) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	agents, ok := b.sessions[id.Session()]
	if !ok {
		return nil, &fleetstate.Error{Code: fleetstate.CodeSessionNotValid, Err: errors.New(quote(id.Session()))}
	}
	tree, ok := agents[id.Agent()]
	if !ok {
		return nil, &fleetstate.Error{Code: fleetstate.CodeAgentNotValid, Err: fmt.Errorf("%s in session %s", quote(id.Agent()), id.Session())}
	}
	f, ok := tree[id.Name()]
	if !ok || f.data == nil {
		return nil, &fleetstate.Error{Code: fleetstate.CodeFileNotFound, Err: errors.New(quote(id.String()))}
	}
	return slices.Clone(f.data), nil
}

// List implements [fleetstate.Backend].
func (b *Backend) List(_ context.Context, session, agent string) ([]fleetstate.FileInfo, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	agents, ok := b.sessions[session]
	if !ok {
		return nil, false, nil
	}
	var files []fleetstate.FileInfo
	for a, tree := range agents {
		if agent != "" && a != agent {
			continue
		}
		for name, f := range tree {
			if f.data == nil {
				continue
			}
			id, err := fleetstate.NewFileID(session, a, name)
			if err != nil {
				return nil, true, err
			}
			files = append(files, fleetstate.FileInfo{ID: id, Size: int64(len(f.data)), ModTime: f.modTime})
		}
	}
	return files, true, nil
}

// Clean implements [fleetstate.Backend].
func (b *Backend) Clean(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.current, b.runLog, b.sessions = nil, nil, nil
	return nil
}

func (b *Backend) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// Fleet holds a rendezvous's turn records in memory, owned by one
// [Journal] at a time. The zero value is a fleet nobody owns, ready to
// use; a Fleet is safe for concurrent use.
type Fleet struct {
	mu      sync.Mutex
	epoch   int  // of the current ownership
	owned   bool // a journal holds the current epoch
	owner   fleetstate.Owner
	turns   map[string][]byte
	backend *Backend
}

// Backend returns the fleet's store backend, whose Clean is refused while
// a journal owns the fleet.
func (f *Fleet) Backend() *Backend {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.backend == nil {
		f.backend = &Backend{fleet: f}
	}
	return f.backend
}

// Own takes the fleet's ownership and returns the journal that holds it,
// or fails with [fleetstate.ErrFleetOwned] while another holds it.
func (f *Fleet) Own() (*Journal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owned {
		return nil, &fleetstate.Error{Code: fleetstate.CodeFleetOwned, Op: "own the fleet", Err: &fleetstate.OwnedError{Owner: f.owner}}
	}
	f.epoch++
	f.owned = true
	f.owner = fleetstate.Owner{PID: os.Getpid(), Since: time.Now().UTC()}
	return &Journal{f: f, epoch: f.epoch}, nil
}

// Expire ends j's ownership without telling j, as a lease that ran out
// does: another Own may succeed, and every later write of j fails with
// [fleetstate.CodeUnavailable].
func (f *Fleet) Expire(j *Journal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j.epoch == f.epoch {
		f.epoch++
		f.owned = false
	}
}

// Journal is an owner's [fleetstate.Journal] on a [Fleet]. Nothing is put
// off: Hold saves, Release forgets, at once.
type Journal struct {
	f      *Fleet
	epoch  int
	closed bool // guarded by f.mu
}

var _ fleetstate.Journal = (*Journal)(nil)

// write runs fn under the fleet's lock if j still owns it.
func (j *Journal) write(fn func()) error {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	if j.closed || j.epoch != j.f.epoch {
		return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "journal", Err: errors.New("not the fleet's owner")}
	}
	fn()
	return nil
}

// Load implements [fleetstate.Journal].
func (j *Journal) Load(context.Context) ([][]byte, error) {
	var out [][]byte
	err := j.write(func() {
		for _, id := range slices.Sorted(maps.Keys(j.f.turns)) {
			out = append(out, slices.Clone(j.f.turns[id]))
		}
	})
	return out, err
}

// Save implements [fleetstate.Journal].
func (j *Journal) Save(_ context.Context, id string, rec []byte) error {
	return j.write(func() {
		if j.f.turns == nil {
			j.f.turns = map[string][]byte{}
		}
		j.f.turns[id] = slices.Clone(rec)
	})
}

// Hold implements [fleetstate.Journal].
func (j *Journal) Hold(ctx context.Context, id string, rec []byte, saved bool) error {
	if saved {
		return j.write(func() {})
	}
	return j.Save(ctx, id, rec)
}

// Release implements [fleetstate.Journal].
func (j *Journal) Release(_ context.Context, id string) error {
	return j.write(func() { delete(j.f.turns, id) })
}

// Flush implements [fleetstate.Journal]: nothing is ever put off.
func (j *Journal) Flush(context.Context) error { return j.write(func() {}) }

// Reset implements [fleetstate.Journal].
func (j *Journal) Reset(context.Context) error {
	return j.write(func() { clear(j.f.turns) })
}

// Close implements [fleetstate.Journal]: it gives the fleet up, so that
// the next Own takes the records over. It is idempotent.
func (j *Journal) Close() error {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	if !j.closed && j.epoch == j.f.epoch {
		j.f.owned = false
	}
	j.closed = true
	return nil
}

func conflict(name, what string) error {
	return &fleetstate.Error{Code: fleetstate.CodePathConflict, Err: errors.New(quote(name) + " " + what)}
}

// quote quotes s for an error message, clipped to a bounded size.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
