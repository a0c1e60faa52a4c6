package dirstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
// written once, as delivered, rather than queued and then delivered (the rendezvous
// decides). When the lead has the turn's outcome, the slot goes back to a
// pool for the next turn, whose first record then says that the old one is
// over (on file systems other than the operating system's it replaces the
// old records: see reuseSlot); a slot the pool keeps unused gets a free
// record "{}" appended at the next Flush. In the steady
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
// longer changes, so such a turn gives its slot back: the rendezvous says
// so with Hold, and at the next Flush (the end of the writer's step, off
// the send's critical path) its final record, with the hold's end
// (held_until), is appended to the held log,
// held.jsonl beside the slots, and only once that append is done does the
// slot go back to the pool (until then a crash finds the turn in its
// slot). From then on the log speaks for the turn, and every later record
// of it goes there: a slot whose last record is of a turn the log names
// is free, whatever the log says of the turn. When the hold ends or the
// lead acks, a forget line {"forget":TURN_ID} is appended at Flush,
// before the call that released the turn returns. The last line of the log
// that names a turn says its state; torn lines are skipped as in slots;
// what one step appends goes in one write. A new Rendezvous restores the
// turns of the log as it restores finished turns of slots; a record with
// held_until is held until then, and at least RejoinTimeout after the
// restart (see the rendezvous's restore), any other until acked.
//
// Once the log is past heldCompactMin bytes and twice the size of its live
// records, Flush compacts it: it first writes the free mark of every
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
// log's append on the send's path, so the move stays at Flush.
//
// The journal is the only writer of the rendezvous state, and it is owned:
// opening one makes the process the owner of the state directory's fleet
// (see AcquireOwner), so that no second process restores the same turns and
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
	// the turn it held; the free mark is written by Flush, unless a new
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

// entry is what the journal knows of a live turn: its slot, or that the
// held log speaks for it.
type entry struct {
	slot   slot
	logged bool
}

// moving is a held turn whose record Flush moves to the held log.
type moving struct {
	id  string
	rec []byte // the record, a copy
}

// Journal keeps a rendezvous's turns in the state directory, one slot
// file per live turn and a log of held ones. It implements
// fleetstate.Journal. Its methods are called by one goroutine at a time
// (the rendezvous's writer).
type Journal struct {
	d       *Dir
	dir     string // the folder of the slot files
	owner   *OwnerLock
	turns   map[string]*entry
	free    []slot // slot files holding no turn, for the next ones
	buf     []byte // the line being written
	log     func(msg string, args ...any)
	closed  bool // nothing more is written: closed, or abandoned
	moving  []moving
	forgets []byte // forget lines for the next Flush, ahead of the records it moves

	// The held log (see the header): its size on disk, torn lines
	// included; the bytes of its live records; where each live record is;
	// the size past which Flush compacts it, and the least such size.
	heldSize, heldLive int64
	held               map[string]span
	heldAt, heldMin    int64
}

// OpenJournal takes ownership of d's fleet and opens its journal. addr,
// which may be empty, says where the owner serves the fleet; logErr is
// told of failures that no caller hears of.
func OpenJournal(d *Dir, addr string, logErr func(string, ...any)) (*Journal, error) {
	owner, err := d.AcquireOwner(addr)
	if err != nil {
		return nil, err
	}
	return &Journal{d: d, dir: d.Join(PrivateDir, RendezvousDir, "turns"), owner: owner, log: logErr,
		turns: map[string]*entry{}, held: map[string]span{}, heldMin: heldCompactMin, heldAt: heldCompactMin}, nil
}

// SetCompactMin sets the size of held log below which it is never
// compacted, for tests.
func (j *Journal) SetCompactMin(n int64) {
	j.heldMin, j.heldAt = n, max(n, 2*j.heldLive)
}

// Close writes what is due, removes the free slots and gives up
// ownership.
func (j *Journal) Close() error {
	if j.closed {
		return nil
	}
	j.flush()
	j.closed = true
	j.removeFreeSlots()
	j.owner.Release()
	return nil
}

// Abandon gives up ownership and writes nothing more, as a process killed
// at this instant does (for tests of restarts).
func (j *Journal) Abandon() {
	if j.closed {
		return
	}
	j.closed = true
	j.owner.Release()
}

// Reset removes every turn's record.
func (j *Journal) Reset(context.Context) error {
	j.free = nil
	clear(j.turns)
	j.heldSize, j.heldLive, j.heldAt = 0, 0, j.heldMin
	clear(j.held)
	j.forgets, j.moving = j.forgets[:0], nil
	if err := j.d.Fs().RemoveAll(j.dir); err != nil {
		return j.d.IOError(err)
	}
	return nil
}

// Save writes rec as the record of turn id: appended to its slot, or in a
// new slot, or to the held log if that speaks for the turn.
func (j *Journal) Save(_ context.Context, id string, rec []byte) error {
	// The record, between new lines, is framed in the journal's buffer.
	j.buf = append(append(append(j.buf[:0], '\n'), rec...), '\n')
	line := j.buf
	e := j.turns[id]
	if e == nil {
		e = &entry{}
		j.turns[id] = e
	}
	if e.logged {
		return j.saveHeld(id, line)
	}
	pooled := false
	if e.slot.path == "" && len(j.free) > 0 {
		e.slot, pooled = j.free[len(j.free)-1], true
		j.free = j.free[:len(j.free)-1]
	}
	wasLive, wasCovered := e.slot.live, e.slot.covered
	e.slot.live, e.slot.covered = false, false
	var err error
	switch {
	case e.slot.path == "":
	case pooled && !j.d.OsFs():
		err = reuseSlot(j.d, e.slot.path, line)
		if err == nil {
			e.slot.size = int64(len(line))
			return nil
		}
	case e.slot.size+int64(len(line)) > slotMaxSize:
		// Rewrite the slot with the current record alone, atomically.
		werr := j.d.WriteFile(e.slot.path, line, true, false)
		if werr == nil {
			e.slot.size = int64(len(line))
			return nil
		}
		if !errors.Is(werr, fs.ErrNotExist) {
			return werr
		}
		// The folder went away (the sessions were cleaned by another
		// process): start a new slot.
	default:
		err = j.appendSlot(e.slot.path, e.slot.size, line)
		if err == nil {
			e.slot.size += int64(len(line))
			return nil
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if pooled {
			// The write was taken back, or cut the slot's old records
			// off: the slot is still free, and Flush writes its free
			// mark if it may still be due.
			e.slot.live, e.slot.covered = wasLive, wasCovered
			j.free = append(j.free, e.slot)
			e.slot = slot{}
		}
		return j.d.IOError(err)
	}
	e.slot = slot{}
	s, err := j.newSlot(line)
	if err != nil {
		return j.d.IOError(err)
	}
	e.slot = s
	return nil
}

// appendSlot appends rec to the existing slot file path, of size bytes, in
// one write. A failed append is taken back (best effort: a torn record
// left behind does not parse and is skipped anyway), so that the slot
// says what the caller, told of the failure, believes.
func (j *Journal) appendSlot(path string, size int64, rec []byte) error {
	f, err := j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_APPEND, FilePerm)
	if err != nil {
		return err
	}
	return WriteAndClose(f, rec, j.d.SyncWrites(), func(f afero.File) { _ = f.Truncate(size) })
}

// reuseSlot makes the pooled slot file path hold rec alone: it is opened
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
// zero and written again when it is closed (its auto_da_alloc), which
// makes a round trip several times slower.
func reuseSlot(d *Dir, path string, rec []byte) error {
	f, err := d.Fs().OpenFile(path, os.O_WRONLY|os.O_TRUNC, FilePerm)
	if err != nil {
		return err
	}
	return WriteAndClose(f, rec, d.SyncWrites(), nil)
}

// newSlot creates a slot file holding rec. A file cut short by a crash
// holds no line that parses and is swept later.
func (j *Journal) newSlot(rec []byte) (slot, error) {
	path := filepath.Join(j.dir, slotPrefix+uuid.NewString()+slotSuffix)
	create := func() (afero.File, error) {
		return j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FilePerm)
	}
	f, err := create()
	if errors.Is(err, fs.ErrNotExist) {
		if err = j.d.Fs().MkdirAll(j.dir, DirPerm); err == nil {
			f, err = create()
		}
	}
	if err != nil {
		return slot{}, err
	}
	if err := WriteAndClose(f, rec, j.d.SyncWrites(), nil); err != nil {
		_ = j.d.Fs().Remove(path) // best effort: a leftover is swept later
		return slot{}, err
	}
	return slot{path: path, size: int64(len(rec))}, nil
}

// Release forgets turn id: its slot goes back to the pool (its free mark
// waits for Flush), or is removed if it grew large; a turn in the held log
// gets a forget line there at Flush instead.
func (j *Journal) Release(_ context.Context, id string) error {
	e := j.turns[id]
	delete(j.turns, id)
	j.moving = slices.DeleteFunc(j.moving, func(m moving) bool { return m.id == id })
	if e == nil {
		return nil
	}
	if e.logged {
		if sp, ok := j.held[id]; ok {
			delete(j.held, id)
			j.heldLive -= sp.n + 2
		}
		j.forgets = appendForget(j.forgets, id)
		return nil
	}
	j.pool(e.slot, false)
	return nil
}

// pool puts s back in the pool, ending with the record of a turn the free
// mark of which Flush writes (covered false) or that the held log speaks
// for (covered), or removes it if it grew large.
func (j *Journal) pool(s slot, covered bool) {
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

// Hold notes that turn id, done, was handed to its lead and is now held
// only in case the response was lost: the next Flush moves rec, its record
// with the hold's end, to the held log and its slot to the pool. A turn
// the log speaks for already keeps its record there. saved changes
// nothing here: the move is the point, not the record.
func (j *Journal) Hold(_ context.Context, id string, rec []byte, saved bool) error {
	if j.closed {
		return nil
	}
	e := j.turns[id]
	if e == nil || e.logged || e.slot.path == "" {
		return nil
	}
	j.moving = append(j.moving, moving{id: id, rec: slices.Clone(rec)})
	return nil
}

// Flush writes what the writer's step left due: the held log's forget
// lines and the records of the turns held meanwhile (whose slots then go
// back to the pool), and the free mark of every pooled slot that still
// ends with its old turn's record, so that a crash does not bring that
// turn back. A slot the mark cannot be written to is removed instead.
// Last, it compacts the held log if it grew past its bound. Its failures
// are logged: what was not written waits for the next Flush.
func (j *Journal) Flush(context.Context) error {
	j.flush()
	return nil
}

func (j *Journal) flush() {
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
// held since the last Flush to the held log, in one write, and then pools
// the slots of those turns. If the write fails, the turns keep their slots
// and everything waits for the next Flush.
func (j *Journal) moveHeld() {
	if len(j.forgets) == 0 && len(j.moving) == 0 {
		return
	}
	buf := append(j.buf[:0], j.forgets...)
	ns := make([]int64, 0, len(j.moving))
	n := 0
	for _, m := range j.moving {
		if e := j.turns[m.id]; e == nil || e.logged || e.slot.path == "" {
			continue // released meanwhile, or in the log already
		}
		start := len(buf) + 1
		buf = append(append(append(buf, '\n'), m.rec...), '\n')
		ns = append(ns, int64(len(buf)-1-start))
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
		j.log("fleetstate: write the held log", "err", j.d.IOError(err))
		return
	}
	// Where each record landed: its object starts after the forget lines
	// and the records before it, each between line breaks.
	at := off + int64(len(j.forgets))
	for i, m := range j.moving {
		e := j.turns[m.id]
		j.held[m.id] = span{off: at + 1, n: ns[i]}
		j.heldLive += ns[i] + 2
		at += ns[i] + 2
		e.logged = true
		s := e.slot
		e.slot = slot{}
		j.pool(s, true)
	}
	j.forgets = j.forgets[:0]
	clear(j.moving)
	j.moving = j.moving[:0]
}

// saveHeld writes line, the new record of turn id, which the held log
// speaks for, to the log, after the pending forget lines (whose order it
// keeps).
func (j *Journal) saveHeld(id string, line []byte) error {
	data := line
	if len(j.forgets) > 0 {
		data = append(append(make([]byte, 0, len(j.forgets)+len(line)), j.forgets...), line...)
	}
	off, err := j.appendHeld(data)
	if err != nil {
		return j.d.IOError(err)
	}
	j.forgets = j.forgets[:0]
	if sp, ok := j.held[id]; ok {
		j.heldLive -= sp.n + 2
	}
	n := int64(len(line)) - 2
	j.held[id] = span{off: off + int64(len(data)-len(line)) + 1, n: n}
	j.heldLive += n + 2
	return nil
}

// appendForget appends the forget line of turn id to b.
func appendForget(b []byte, id string) []byte {
	line, _ := json.Marshal(struct {
		Forget string `json:"forget"`
	}{id}) // a struct of one string always encodes
	b = append(b, '\n')
	b = append(b, line...)
	return append(b, '\n')
}

// appendHeld appends data to the held log, in one write, and returns the
// offset at which it landed. A failed append is taken back, as in
// appendSlot. If the log is not there (its folder was cleaned by another
// process), it is created and the records the journal knew in it are lost.
func (j *Journal) appendHeld(data []byte) (int64, error) {
	path := filepath.Join(j.dir, heldLogName)
	f, err := j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_APPEND, FilePerm)
	if errors.Is(err, fs.ErrNotExist) {
		if j.heldSize > 0 {
			j.log("fleetstate: the held log went away; its held outcomes are lost", "turns", len(j.held))
		}
		j.heldSize, j.heldLive = 0, 0
		clear(j.held)
		if err = j.d.Fs().MkdirAll(j.dir, DirPerm); err == nil {
			f, err = j.d.Fs().OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, FilePerm)
		}
	}
	if err != nil {
		return 0, err
	}
	off := j.heldSize
	if err := WriteAndClose(f, data, j.d.SyncWrites(), func(f afero.File) { _ = f.Truncate(off) }); err != nil {
		return 0, err
	}
	j.heldSize += int64(len(data))
	return off, nil
}

// compactHeld rewrites the held log with its live records only. First
// every pooled slot that still ends with a logged turn's record gets its
// free mark (or is removed): the compacted log no longer names the turns
// it forgot, and such a slot would otherwise bring one back.
func (j *Journal) compactHeld() {
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
				j.log("fleetstate: "+op, "err", j.d.IOError(rerr))
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
			j.log("fleetstate: "+op, "err", j.d.IOError(err))
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
			if err := j.d.WriteFile(path, data, true, false); err != nil {
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

func (j *Journal) remove(path string) {
	if err := j.d.Fs().Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		j.log("fleetstate: remove a finished turn's slot", "err", j.d.IOError(err))
	}
}

// removeFreeSlots removes the files of the free slots.
func (j *Journal) removeFreeSlots() {
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

// idOf returns the turn ID of the last line of data that parses as a
// record, and whether one does; a free mark parses with an empty ID.
func lastRecord(data []byte) (rec []byte, id string, ok bool) {
	for len(data) > 0 {
		i := bytes.LastIndexByte(data, '\n')
		line := data[i+1:]
		data = data[:max(i, 0)]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(line, &head) == nil {
			return line, head.ID, true
		}
	}
	return nil, "", false
}

// heldLine is the part of a line of the held log the journal reads: a
// turn's ID, or the ID of a turn it forgets.
type heldLine struct {
	ID     string `json:"id"`
	Forget string `json:"forget"`
}

// Load returns the records an earlier rendezvous left on disk: those of
// the held log, and the last record of each slot the log does not speak
// for. It takes up the free slots for reuse and removes stale ones. Which
// records make turns is the rendezvous's to judge. A rendezvous loads when
// it starts; a later Load flushes first, and reads the same.
func (j *Journal) Load(context.Context) ([][]byte, error) {
	// What the journal knows is read back from the files: what it put off
	// is written first, and what it knew is forgotten.
	j.flush()
	clear(j.turns)
	j.free = nil
	entries, err := j.d.ReadDir(j.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, j.d.IOError(err)
	}
	recs, named, err := j.loadHeld()
	if err != nil {
		return nil, j.d.IOError(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, TempPrefix) && e.Mode().IsRegular() {
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
			return nil, j.d.IOError(err)
		}
		rec, id, ok := lastRecord(data)
		if isSlot && (!ok || id == "" || named[id]) {
			// A free slot, one whose creation a crash cut short, or one
			// pooled with the record of a turn the held log speaks for
			// (its free mark is written at the first Flush). The journal
			// is owned, so nobody else is about to use it: a recent free
			// one is reused, an old or torn one removed.
			if ok && int64(len(data)) <= slotMaxSize && j.d.Now().Sub(e.ModTime()) <= StaleTempAge {
				j.free = append(j.free, slot{path: path, size: int64(len(data)), live: id != ""})
			} else {
				_ = j.d.Fs().Remove(path) // best effort
			}
			continue
		}
		if named[id] {
			continue // a record from before slots, which the log replaced
		}
		if !ok || id == "" || !isSlot && id+".json" != name || j.turns[id] != nil {
			j.log("fleetstate: skip unreadable turn record", "file", name)
			continue
		}
		j.turns[id] = &entry{slot: slot{path: path, size: int64(len(data))}}
		recs = append(recs, slices.Clone(rec))
	}
	return recs, nil
}

// loadHeld reads the held log: the records of the turns whose last line
// there is a record, and every turn a line that parses names (whose slot,
// if it still ends with the turn's record, is free). Lines that do not
// parse, torn by a crash, are skipped.
func (j *Journal) loadHeld() (recs [][]byte, named map[string]bool, err error) {
	data, err := afero.ReadFile(j.d.Fs(), filepath.Join(j.dir, heldLogName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	named = map[string]bool{}
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
			delete(spans, hl.Forget)
		case hl.ID != "":
			named[hl.ID] = true
			lead := bytes.IndexByte(line, '{')
			spans[hl.ID] = span{off: int64(start + lead), n: int64(len(trimmed))}
		}
	}
	j.heldSize, j.heldLive = int64(len(data)), 0
	clear(j.held)
	for id, sp := range spans {
		j.held[id] = sp
		j.heldLive += sp.n + 2
		j.turns[id] = &entry{logged: true}
		recs = append(recs, slices.Clone(data[sp.off:sp.off+sp.n]))
	}
	j.heldAt = max(j.heldMin, 2*j.heldLive)
	return recs, named, nil
}
