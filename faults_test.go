package fleetstate_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/spf13/afero"
)

// Errors a disk gives.
var (
	errNoSpace  = syscall.ENOSPC
	errReadOnly = syscall.EROFS
	errIO       = syscall.EIO
)

// The disk refuses writes: every operation of the store that writes is
// run against a file system that fails one kind of call (create, write, a
// write cut short, sync, close, rename, mkdir), and must
//
//   - fail with a clear error: ERR_INTERNAL naming the cause and no host
//     path;
//   - leave no partial state: the files, their contents, the session files
//     and the archive are as they were, and no temporary file is left;
//   - work again, with the right result, once the disk is healthy.

// faultHostDir is where the faulty stores live; no message may name it.
const faultHostDir = "/srv/host-secret/state"

// fault is one way the disk refuses: a rule on a fleettest.FaultFS.
type fault struct {
	name  string
	op    fleettest.Op // the call it breaks
	sync  bool         // the store syncs writes (the sync faults need it)
	apply func(f *fleettest.FaultFS, path string)
	cause string // what the error message must mention
}

var diskFaults = []fault{
	{name: "create ENOSPC", op: fleettest.OpCreate, apply: func(f *fleettest.FaultFS, p string) { f.Fail(fleettest.OpCreate, p, errNoSpace) }, cause: "no space left"},
	{name: "create EROFS", op: fleettest.OpCreate, apply: func(f *fleettest.FaultFS, p string) { f.Fail(fleettest.OpCreate, p, errReadOnly) }, cause: "read-only"},
	{name: "write ENOSPC", op: fleettest.OpWrite, apply: func(f *fleettest.FaultFS, p string) { f.Fail(fleettest.OpWrite, p, errNoSpace) }, cause: "no space left"},
	{name: "short write ENOSPC", op: fleettest.OpWrite, apply: func(f *fleettest.FaultFS, p string) { f.FailShort(p, 5, errNoSpace) }, cause: "no space left"},
	{name: "sync EIO", op: fleettest.OpSync, sync: true, apply: func(f *fleettest.FaultFS, p string) { f.Fail(fleettest.OpSync, p, errIO) }, cause: "input/output error"},
	{name: "close EIO", op: fleettest.OpClose, apply: func(f *fleettest.FaultFS, p string) { f.Fail(fleettest.OpClose, p, errIO) }, cause: "input/output error"},
	{name: "rename EIO", op: fleettest.OpRename, apply: func(f *fleettest.FaultFS, p string) { f.Fail(fleettest.OpRename, p, errIO) }, cause: "input/output error"},
	{name: "mkdir ENOSPC", op: fleettest.OpMkdir, apply: func(f *fleettest.FaultFS, p string) { f.Fail(fleettest.OpMkdir, p, errNoSpace) }, cause: "no space left"},
}

// faultStore opens a store on a fleettest.FaultFS over a memory file system, with a
// session and a few files, as the faults find it.
func faultStore(t *testing.T, sync bool) (*fleettest.FaultFS, *fleetstate.Store, fleetstate.Session) {
	t.Helper()
	ffs := fleettest.NewFaultFS(afero.NewMemMapFs())
	st := open(t, ffs, faultHostDir, &fleetstate.Options{SyncWrites: sync})
	newSession(t, st, "first")
	sess := newSession(t, st, "second") // an archive line exists
	put(t, st, "scout", "notes.md", "old notes", false)
	put(t, st, "scout", "nested/plan.md", "old plan", false)
	return ffs, st, sess
}

// stateTree is what "no partial state" compares: every file and folder of
// the state directory with the content of the files, but not the
// modification times of folders, which creating and removing a temporary
// file changes.
func stateTree(t *testing.T, st *fleetstate.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p, n := range snapshot(t, st.Fs(), st.Dir()) {
		switch {
		case n.mode.IsDir():
			out[p] = "dir"
		default:
			out[p] = fmt.Sprintf("%v %q", n.mode, n.data)
		}
	}
	return out
}

func treeChanges(before, after map[string]string) string {
	var d []string
	for p, b := range before {
		if a, ok := after[p]; !ok {
			d = append(d, "removed "+p)
		} else if a != b {
			d = append(d, fmt.Sprintf("changed %s: %s -> %s", p, clip(b), clip(a)))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			d = append(d, "added "+p)
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}

// wantDiskError checks the error of a refused write: ERR_INTERNAL, the
// cause named, no host path.
func wantDiskError(t *testing.T, st *fleetstate.Store, err error, cause string) {
	t.Helper()
	wantErr(t, st, err, fleetstate.CodeInternal)
	if !strings.Contains(err.Error(), cause) {
		t.Errorf("error %q does not name the cause %q", err, cause)
	}
	if strings.Contains(err.Error(), "host-secret") {
		t.Errorf("error %q names the host path", err)
	}
}

// storeWrites are the operations of the store that write, each with a
// check of its result once the disk is healthy again.
var storeWrites = []struct {
	name    string
	where   string         // the path fragment the fault is put on
	makesNo []fleettest.Op // calls it never makes there: a fault on them must not fire
	run     func(st *fleetstate.Store) error
	check   func(t *testing.T, st *fleetstate.Store, sess fleetstate.Session)
}{
	{
		name: "put new file", where: "/scout/", makesNo: []fleettest.Op{fleettest.OpMkdir}, // the folders exist
		run: func(st *fleetstate.Store) error {
			_, err := st.Put("scout", "fresh.md", []byte("fresh content"), false)
			return err
		},
		check: func(t *testing.T, st *fleetstate.Store, sess fleetstate.Session) {
			if got := get(t, st, fileID(t, sess.ID, "scout", "fresh.md")); got != "fresh content" {
				t.Errorf("fresh.md = %q", got)
			}
		},
	},
	{
		name: "put in new folders", where: "/state/",
		run: func(st *fleetstate.Store) error {
			_, err := st.Put("miner", "deep/er/file.md", []byte("deep content"), false)
			return err
		},
		check: func(t *testing.T, st *fleetstate.Store, sess fleetstate.Session) {
			if got := get(t, st, fileID(t, sess.ID, "miner", "deep/er/file.md")); got != "deep content" {
				t.Errorf("deep/er/file.md = %q", got)
			}
		},
	},
	{
		name: "put overwrite", where: "/scout/", makesNo: []fleettest.Op{fleettest.OpMkdir},
		run: func(st *fleetstate.Store) error {
			_, err := st.Put("scout", "notes.md", []byte("new notes, longer than the old"), true)
			return err
		},
		check: func(t *testing.T, st *fleetstate.Store, sess fleetstate.Session) {
			if got := get(t, st, fileID(t, sess.ID, "scout", "notes.md")); got != "new notes, longer than the old" {
				t.Errorf("notes.md = %q", got)
			}
		},
	},
	{
		name: "new session", where: "/state/", makesNo: []fleettest.Op{fleettest.OpMkdir}, // session folders come with the first put
		run: func(st *fleetstate.Store) error {
			_, err := st.NewSession("third")
			return err
		},
		check: func(t *testing.T, st *fleetstate.Store, sess fleetstate.Session) {
			cur, err := st.CurrentSession()
			if err != nil || cur.Name != "third" {
				t.Fatalf("current session %v, %v; want third", cur, err)
			}
			log := readFile(t, st, "previous_run_log.txt")
			lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
			if len(lines) != 2 || lines[1] != sess.String() {
				t.Errorf("archive %q; want the first session and then %q, once each", log, sess.String())
			}
		},
	},
}

func TestDiskRefusesWrites(t *testing.T) {
	for _, w := range storeWrites {
		for _, f := range diskFaults {
			t.Run(w.name+"/"+f.name, func(t *testing.T) {
				ffs, st, sess := faultStore(t, f.sync)
				before := stateTree(t, st)
				f.apply(ffs, w.where)
				err := w.run(st)
				if slices.Contains(w.makesNo, f.op) {
					// The operation makes no such call (a put into
					// existing folders makes no mkdir): nothing fires
					// and it succeeds.
					if n := ffs.Injected(f.op); n != 0 {
						t.Fatalf("%s made %d %s calls; the table says it makes none", w.name, n, f.op)
					}
					if err != nil {
						t.Fatalf("%s failed with no fault injected: %v", w.name, err)
					}
					w.check(t, st, sess)
					return
				}
				if ffs.Injected(f.op) == 0 {
					t.Fatalf("no %s fault was injected: %s made no %s call on %q (if it never does, list it in makesNo); err = %v", f.name, w.name, f.op, w.where, err)
				}
				if err == nil {
					t.Fatalf("%s succeeded on a disk that refused a %s", w.name, f.name)
				}
				wantDiskError(t, st, err, f.cause)
				if d := treeChanges(before, stateTree(t, st)); d != "" {
					t.Fatalf("%s failed but changed the state directory: %s", w.name, d)
				}
				// Reads keep working while the disk refuses writes.
				if got := get(t, st, fileID(t, sess.ID, "scout", "notes.md")); got != "old notes" {
					t.Errorf("notes.md during the fault = %q; want the old content", got)
				}
				if cur, err := st.CurrentSession(); err != nil || cur != sess {
					t.Errorf("current session during the fault %v, %v; want %v", cur, err, sess)
				}
				ffs.Clear()
				if err := w.run(st); err != nil {
					t.Fatalf("%s once the disk is healthy: %v", w.name, err)
				}
				w.check(t, st, sess)
				assertNoTempFiles(t, st)
			})
		}
	}
}

// TestDiskRefusesClean: a clean that the disk stops part way reports it,
// leaves no current session (never a current session without its files),
// and completes when run again.
func TestDiskRefusesClean(t *testing.T) {
	for _, tc := range []struct {
		name  string
		apply func(f *fleettest.FaultFS)
	}{
		{"remove of a session fails", func(f *fleettest.FaultFS) { f.Fail(fleettest.OpRemove, "-", errIO) }},
		{"remove of current_run.txt fails", func(f *fleettest.FaultFS) { f.Fail(fleettest.OpRemove, "current_run", errReadOnly) }},
		{"listing the directory fails", func(f *fleettest.FaultFS) { f.Fail(fleettest.OpReaddir, "/state", errIO) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ffs, st, sess := faultStore(t, false)
			tc.apply(ffs)
			err := st.Clean()
			if err == nil {
				t.Fatal("Clean succeeded on a disk that refused it")
			}
			wantErr(t, st, err, fleetstate.CodeInternal)
			if cur, err := st.CurrentSession(); err == nil {
				// The clean did not start: all must be as it was.
				if cur != sess {
					t.Fatalf("current session %v; want %v", cur, sess)
				}
				if got := get(t, st, fileID(t, sess.ID, "scout", "notes.md")); got != "old notes" {
					t.Fatalf("notes.md = %q", got)
				}
			} else {
				wantErr(t, st, err, fleetstate.CodeNoActiveSession)
			}
			ffs.Clear()
			if err := st.Clean(); err != nil {
				t.Fatalf("Clean once the disk is healthy: %v", err)
			}
			tree := stateTree(t, st)
			for p := range tree {
				if p != "." && !strings.HasPrefix(p, ".fleetstate") {
					t.Errorf("%s left after the clean", p)
				}
			}
			newSession(t, st, "after")
			put(t, st, "scout", "notes.md", "new", false)
		})
	}
}

// TestDiskRefusesReads: a disk that fails reads gives ERR_INTERNAL with the
// cause, never a wrong code such as ERR_FILE_NOT_FOUND, and nothing is
// written.
func TestDiskRefusesReads(t *testing.T) {
	ffs, st, sess := faultStore(t, false)
	id := fileID(t, sess.ID, "scout", "notes.md")
	before := stateTree(t, st)
	for _, tc := range []struct {
		name  string
		apply func()
		run   func() error
	}{
		{"get: read", func() { ffs.Fail(fleettest.OpReadFile, "notes.md", errIO) }, func() error { _, err := st.Get(id); return err }},
		{"get: open", func() { ffs.Fail(fleettest.OpOpen, "notes.md", errIO) }, func() error { _, err := st.Get(id); return err }},
		{"get: stat", func() { ffs.Fail(fleettest.OpStat, "/scout", errIO) }, func() error { _, err := st.Get(id); return err }},
		{"list: readdir", func() { ffs.Fail(fleettest.OpReaddir, "/scout", errIO) }, func() error { _, err := st.List("", ""); return err }},
		{"current session: read", func() { ffs.Fail(fleettest.OpReadFile, "current_run", errIO) }, func() error { _, err := st.CurrentSession(); return err }},
		{"put: reading the session", func() { ffs.Fail(fleettest.OpOpen, "current_run", errIO) }, func() error {
			_, err := st.Put("scout", "x.md", []byte("x"), false)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.apply()
			defer ffs.Clear()
			wantDiskError(t, st, tc.run(), "input/output error")
		})
	}
	if d := treeChanges(before, stateTree(t, st)); d != "" {
		t.Fatalf("failed reads changed the state directory: %s", d)
	}
	if got := get(t, st, id); got != "old notes" {
		t.Fatalf("notes.md = %q", got)
	}
}

// ---- a real full file system -----------------------------------------------

// fillDisk writes filler files into dir, outside the state directory, until
// the file system is full, and returns them.
func fillDisk(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	chunk := bytes.Repeat([]byte("f"), 4096)
	for i := 0; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf("filler-%04d", i))
		files = append(files, p)
		err := os.WriteFile(p, chunk, 0o600)
		if errors.Is(err, syscall.ENOSPC) {
			// The last filler may hold part of a chunk; drop any byte
			// the kernel still has by writing one more, small file.
			if err := os.WriteFile(filepath.Join(dir, "filler-last"), []byte("x"), 0o600); err == nil {
				files = append(files, filepath.Join(dir, "filler-last"))
			}
			return files
		}
		if err != nil {
			t.Fatalf("filling the disk: %v", err)
		}
		if i > 10000 {
			t.Fatal("the disk never filled up")
		}
	}
}

// TestFullDiskOS fills a real file system (a 1 MiB tmpfs) and checks what
// the store and the rendezvous do: clear errors, no partial state, no
// temporary file, stored files intact; and everything works again once
// space returns.
func TestFullDiskOS(t *testing.T) {
	mnt := fleettest.MountTmpfs(t, 1<<20)
	st := open(t, afero.NewOsFs(), filepath.Join(mnt, "state"), &fleetstate.Options{NoGitIgnore: true})
	newSession(t, st, "first")
	sess := newSession(t, st, "second")
	id := put(t, st, "scout", "notes.md", "kept notes", false)
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	held, err := rv.SendDetached("lead", "scout", "work before the disk filled")
	if err != nil {
		t.Fatal(err)
	}

	fillers := fillDisk(t, mnt)
	before := stateTree(t, st)
	big := bytes.Repeat([]byte("b"), 64<<10)

	_, err = st.Put("scout", "big.bin", big, false)
	wantDiskError(t, st, err, "no space left")
	_, err = st.Put("scout", "notes.md", big, true)
	wantDiskError(t, st, err, "no space left")
	_, err = st.Put("miner", "a/b/c.md", big, false)
	wantDiskError(t, st, err, "no space left")
	_, err = st.NewSession("third")
	wantDiskError(t, st, err, "no space left")
	_, err = rv.SendDetached("lead", "scout", "work on a full disk")
	wantDiskError(t, st, err, "no space left")

	if d := treeChanges(before, stateTree(t, st)); d != "" {
		t.Fatalf("failed calls on a full disk changed the state directory: %s", d)
	}
	assertNoTempFiles(t, st)
	if got := get(t, st, id); got != "kept notes" {
		t.Fatalf("notes.md on a full disk = %q", got)
	}
	if o, err := rv.Poll(t.Context(), "lead", held.Ticket, 0); err != nil || o.State != fleetstate.TicketQueued {
		t.Fatalf("ticket on a full disk %+v, %v; want it queued", o, err)
	}

	// Space returns.
	for _, f := range fillers {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	put(t, st, "scout", "big.bin", string(big), false)
	put(t, st, "scout", "notes.md", "new notes", true)
	put(t, st, "miner", "a/b/c.md", "deep", false)
	if got := get(t, st, id); got != "new notes" {
		t.Fatalf("notes.md = %q", got)
	}
	newSession(t, st, "third")
	log := readFile(t, st, "previous_run_log.txt")
	if lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n"); len(lines) != 2 || lines[1] != sess.String() {
		t.Fatalf("archive %q; want two lines, the second %q", log, sess.String())
	}
	o, err := rv.SendDetached("lead", "scout", "work after space returned")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"work before the disk filled", "work after space returned"} {
		msg, ok, err := rv.Next(t.Context(), "scout", 0)
		if err != nil || !ok || msg.Content != want {
			t.Fatalf("Next = %+v, %v, %v; want %q", msg, ok, err, want)
		}
	}
	if err := rv.Reply("scout", "done"); err != nil {
		t.Fatal(err)
	}
	if p, err := rv.Poll(t.Context(), "lead", o.Ticket, 0); err != nil || p.Content != "done" {
		t.Fatalf("Poll = %+v, %v", p, err)
	}
	assertNoTempFiles(t, st)
}

// ---- the rendezvous on a disk that refuses writes --------------------------

// faultRendezvous opens a rendezvous with member scout (pulling) on a store
// kept on a faultFS.
func faultRendezvous(t *testing.T) (*fleettest.FaultFS, *fleetstate.Store, func() *fleetstate.Rendezvous) {
	t.Helper()
	ffs := fleettest.NewFaultFS(afero.NewMemMapFs())
	st := open(t, ffs, faultHostDir, nil)
	var cur *fleetstate.Rendezvous
	reopen := func() *fleetstate.Rendezvous {
		t.Helper()
		if cur != nil {
			cur.Close()
		}
		rv, err := fleetstate.NewRendezvous(st, nil)
		if err != nil {
			t.Fatalf("NewRendezvous: %v", err)
		}
		if err := rv.AddMember("scout", nil); err != nil {
			t.Fatal(err)
		}
		cur = rv
		return rv
	}
	t.Cleanup(func() {
		if cur != nil {
			cur.Close()
		}
	})
	return ffs, st, reopen
}

// refuseRendezvousWrites makes every write of the rendezvous's state fail.
func refuseRendezvousWrites(ffs *fleettest.FaultFS) {
	for _, o := range []fleettest.Op{fleettest.OpCreate, fleettest.OpWrite, fleettest.OpRename, fleettest.OpMkdir} {
		ffs.Fail(o, "/rendezvous", errNoSpace)
	}
}

// TestDiskRefusesSend: a send that cannot be written is refused with a
// clear error and leaves no ticket and nothing queued.
func TestDiskRefusesSend(t *testing.T) {
	ffs, st, reopen := faultRendezvous(t)
	rv := reopen()
	refuseRendezvousWrites(ffs)
	_, err := rv.SendDetached("lead", "scout", "never accepted")
	wantDiskError(t, st, err, "no space left")
	_, err = rv.Send(t.Context(), "lead", "scout", "never accepted either")
	wantDiskError(t, st, err, "no space left")
	if all, _ := rv.PollAll(t.Context(), "lead", 0); len(all) != 0 {
		t.Fatalf("tickets after refused sends: %+v", all)
	}
	if m := rv.Members(); m[0].Queued != 0 {
		t.Fatalf("members after refused sends: %+v", m)
	}
	ffs.Clear()
	rv = reopen()
	if msg, ok, err := rv.Next(t.Context(), "scout", 0); ok || err != nil {
		t.Fatalf("a refused send was delivered after a restart: %+v, %v", msg, err)
	}
	if _, err := rv.SendDetached("lead", "scout", "accepted"); err != nil {
		t.Fatalf("send once the disk is healthy: %v", err)
	}
}

// TestDiskRefusesDeliveryMark: a message whose delivery cannot be recorded
// does not leave: were it delivered, a restart would deliver it again.
func TestDiskRefusesDeliveryMark(t *testing.T) {
	ffs, st, reopen := faultRendezvous(t)
	rv := reopen()
	o, err := rv.SendDetached("lead", "scout", "exactly once")
	if err != nil {
		t.Fatal(err)
	}
	refuseRendezvousWrites(ffs)
	msg, ok, err := rv.Next(t.Context(), "scout", 0)
	if ok {
		t.Fatalf("Next delivered %+v although its delivery could not be recorded", msg)
	}
	wantDiskError(t, st, err, "no space left")
	if p, err := rv.Poll(t.Context(), "lead", o.Ticket, 0); err != nil || p.State != fleetstate.TicketQueued {
		t.Fatalf("ticket after a refused delivery %+v, %v; want queued", p, err)
	}
	ffs.Clear()
	if msg, ok, err := rv.Next(t.Context(), "scout", 0); !ok || err != nil || msg.Content != "exactly once" {
		t.Fatalf("Next once the disk is healthy: %+v, %v, %v", msg, ok, err)
	}
	rv = reopen()
	if msg, ok, err := rv.Next(t.Context(), "scout", 0); ok || err != nil {
		t.Fatalf("the message was delivered again after a restart: %+v, %v", msg, err)
	}
}

// TestDiskRefusesHeldReply: a reply that cannot be held on its ticket is
// refused, so that the member can send it again, rather than acknowledged
// and lost with the process.
func TestDiskRefusesHeldReply(t *testing.T) {
	ffs, st, reopen := faultRendezvous(t)
	rv := reopen()
	o, err := rv.SendDetached("lead", "scout", "work")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := rv.Next(t.Context(), "scout", 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	refuseRendezvousWrites(ffs)
	err = rv.Reply("scout", "the report")
	wantDiskError(t, st, err, "no space left")
	if p, err := rv.Poll(t.Context(), "lead", o.Ticket, 0); err != nil || p.State != fleetstate.TicketWorking {
		t.Fatalf("ticket after a refused reply %+v, %v; want still working", p, err)
	}
	ffs.Clear()
	if err := rv.Reply("scout", "the report"); err != nil {
		t.Fatalf("reply once the disk is healthy: %v", err)
	}
	rv = reopen()
	if p, err := rv.Poll(t.Context(), "lead", o.Ticket, 0); err != nil || p.Kind != fleetstate.OutcomeReply || p.Content != "the report" {
		t.Fatalf("held reply after a restart: %+v, %v", p, err)
	}
}

// TestPutsRacingCleansOS: puts and cleans at once, in one process on the
// disk (TestFaultSharedDirectory does it across processes). A clean never
// fails because a put refilled a folder it was removing, and a put whose
// folder a clean removed says so (ERR_NO_ACTIVE_SESSION), never
// ERR_INTERNAL.
func TestPutsRacingCleansOS(t *testing.T) {
	st := open(t, afero.NewOsFs(), filepath.Join(t.TempDir(), "state"), &fleetstate.Options{NoGitIgnore: true})
	newSession(t, st, "s")
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				_, err := st.Put(fmt.Sprintf("w%d", w), fmt.Sprintf("d%d/e/f%d", i%7, i), []byte("x"), false)
				if c := fleetstate.CodeOf(err); c != "" && c != fleetstate.CodeNoActiveSession {
					t.Errorf("put racing a clean: %v", err)
					return
				}
			}
		})
	}
	for range 200 {
		if err := st.Clean(); err != nil {
			t.Fatalf("clean racing puts: %v", err)
		}
		newSession(t, st, "again")
	}
	close(done)
	wg.Wait()
}
