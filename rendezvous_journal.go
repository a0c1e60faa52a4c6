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
// one line, preceded by a newline; the last line that parses is the turn's
// state. A write cut short by a crash leaves a line that does not parse (a
// JSON object is not complete before its closing brace), so the state read
// back is the one before it, and the leading newline keeps the next record
// apart from the torn one. When the lead has the turn's outcome, a free
// record "{}" is appended and the slot goes back to a pool for the next
// turn, so that in the steady state no file is created, renamed or removed:
// on common file systems those cost a hundred times an append.
//
// A slot that grows past slotMaxSize is rewritten whole (write a temporary
// file, rename it) while its turn lives, and removed when it is freed.
// Close removes the free slots; a new Rendezvous sweeps free or unreadable
// slots left by a crashed one once they are staleTempAge old. Files named
// TURN_ID.json, from before slots, are read the same way.
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
}

// persist writes t's record: appended to its slot, or in a new slot. r.mu
// must be held.
func (r *Rendezvous) persist(t *turn) error {
	const op = "persist turn"
	data, err := json.Marshal(&t.turnRecord)
	if err != nil {
		return &Error{Code: CodeInternal, Op: op, Err: err}
	}
	rec := make([]byte, 0, len(data)+1)
	rec = append(append(rec, '\n'), data...)
	pooled := false
	if t.slot.path == "" && len(r.free) > 0 {
		t.slot, pooled = r.free[len(r.free)-1], true
		r.free = r.free[:len(r.free)-1]
	}
	switch {
	case t.slot.path == "":
	case t.slot.size+int64(len(rec)) > slotMaxSize:
		// Rewrite the slot with the current record alone, atomically.
		err := r.store.writeFile(op, t.slot.path, rec, true)
		if err == nil {
			t.slot.size = int64(len(rec))
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// The folder went away (the sessions were cleaned by another
		// process): start a new slot.
	default:
		err := r.appendSlot(t.slot.path, t.slot.size, rec)
		if err == nil {
			t.slot.size += int64(len(rec))
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			if pooled {
				// The append was taken back: the slot is still free.
				r.free = append(r.free, t.slot)
				t.slot = slot{}
			}
			return r.store.ioError(op, err)
		}
	}
	t.slot = slot{}
	s, err := r.newSlot(rec)
	if err != nil {
		return r.store.ioError(op, err)
	}
	t.slot = s
	return nil
}

// save persists t and logs a failure: the state in memory stays right, and
// the change is lost only if the process dies before the next save.
func (r *Rendezvous) save(t *turn) {
	if err := r.persist(t); err != nil {
		r.log.Error("fleetstate: persist turn", "turn", t.ID, "err", err)
	}
}

// appendSlot appends rec to the existing slot file path, of size bytes, in
// one write. A failed append is taken back (best effort: a torn record
// left behind does not parse and is skipped anyway), so that the slot
// says what the caller, told of the failure, believes.
func (r *Rendezvous) appendSlot(path string, size int64, rec []byte) error {
	f, err := r.store.fs.OpenFile(path, os.O_WRONLY|os.O_APPEND, filePerm)
	if err != nil {
		return err
	}
	_, err = f.Write(rec)
	if err == nil && r.store.syncWrites {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// newSlot creates a slot file holding rec. A file cut short by a crash
// holds no line that parses and is swept later.
func (r *Rendezvous) newSlot(rec []byte) (slot, error) {
	path := filepath.Join(r.turnDir(), slotPrefix+uuid.NewString()+slotSuffix)
	create := func() (afero.File, error) {
		return r.store.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	}
	f, err := create()
	if errors.Is(err, fs.ErrNotExist) {
		if err = r.store.fs.MkdirAll(r.turnDir(), dirPerm); err == nil {
			f, err = create()
		}
	}
	if err != nil {
		return slot{}, err
	}
	_, err = f.Write(rec)
	if err == nil && r.store.syncWrites {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = r.store.fs.Remove(path) // best effort: a leftover is swept later
		return slot{}, err
	}
	return slot{path: path, size: int64(len(rec))}, nil
}

// releaseSlot frees the slot of a turn whose outcome reached the lead, for
// reuse, or removes it if it grew large. r.mu must be held.
func (r *Rendezvous) releaseSlot(t *turn) {
	s := t.slot
	t.slot = slot{}
	if s.path == "" {
		return
	}
	if isSlotName(filepath.Base(s.path)) && s.size+int64(len(freeRecord)) <= slotMaxSize {
		err := r.appendSlot(s.path, s.size, freeRecord)
		if err == nil {
			s.size += int64(len(freeRecord))
			r.free = append(r.free, s)
			return
		}
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
	if err := r.store.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Error("fleetstate: remove finished turn", "turn", t.ID, "err", r.store.ioError("forget", err))
	}
}

// removeFreeSlots removes the files of the free slots. r.mu must be held.
func (r *Rendezvous) removeFreeSlots() {
	for _, s := range r.free {
		_ = r.store.fs.Remove(s.path) // best effort: a leftover is swept later
	}
	r.free = nil
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

// restore loads the turns an earlier rendezvous left on disk.
func (r *Rendezvous) restore() error {
	const op = "restore rendezvous"
	entries, err := r.store.readDir(r.turnDir())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return r.store.ioError(op, err)
	}
	var loaded []*turn
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		isSlot := isSlotName(name)
		if !e.Mode().IsRegular() || !isSlot && !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(r.turnDir(), name)
		data, err := afero.ReadFile(r.store.fs, path)
		if err != nil {
			return r.store.ioError(op, err)
		}
		rec, ok := lastRecord(data)
		if isSlot && (!ok || rec.ID == "") {
			// A free slot, or one whose creation a crash cut short. Another
			// live rendezvous on this directory may be about to reuse it:
			// only an old one is swept.
			if r.store.now().Sub(e.ModTime()) > staleTempAge {
				_ = r.store.fs.Remove(path) // best effort
			}
			continue
		}
		if !ok || rec.Ticket == "" || !isSlot && rec.ID+".json" != name || seen[rec.ID] || !rec.valid() {
			r.log.Error("fleetstate: skip unreadable turn record", "file", name)
			continue
		}
		if rec.State == TicketDone && rec.Held == nil {
			continue
		}
		seen[rec.ID] = true
		loaded = append(loaded, &turn{turnRecord: rec, slot: slot{path: path, size: int64(len(data))}})
	}
	sort.Slice(loaded, func(i, j int) bool { return loaded[i].Seq < loaded[j].Seq })
	for _, t := range loaded {
		r.turns[t.ID] = t
		r.tickets[t.Ticket] = t
		r.seq = max(r.seq, t.Seq)
		m := r.member(t.Member)
		switch t.State {
		case TicketQueued:
			m.queue = append(m.queue, t)
		case TicketWorking, TicketQuestion:
			// The member's call that asked died with the old process;
			// the question stays visible but can no longer be answered.
			if m.open == nil {
				m.open = t
			}
		}
	}
	return nil
}
