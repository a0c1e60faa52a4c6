package fleetstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/fleetstate/fleetstate/internal/dirstore"
	"github.com/fleetstate/fleetstate/internal/jsonstr"
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
// An outcome that a call of the lead returned is held for HoldReturned
// (15 minutes in a daemon), in case the response was lost. Its record no
// longer changes, so such a turn gives its slot back: at the end of the
// writer's step that handed it (settle, off the send's critical path), its
// final record, with the hold's end (held_until), is appended to the held log,
// held.jsonl beside the slots, and only once that append is done does the
// slot go back to the pool (until then a crash finds the turn in its
// slot). From then on the log speaks for the turn, and every later record
// of it goes there: a slot whose last record is of a turn the log names
// is free, whatever the log says of the turn. When the hold ends or the
// lead acks, a forget line {"forget":TURN_ID} is appended at settle,
// before the call that released the turn returns. The last line of the log
// that names a turn says its state; torn lines are skipped as in slots;
// what one step appends goes in one write. A new Rendezvous restores the
// turns of the log as it restores finished turns of slots; a record with
// held_until is held until then, and at least RejoinTimeout after the
// restart (see Rendezvous.restore), any other until acked.
//
// Once the log is past heldCompactMin bytes and twice the size of its live
// records, settle compacts it: it first writes the free mark of every
// pooled slot that still ends with a logged turn's record (no slot may
// speak for a turn the compacted log no longer names), then writes the
// live records to a temporary file and renames it over the log. So a round
// trip whose outcome is held costs three appends (the message, the reply,
// the log) and a forget line later, where it cost a file creation and an
// append: before the log, a held outcome kept its slot for the whole hold,
// no slot came back to the pool in a daemon's steady state, and every turn
// created a file. Where the lead's calls carry sessions, the adapter acks
// such an outcome at the session's next call, soon after, and the record
// and forget line are two appends the slot alone would not have needed;
// moving only when the pool runs dry would spare them, but would put the
// log's append on the send's path, so the move stays at settle.
//
// The journal is the only writer of the rendezvous state, and it is owned:
// opening one makes the process the owner of the state directory's fleet
// (see owner.go), so that no second process restores the same turns and
// writes over them.
const (
	slotPrefix  = "slot-"
	slotSuffix  = ".jsonl"
	slotMaxSize = 64 << 10

	heldLogName    = "held.jsonl"
	heldCompactMin = 1 << 20 // bytes of held log below which it is never compacted
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
	// covered: the slot is in the pool and ends with the record of a turn
	// that the held log speaks for; its free mark is due only before the
	// log is compacted (see compactHeld).
	covered bool
}

// span is where a record lies in the held log: its JSON object, without
// the line breaks around it.
type span struct{ off, n int64 }

// heldLine is a line of the held log: a turn's record, or a forget line.
type heldLine struct {
	turnRecord
	Forget string `json:"forget,omitempty"`
}

// moving is a handed turn whose record settle moves to the held log, as it
// stood when it was handed (it no longer changes).
type moving struct {
	t   *turn
	rec turnRecord
	n   int64 // the size of its record, once encoded by moveHeld
}

// journal keeps the rendezvous's turns on disk, one slot file per live
// turn. Its fields and methods, and the slot of every turn, are guarded by
// Rendezvous.wmu, the writers' lock: a writer may call it with the
// rendezvous's own lock released.
type journal struct {
	store *Store
	d     *dirstore.Dir // the state directory
	dir   string        // the folder of the slot files
	owner *dirstore.OwnerLock
	free  []slot // slot files holding no turn, for the next ones
	buf   []byte // the record being written
	log   func(msg string, args ...any)

	// The held log (see the header): its size on disk, torn lines
	// included; the bytes of its live records; where each live record is;
	// the size past which settle compacts it, and the least such size.
	heldSize, heldLive int64
	held               map[string]span
	heldAt, heldMin    int64
	forgets            []byte   // forget lines for the next settle, ahead of the records it moves
	moving             []moving // handed turns whose records the next settle moves to the log
	closed             bool     // nothing more is written: closed, or crashed

	// remote, when not nil, keeps the turns instead of slot files (see
	// Journal), and released holds the turns to forget at the next settle.
	remote   Journal
	released []string
}

// openJournal takes ownership of store's fleet and opens its journal. addr,
// which may be empty, says where the owner serves the fleet.
func openJournal(store *Store, addr string, logErr func(string, ...any)) (*journal, error) {
	owner, err := store.local.AcquireOwner(addr)
	if err != nil {
		return nil, withOp("new rendezvous", dirError(store.local, err))
	}
	return &journal{store: store, d: store.local, dir: store.local.Join(dirstore.PrivateDir, dirstore.RendezvousDir, "turns"), owner: owner, log: logErr,
		held: map[string]span{}, heldMin: heldCompactMin, heldAt: heldCompactMin}, nil
}

// close writes what is due, removes the free slots and gives up ownership.
func (j *journal) close() {
	if j.remote != nil {
		j.remoteClose()
		return
	}
	j.settle()
	j.closed = true
	j.removeFreeSlots()
	j.owner.Release()
}

// crash gives up ownership and writes nothing more, as a process killed at
// this instant (for tests of restarts).
func (j *journal) crash() {
	j.closed = true
	if j.owner != nil {
		j.owner.Release()
	}
}

// reset removes every turn's record.
func (j *journal) reset() error {
	if j.remote != nil {
		return j.remoteReset()
	}
	j.free = nil
	j.heldSize, j.heldLive, j.heldAt = 0, 0, j.heldMin
	clear(j.held)
	j.forgets, j.moving = j.forgets[:0], nil
	if err := j.d.Fs().RemoveAll(j.dir); err != nil {
		return j.ioError("reset", err)
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
	if t.logged {
		return j.persistHeld(t, line)
	}
	pooled := false
	if t.slot.path == "" && len(j.free) > 0 {
		t.slot, pooled = j.free[len(j.free)-1], true
		j.free = j.free[:len(j.free)-1]
	}
	wasLive, wasCovered := t.slot.live, t.slot.covered
	t.slot.live, t.slot.covered = false, false
	var err error
	switch {
	case t.slot.path == "":
	case pooled && !j.d.OsFs():
		err = reuseSlot(j.d, t.slot.path, line)
		if err == nil {
			t.slot.size = int64(len(line))
			return nil
		}
	case t.slot.size+int64(len(line)) > slotMaxSize:
		// Rewrite the slot with the current record alone, atomically.
		err := j.writeFile(op, t.slot.path, line, true, false)
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
			t.slot.live, t.slot.covered = wasLive, wasCovered
			j.free = append(j.free, t.slot)
			t.slot = slot{}
		}
		return j.ioError(op, err)
	}
	t.slot = slot{}
	s, err := j.newSlot(line)
	if err != nil {
		return j.ioError(op, err)
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
	f, err := j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_APPEND, dirstore.FilePerm)
	if err != nil {
		return err
	}
	return dirstore.WriteAndClose(f, rec, j.d.SyncWrites(), func(f afero.File) { _ = f.Truncate(size) })
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
func reuseSlot(d *dirstore.Dir, path string, rec []byte) error {
	f, err := d.Fs().OpenFile(path, os.O_WRONLY|os.O_TRUNC, dirstore.FilePerm)
	if err != nil {
		return err
	}
	return dirstore.WriteAndClose(f, rec, d.SyncWrites(), nil)
}

// newSlot creates a slot file holding rec. A file cut short by a crash
// holds no line that parses and is swept later.
func (j *journal) newSlot(rec []byte) (slot, error) {
	path := filepath.Join(j.dir, slotPrefix+uuid.NewString()+slotSuffix)
	create := func() (afero.File, error) {
		return j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, dirstore.FilePerm)
	}
	f, err := create()
	if errors.Is(err, fs.ErrNotExist) {
		if err = j.d.Fs().MkdirAll(j.dir, dirstore.DirPerm); err == nil {
			f, err = create()
		}
	}
	if err != nil {
		return slot{}, err
	}
	if err := dirstore.WriteAndClose(f, rec, j.d.SyncWrites(), nil); err != nil {
		_ = j.d.Fs().Remove(path) // best effort: a leftover is swept later
		return slot{}, err
	}
	return slot{path: path, size: int64(len(rec))}, nil
}

// release frees the slot of a turn whose outcome reached the lead, for
// reuse (its free mark waits for settle), or removes it if it grew large.
// A turn in the held log gets a forget line there at settle instead.
func (j *journal) release(t *turn) {
	if j.remote != nil {
		j.released = append(j.released, t.ID)
		return
	}
	if t.logged {
		if sp, ok := j.held[t.ID]; ok {
			delete(j.held, t.ID)
			j.heldLive -= sp.n + 2
		}
		j.forgets = appendForget(j.forgets, t.ID)
		return
	}
	s := t.slot
	t.slot = slot{}
	j.pool(s, false)
}

// pool puts s back in the pool, ending with the record of a turn the free
// mark of which settle writes (covered false) or that the held log speaks
// for (covered), or removes it if it grew large.
func (j *journal) pool(s slot, covered bool) {
	if s.path == "" {
		return
	}
	if isSlotName(filepath.Base(s.path)) && s.size+int64(len(freeRecord)) <= slotMaxSize {
		s.live, s.covered = !covered, covered
		j.free = append(j.free, s)
		return
	}
	j.remove(s.path)
}

// retire notes that t, done, was handed to its lead and is now held only
// in case the response was lost: the next settle moves its record, which
// says when the hold ends, to the held log and its slot to the pool (in a
// remote journal, saves that record, unless saved says it is already).
// r.mu and r.wmu must be held.
func (j *journal) retire(t *turn, saved bool) {
	if j.closed || t.logged || t.State != TicketDone || j.remote != nil && saved {
		return
	}
	j.moving = append(j.moving, moving{t: t, rec: t.turnRecord})
}

// unretire undoes retire of t, if settle has not yet moved its record.
// r.mu and r.wmu must be held.
func (j *journal) unretire(t *turn) {
	j.moving = slices.DeleteFunc(j.moving, func(m moving) bool { return m.t == t })
}

// settle writes what the writer's step left due: the held log's forget
// lines and the records of the turns handed meanwhile (whose slots then
// go back to the pool), and the free mark of every pooled slot that still
// ends with its old turn's record, so that a crash does not bring that
// turn back. A slot the mark cannot be written to is removed instead.
// Last, it compacts the held log if it grew past its bound.
func (j *journal) settle() {
	if j.remote != nil {
		j.remoteSettle()
		return
	}
	if j.closed {
		return
	}
	j.moveHeld()
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
	if j.heldSize > j.heldAt && len(j.forgets) == 0 {
		j.compactHeld()
	}
}

// moveHeld appends the pending forget lines and the records of the turns
// retired since the last settle to the held log, in one write, and then
// pools the slots of those turns. If the write fails, the turns keep their
// slots and everything waits for the next settle.
func (j *journal) moveHeld() {
	if len(j.forgets) == 0 && len(j.moving) == 0 {
		return
	}
	buf := append(j.buf[:0], j.forgets...)
	n := 0
	for _, m := range j.moving {
		if m.t.logged || m.t.slot.path == "" {
			continue // released meanwhile, or in the log already
		}
		start := len(buf) + 1
		buf = append(appendRecord(append(buf, '\n'), &m.rec), '\n')
		m.n = int64(len(buf) - 1 - start)
		j.moving[n] = m
		n++
	}
	clear(j.moving[n:])
	j.moving = j.moving[:n]
	j.buf = buf[:0]
	if len(buf) == 0 {
		return
	}
	off, err := j.appendHeld(buf)
	if err != nil {
		j.log("fleetstate: write the held log", "err", j.ioError("hold outcomes", err))
		return
	}
	// Where each record landed: its object starts after the forget lines
	// and the records before it, each between line breaks.
	at := off + int64(len(j.forgets))
	for _, m := range j.moving {
		t := m.t
		j.held[t.ID] = span{off: at + 1, n: m.n}
		j.heldLive += m.n + 2
		at += m.n + 2
		t.logged = true
		s := t.slot
		t.slot = slot{}
		j.pool(s, true)
	}
	j.forgets = j.forgets[:0]
	clear(j.moving)
	j.moving = j.moving[:0]
}

// persistHeld writes line, the new record of t, a turn in the held log, to
// the log, after the pending forget lines (whose order it keeps).
func (j *journal) persistHeld(t *turn, line []byte) error {
	data := line
	if len(j.forgets) > 0 {
		data = append(append(make([]byte, 0, len(j.forgets)+len(line)), j.forgets...), line...)
	}
	off, err := j.appendHeld(data)
	if err != nil {
		return j.ioError("persist turn", err)
	}
	j.forgets = j.forgets[:0]
	if sp, ok := j.held[t.ID]; ok {
		j.heldLive -= sp.n + 2
	}
	n := int64(len(line)) - 2
	j.held[t.ID] = span{off: off + int64(len(data)-len(line)) + 1, n: n}
	j.heldLive += n + 2
	return nil
}

// appendForget appends the forget line of turn id to b.
func appendForget(b []byte, id string) []byte {
	b = append(b, "\n{\"forget\":"...)
	b = jsonstr.Append(b, id)
	return append(b, "}\n"...)
}

// appendHeld appends data to the held log, in one write, and returns the
// offset at which it landed. A failed append is taken back, as in
// appendSlot. If the log is not there (its folder was cleaned by another
// process), it is created and the records the journal knew in it are lost.
func (j *journal) appendHeld(data []byte) (int64, error) {
	path := filepath.Join(j.dir, heldLogName)
	f, err := j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_APPEND, dirstore.FilePerm)
	if errors.Is(err, fs.ErrNotExist) {
		if j.heldSize > 0 {
			j.log("fleetstate: the held log went away; its held outcomes are lost", "turns", len(j.held))
		}
		j.heldSize, j.heldLive = 0, 0
		clear(j.held)
		if err = j.d.Fs().MkdirAll(j.dir, dirstore.DirPerm); err == nil {
			f, err = j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, dirstore.FilePerm)
		}
	}
	if err != nil {
		return 0, err
	}
	off := j.heldSize
	if err := dirstore.WriteAndClose(f, data, j.d.SyncWrites(), func(f afero.File) { _ = f.Truncate(off) }); err != nil {
		return 0, err
	}
	j.heldSize += int64(len(data))
	return off, nil
}

// compactHeld rewrites the held log with its live records only. First
// every pooled slot that still ends with a logged turn's record gets its
// free mark (or is removed): the compacted log no longer names the turns
// it forgot, and such a slot would otherwise bring one back.
func (j *journal) compactHeld() {
	const op = "compact the held log"
	ok := true
	kept := j.free[:0]
	for _, s := range j.free {
		if s.covered && ok {
			err := j.appendSlot(s.path, s.size, freeRecord)
			if err == nil {
				s.size += int64(len(freeRecord))
				s.covered = false
			} else if rerr := j.d.Fs().Remove(s.path); rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
				continue
			} else {
				j.log("fleetstate: "+op, "err", j.ioError(op, rerr))
				ok = false // the slot still speaks for a turn: keep the log whole
			}
		}
		kept = append(kept, s)
	}
	j.free = kept
	path := filepath.Join(j.dir, heldLogName)
	var data []byte
	if ok {
		old, err := afero.ReadFile(j.d.Fs(), path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			j.log("fleetstate: "+op, "err", j.ioError(op, err))
			ok = false
		}
		ids := make([]string, 0, len(j.held))
		for id := range j.held {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(a, b int) bool { return j.held[ids[a]].off < j.held[ids[b]].off })
		spans := make(map[string]span, len(ids))
		data = make([]byte, 0, j.heldLive)
		for _, id := range ids {
			sp := j.held[id]
			if !ok || sp.off+sp.n > int64(len(old)) {
				ok = false
				break
			}
			data = append(data, '\n')
			spans[id] = span{off: int64(len(data)), n: sp.n}
			data = append(append(data, old[sp.off:sp.off+sp.n]...), '\n')
		}
		if ok {
			if err := j.writeFile(op, path, data, true, false); err != nil {
				j.log("fleetstate: "+op, "err", err)
				ok = false
			} else {
				j.held, j.heldSize, j.heldLive = spans, int64(len(data)), int64(len(data))
			}
		}
	}
	// Next time at twice the live records, or later if this one failed.
	j.heldAt = max(j.heldMin, 2*j.heldLive)
	if !ok {
		j.heldAt = max(j.heldAt, 2*j.heldSize)
	}
}

func (j *journal) remove(path string) {
	if err := j.d.Fs().Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		j.log("fleetstate: remove a finished turn's slot", "err", j.ioError("forget", err))
	}
}

// removeFreeSlots removes the files of the free slots.
func (j *journal) removeFreeSlots() {
	for _, s := range j.free {
		_ = j.d.Fs().Remove(s.path) // best effort: a leftover is swept later
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

// load reads the turns an earlier rendezvous left on disk, oldest first:
// those of the held log, and those of the slots the log does not speak for.
func (j *journal) load() ([]*turn, error) {
	const op = "restore rendezvous"
	if j.remote != nil {
		return j.remoteLoad()
	}
	entries, err := j.d.ReadDir(j.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, j.ioError(op, err)
	}
	loaded, named, err := j.loadHeld()
	if err != nil {
		return nil, j.ioError(op, err)
	}
	seen := map[string]bool{}
	for _, t := range loaded {
		seen[t.ID] = true
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, dirstore.TempPrefix) && e.Mode().IsRegular() {
			// Left by a rewrite of a slot or a compaction of the held log
			// that a crash cut short: the journal is owned, so it is no
			// one's.
			_ = j.d.Fs().Remove(filepath.Join(j.dir, name)) // best effort
			continue
		}
		isSlot := isSlotName(name)
		if !e.Mode().IsRegular() || !isSlot && !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(j.dir, name)
		data, err := afero.ReadFile(j.d.Fs(), path)
		if err != nil {
			return nil, j.ioError(op, err)
		}
		rec, ok := lastRecord(data)
		if isSlot && (!ok || rec.ID == "" || named[rec.ID]) {
			// A free slot, one whose creation a crash cut short, or one
			// pooled with the record of a turn the held log speaks for
			// (its free mark is written at the first settle). The journal
			// is owned, so nobody else is about to use it: a recent free
			// one is reused, an old or torn one removed.
			if ok && int64(len(data)) <= slotMaxSize && j.d.Now().Sub(e.ModTime()) <= dirstore.StaleTempAge {
				j.free = append(j.free, slot{path: path, size: int64(len(data)), live: rec.ID != ""})
			} else {
				_ = j.d.Fs().Remove(path) // best effort
			}
			continue
		}
		if named[rec.ID] {
			continue // a record from before slots, which the log replaced
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

// loadHeld reads the held log: the turns whose last line there is a
// record, and every turn a line that parses names (whose slot, if it still
// ends with the turn's record, is free). Lines that do not parse, torn by a
// crash, are skipped.
func (j *journal) loadHeld() (loaded []*turn, named map[string]bool, err error) {
	data, err := afero.ReadFile(j.d.Fs(), filepath.Join(j.dir, heldLogName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	named = map[string]bool{}
	recs := map[string]turnRecord{}
	spans := map[string]span{}
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data) - off
		}
		line := data[off : off+end]
		start := off
		off += end + 1
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		var hl heldLine
		if json.Unmarshal(trimmed, &hl) != nil {
			continue // torn
		}
		switch {
		case hl.Forget != "":
			named[hl.Forget] = true
			delete(recs, hl.Forget)
			delete(spans, hl.Forget)
		case hl.ID != "":
			named[hl.ID] = true
			recs[hl.ID] = hl.turnRecord
			lead := bytes.IndexByte(line, '{')
			spans[hl.ID] = span{off: int64(start + lead), n: int64(len(trimmed))}
		}
	}
	j.heldSize, j.heldLive = int64(len(data)), 0
	clear(j.held)
	for id, rec := range recs {
		if rec.Ticket == "" || !rec.valid() || rec.State != TicketDone || rec.Held == nil {
			j.log("fleetstate: skip unreadable turn record", "file", heldLogName)
			continue
		}
		sp := spans[id]
		j.held[id] = sp
		j.heldLive += sp.n + 2
		loaded = append(loaded, &turn{turnRecord: rec, logged: true})
	}
	j.heldAt = max(j.heldMin, 2*j.heldLive)
	return loaded, named, nil
}

// ioError wraps a file-system error of the journal as [CodeInternal], its
// paths relative to the state directory.
func (j *journal) ioError(op string, err error) error {
	return &Error{Code: CodeInternal, Op: op, Err: j.d.IOError(err).Err}
}

// writeFile writes data to the file path atomically (see
// dirstore.Dir.WriteFile).
func (j *journal) writeFile(op, path string, data []byte, overwrite, exchange bool) error {
	if err := j.d.WriteFile(path, data, overwrite, exchange); err != nil {
		return withOp(op, dirError(j.d, err))
	}
	return nil
}
