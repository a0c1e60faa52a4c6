package fleetstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/afero"
)

// How turns are kept on disk.
//
// Each live turn owns one slot file under .fleetstate/rendezvous/turns/.
// Every state change of the turn appends its whole record to the file as
// one line, preceded (and, since a JSON encoder ends what it writes so,
// followed) by a newline; the last line that parses is the turn's state.
// A write cut short by a crash leaves a line that does not parse (a JSON
// object is not complete before its closing brace), so the state read back
// is the one before it, and the leading newline keeps the next record
// apart from the torn one. A turn that a waiting member takes at once is
// written once, as delivered, rather than queued and then delivered (see
// newTurn). When the lead has the turn's outcome, the slot goes back to a
// pool for the next turn, whose first record then says that the old one is
// over (on file systems other than the operating system's it replaces the
// old records: see reuseSlot); a slot the pool keeps unused gets a free
// record "{}" appended at the end of the writer's step. In the steady
// state no file is created, renamed or removed: on common file systems
// those cost a hundred times an append.
//
// A slot that grows past slotMaxSize is rewritten whole (write a temporary
// file, rename it) while its turn lives, and removed when it is freed.
// Close removes the free slots; a new Rendezvous reuses the recent free
// slots a crashed one left and removes old and torn ones. Files named
// TURN_ID.json, from before slots, are read the same way.
//
// The journal is the only writer of the rendezvous state, and it is owned:
// opening one makes the process the owner of the state directory's fleet
// (see owner.go), so that no second process restores the same turns and
// writes over them.
const (
	slotPrefix  = "slot-"
	slotSuffix  = ".jsonl"
	slotMaxSize = 64 << 10
)

// freeRecord marks a slot that holds no turn.
var freeRecord = []byte("\n{}")

// slot is a file holding a turn's records, and its size.
type slot struct {
	path string
	size int64
	// live: the slot is in the pool but still ends with the record of
	// the turn it held; the free mark is written by settle, unless a new
	// turn's record goes in first (which says the same, one append less).
	live bool
}

// journal keeps the rendezvous's turns on disk, one slot file per live
// turn. Its fields and methods, and the slot of every turn, are guarded by
// Rendezvous.wmu, the writers' lock: a writer may call it with the
// rendezvous's own lock released.
type journal struct {
	store *Store
	dir   string // the folder of the slot files
	owner *ownerLock
	free  []slot // slot files holding no turn, for the next ones
	buf   []byte // the record being written
	log   func(msg string, args ...any)

	// remote, when not nil, keeps the turns instead of slot files (see
	// Journal), and released holds the turns to forget at the next settle.
	remote   Journal
	released []string
}

// openJournal takes ownership of store's fleet and opens its journal. addr,
// which may be empty, says where the owner serves the fleet.
func openJournal(store *Store, addr string, logErr func(string, ...any)) (*journal, error) {
	owner, err := store.acquireOwner("new rendezvous", addr)
	if err != nil {
		return nil, err
	}
	return &journal{store: store, dir: store.path(privateDir, rendezvousDir, "turns"), owner: owner, log: logErr}, nil
}

// close removes the free slots and gives up ownership.
func (j *journal) close() {
	if j.remote != nil {
		j.remoteClose()
		return
	}
	j.removeFreeSlots()
	j.owner.release()
}

// reset removes every turn's record.
func (j *journal) reset() error {
	if j.remote != nil {
		return j.remoteReset()
	}
	j.free = nil
	if err := j.store.fs.RemoveAll(j.dir); err != nil {
		return j.store.ioError("reset", err)
	}
	return nil
}

// persist writes t's record: appended to its slot, or in a new slot.
func (j *journal) persist(t *turn) error { return j.persistRecord(t, &t.turnRecord) }

// persistRecord writes rec as t's record, which it is about to become: the
// caller may have released Rendezvous.mu, so rec is a copy, not t's own.
func (j *journal) persistRecord(t *turn, rec *turnRecord) error {
	const op = "persist turn"
	if j.remote != nil {
		return j.remotePersist(t, rec)
	}
	// The record, between new lines, is encoded into the journal's
	// buffer: no allocation, no reflection per write.
	j.buf = append(appendRecord(append(j.buf[:0], '\n'), rec), '\n')
	line := j.buf
	pooled := false
	if t.slot.path == "" && len(j.free) > 0 {
		t.slot, pooled = j.free[len(j.free)-1], true
		j.free = j.free[:len(j.free)-1]
	}
	wasLive := t.slot.live
	t.slot.live = false
	var err error
	switch {
	case t.slot.path == "":
	case pooled && !j.store.osFs:
		err = reuseSlot(j.store, t.slot.path, line)
		if err == nil {
			t.slot.size = int64(len(line))
			return nil
		}
	case t.slot.size+int64(len(line)) > slotMaxSize:
		// Rewrite the slot with the current record alone, atomically.
		err := j.store.writeFile(op, t.slot.path, line, true)
		if err == nil {
			t.slot.size = int64(len(line))
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// The folder went away (the sessions were cleaned by another
		// process): start a new slot.
	default:
		err = j.appendSlot(t.slot.path, t.slot.size, line)
		if err == nil {
			t.slot.size += int64(len(line))
			return nil
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if pooled {
			// The write was taken back, or cut the slot's old records
			// off: the slot is still free, and settle writes its free
			// mark if it may still be due.
			t.slot.live = wasLive
			j.free = append(j.free, t.slot)
			t.slot = slot{}
		}
		return j.store.ioError(op, err)
	}
	t.slot = slot{}
	s, err := j.newSlot(line)
	if err != nil {
		return j.store.ioError(op, err)
	}
	t.slot = s
	return nil
}

// save persists t and logs a failure: the state in memory stays right, and
// the change is lost only if the process dies before the next save.
func (j *journal) save(t *turn) {
	if err := j.persist(t); err != nil {
		j.log("fleetstate: persist turn", "turn", t.ID, "err", err)
	}
}

// appendSlot appends rec to the existing slot file path, of size bytes, in
// one write. A failed append is taken back (best effort: a torn record
// left behind does not parse and is skipped anyway), so that the slot
// says what the caller, told of the failure, believes.
func (j *journal) appendSlot(path string, size int64, rec []byte) error {
	f, err := j.store.fs.OpenFile(path, os.O_WRONLY|os.O_APPEND, filePerm)
	if err != nil {
		return err
	}
	return writeAndClose(f, rec, j.store.syncWrites, func(f afero.File) { _ = f.Truncate(size) })
}

// reuseSlot makes the pooled slot file path of s hold rec alone: it is opened
// truncated and rec written, in the open, write and close that an append
// costs. A crash leaves the old records as they were, an empty file, a
// torn line or rec: no turn is restored that was not before, but the new
// one once its write is done (the old turn was over when its slot was
// pooled). So a slot holds one turn's records, rather than growing by
// every turn it held until it is rewritten at slotMaxSize.
//
// It is used on file systems other than the operating system's, such as
// MemMapFs, where a growing file is a growing buffer, copied as it grows.
// On disk a slot is appended to instead: ext4 flushes a file truncated to
// zero and written again when it is closed (its auto_da_alloc), and the
// round trip on disk measured 5.5 times slower that way.
func reuseSlot(s *Store, path string, rec []byte) error {
	f, err := s.fs.OpenFile(path, os.O_WRONLY|os.O_TRUNC, filePerm)
	if err != nil {
		return err
	}
	return writeAndClose(f, rec, s.syncWrites, nil)
}

// newSlot creates a slot file holding rec. A file cut short by a crash
// holds no line that parses and is swept later.
func (j *journal) newSlot(rec []byte) (slot, error) {
	path := filepath.Join(j.dir, slotPrefix+uuid.NewString()+slotSuffix)
	create := func() (afero.File, error) {
		return j.store.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	}
	f, err := create()
	if errors.Is(err, fs.ErrNotExist) {
		if err = j.store.fs.MkdirAll(j.dir, dirPerm); err == nil {
			f, err = create()
		}
	}
	if err != nil {
		return slot{}, err
	}
	if err := writeAndClose(f, rec, j.store.syncWrites, nil); err != nil {
		_ = j.store.fs.Remove(path) // best effort: a leftover is swept later
		return slot{}, err
	}
	return slot{path: path, size: int64(len(rec))}, nil
}

// release frees the slot of a turn whose outcome reached the lead, for
// reuse (its free mark waits for settle), or removes it if it grew large.
func (j *journal) release(t *turn) {
	if j.remote != nil {
		j.released = append(j.released, t.ID)
		return
	}
	s := t.slot
	t.slot = slot{}
	if s.path == "" {
		return
	}
	if isSlotName(filepath.Base(s.path)) && s.size+int64(len(freeRecord)) <= slotMaxSize {
		s.live = true
		j.free = append(j.free, s)
		return
	}
	j.remove(s.path)
}

// settle writes the free mark of every pooled slot that still ends with
// its old turn's record, so that a crash does not bring that turn back. A
// slot the mark cannot be written to is removed instead.
func (j *journal) settle() {
	if j.remote != nil {
		j.remoteSettle()
		return
	}
	kept := j.free[:0]
	for _, s := range j.free {
		if s.live {
			err := j.appendSlot(s.path, s.size, freeRecord)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					j.remove(s.path)
				}
				continue
			}
			s.size += int64(len(freeRecord))
			s.live = false
		}
		kept = append(kept, s)
	}
	j.free = kept
}

func (j *journal) remove(path string) {
	if err := j.store.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		j.log("fleetstate: remove a finished turn's slot", "err", j.store.ioError("forget", err))
	}
}

// removeFreeSlots removes the files of the free slots.
func (j *journal) removeFreeSlots() {
	for _, s := range j.free {
		_ = j.store.fs.Remove(s.path) // best effort: a leftover is swept later
	}
	j.free = nil
}

// isSlotName reports whether name is that of a slot file rather than of a
// record from before slots, which holds one turn only and is never reused.
func isSlotName(name string) bool {
	return strings.HasPrefix(name, slotPrefix) && strings.HasSuffix(name, slotSuffix)
}

// lastRecord returns the last line of data that parses as a turn record.
// ok is false if none does.
func lastRecord(data []byte) (rec turnRecord, ok bool) {
	for len(data) > 0 {
		i := bytes.LastIndexByte(data, '\n')
		line := data[i+1:]
		data = data[:max(i, 0)]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var tr turnRecord
		if json.Unmarshal(line, &tr) == nil {
			return tr, true
		}
	}
	return turnRecord{}, false
}

// valid reports whether a record read back could have been written by a
// rendezvous: a known state, and a lead and member with valid names. A
// record that is not would restore as a ticket that can never end.
func (rec *turnRecord) valid() bool {
	switch rec.State {
	case TicketQueued, TicketWorking, TicketQuestion, TicketDone:
	default:
		return false
	}
	return validateAgentName(rec.Lead) == nil && validateAgentName(rec.Member) == nil
}

// load reads the turns an earlier rendezvous left on disk, oldest first.
func (j *journal) load() ([]*turn, error) {
	const op = "restore rendezvous"
	if j.remote != nil {
		return j.remoteLoad()
	}
	entries, err := j.store.readDir(j.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, j.store.ioError(op, err)
	}
	var loaded []*turn
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		isSlot := isSlotName(name)
		if !e.Mode().IsRegular() || !isSlot && !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(j.dir, name)
		data, err := afero.ReadFile(j.store.fs, path)
		if err != nil {
			return nil, j.store.ioError(op, err)
		}
		rec, ok := lastRecord(data)
		if isSlot && (!ok || rec.ID == "") {
			// A free slot, or one whose creation a crash cut short. The
			// journal is owned, so nobody else is about to use it: a
			// recent free one is reused, an old or torn one removed.
			if ok && int64(len(data)) <= slotMaxSize && j.store.now().Sub(e.ModTime()) <= staleTempAge {
				j.free = append(j.free, slot{path: path, size: int64(len(data))})
			} else {
				_ = j.store.fs.Remove(path) // best effort
			}
			continue
		}
		if !ok || rec.Ticket == "" || !isSlot && rec.ID+".json" != name || seen[rec.ID] || !rec.valid() {
			j.log("fleetstate: skip unreadable turn record", "file", name)
			continue
		}
		if rec.State == TicketDone && rec.Held == nil {
			continue
		}
		seen[rec.ID] = true
		loaded = append(loaded, &turn{turnRecord: rec, slot: slot{path: path, size: int64(len(data))}})
	}
	sort.Slice(loaded, func(i, k int) bool { return loaded[i].Seq < loaded[k].Seq })
	return loaded, nil
}
