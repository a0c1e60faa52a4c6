package fleetstatetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"github.com/spf13/afero"
)

// tb is what the helpers need of a test: *testing.T and *rapid.T have it.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// TestStateDir runs the store contract on state directories opened with
// [fleetstate.Open]. newDir gives one test a file system and the path, on
// it, of a state directory that does not exist yet; the suite calls it
// once per store, so that no two tests share state. Besides the contract
// every store keeps, it tests what a state directory alone has: its
// layout, the .gitignore it writes, the leftovers of a crash.
func TestStateDir(t *testing.T, newDir func(t *testing.T) (fsys afero.Fs, dir string)) {
	runStoreSuite(t, storeMaker{fs: newDir})
}

// TestBackend runs the store contract on stores opened with
// [fleetstate.OpenBackend] on backends from newBackend, each on a fleet of
// its own, so that tests sharing one engine are as isolated as tests on
// fresh file systems. The tests of a state directory's own layout are
// skipped, saying so.
//
// To check that a call that failed changed nothing, and what the run log
// holds, the suite needs a backend that also implements [Snapshotter] and
// [RunLogger]; the tests that need them fail without them.
func TestBackend(t *testing.T, newBackend func(t *testing.T) fleetstate.Backend) {
	runStoreSuite(t, storeMaker{backend: newBackend})
}

// A Snapshotter is a backend that can describe everything it keeps, so
// that the store suite can check that a failed call changed nothing, as it
// compares the file trees of a state directory. Snapshot returns one entry
// per thing kept (a stream, a key, a file), whose value changes whenever
// the thing does; things made but never written to may be left out.
type Snapshotter interface {
	Snapshot(ctx context.Context) (map[string]string, error)
}

// A RunLogger is a backend that shows its run log: the sessions archived,
// one "ID:::NAME" line each, oldest first, as previous_run_log.txt of a
// state directory holds them ("" when none was archived).
type RunLogger interface {
	RunLog(ctx context.Context) (string, error)
}

// callTimeout bounds each call of the suite to a backend's helper
// interfaces.
const callTimeout = 10 * time.Second

// storeMaker opens the stores of the store suite, each on fresh state of
// its own: a state directory on a file system from fs, or a fleet of a
// backend from backend. Exactly one of the two is set.
type storeMaker struct {
	fs      func(t *testing.T) (afero.Fs, string)
	backend func(t *testing.T) fleetstate.Backend
}

// disk reports whether the stores live in a state directory.
func (mk storeMaker) disk() bool { return mk.fs != nil }

// storeSuite is the contract of the store, whatever keeps its data. The
// tests marked disk are about the state directory itself and run only on
// a file system.
var storeSuite = []struct {
	name string
	test func(t *testing.T, mk storeMaker)
	disk string // why the test is only for a state directory
}{
	{name: "Open", test: testOpen},
	{name: "Sessions", test: testSessions},
	{name: "NoActiveSession", test: testNoActiveSession},
	{name: "SessionDirAppearsWithFirstPut", test: testSessionDirLazy},
	{name: "PutGet", test: testPutGet},
	{name: "Overwrite", test: testOverwrite},
	{name: "FileExists", test: testFileExists},
	{name: "GetPreviousSession", test: testGetPreviousSession},
	{name: "GetErrors", test: testGetErrors},
	{name: "GetContentTooLarge", test: testGetContentTooLarge},
	{name: "List", test: testList},
	{name: "ListErrors", test: testListErrors},
	{name: "Clean", test: testClean},
	{name: "BadAgentName", test: testBadAgentName},
	{name: "BadFileName", test: testBadFileName},
	{name: "BadSessionName", test: testBadSessionName},
	{name: "NonUTF8Names", test: testNonUTF8Names},
	{name: "OverlongNames", test: testOverlongNames},
	{name: "ContentTooLarge", test: testContentTooLarge},
	{name: "PathConflict", test: testPathConflict},
	{name: "GitIgnore", test: testGitIgnore, disk: "the .gitignore of the work tree around a state directory"},
	{name: "CrashLeftovers", test: testCrashLeftovers, disk: "the temporary files a crash leaves in a state directory"},
	{name: "ConcurrentCreate", test: testConcurrentCreate},
	{name: "ConcurrentOverwrite", test: testConcurrentOverwrite},
	{name: "ConcurrentSessions", test: testConcurrentSessions},
}

func runStoreSuite(t *testing.T, mk storeMaker) {
	for _, tc := range storeSuite {
		t.Run(tc.name, func(t *testing.T) {
			if tc.disk != "" && !mk.disk() {
				t.Skip("state directory only: " + tc.disk)
			}
			tc.test(t, mk)
		})
	}
}

// ---- helpers ---------------------------------------------------------------

func open(t tb, fsys afero.Fs, dir string, opts *fleetstate.Options) *fleetstate.Store {
	t.Helper()
	st, err := fleetstate.Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("Open(%q) error: %v; want none", dir, err)
	}
	return st
}

// setup opens a store on fresh state made by mk.
func setup(t *testing.T, mk storeMaker, opts *fleetstate.Options) *fleetstate.Store {
	t.Helper()
	if mk.disk() {
		fsys, dir := mk.fs(t)
		return open(t, fsys, dir, opts)
	}
	return fleetstate.OpenBackend(mk.backend(t), backendOptions(opts))
}

// reopen opens another store on the state of st, with opts.
func reopen(t tb, st *fleetstate.Store, opts *fleetstate.Options) *fleetstate.Store {
	t.Helper()
	if b := st.Backend(); b != nil {
		return fleetstate.OpenBackend(b, backendOptions(opts))
	}
	return open(t, st.Fs(), st.Dir(), opts)
}

// backendOptions are the options of a store on a backend that match opts.
func backendOptions(opts *fleetstate.Options) *fleetstate.BackendOptions {
	if opts == nil {
		return nil
	}
	return &fleetstate.BackendOptions{MaxContentSize: opts.MaxContentSize}
}

// setupSession opens a store and starts a session in it.
func setupSession(t *testing.T, mk storeMaker, opts *fleetstate.Options) (*fleetstate.Store, fleetstate.Session) {
	t.Helper()
	st := setup(t, mk, opts)
	return st, newSession(t, st, "test run")
}

func newSession(t tb, st *fleetstate.Store, name string) fleetstate.Session {
	t.Helper()
	sess, err := st.NewSession(name)
	if err != nil {
		t.Fatalf("NewSession(%q) error: %v; want none", name, err)
	}
	return sess
}

func put(t tb, st *fleetstate.Store, agent, name, content string, overwrite bool) fleetstate.FileID {
	t.Helper()
	id, err := st.Put(agent, name, []byte(content), overwrite)
	if err != nil {
		t.Fatalf("Put(%q, %q, overwrite=%v) error: %v; want none", agent, name, overwrite, err)
	}
	return id
}

func get(t tb, st *fleetstate.Store, id fleetstate.FileID) string {
	t.Helper()
	data, err := st.Get(id)
	if err != nil {
		t.Fatalf("Get(%s) error: %v; want none", id, err)
	}
	return string(data)
}

func fileID(t tb, session, agent, name string) fleetstate.FileID {
	t.Helper()
	id, err := fleetstate.NewFileID(session, agent, name)
	if err != nil {
		t.Fatalf("NewFileID(%q, %q, %q) error: %v; want none", session, agent, name, err)
	}
	return id
}

// readFile reads a file of the state directory, by its path below it.
func readFile(t tb, st *fleetstate.Store, rel string) string {
	t.Helper()
	data, err := afero.ReadFile(st.Fs(), filepath.Join(st.Dir(), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return string(data)
}

func exists(t tb, fsys afero.Fs, path string) bool {
	t.Helper()
	_, err := fsys.Stat(path)
	switch {
	case err == nil:
		return true
	case errors.Is(err, fs.ErrNotExist):
		return false
	}
	t.Fatalf("Stat(%s): %v", path, err)
	return false
}

var sentinels = map[fleetstate.Code]error{
	fleetstate.CodeNoActiveSession:      fleetstate.ErrNoActiveSession,
	fleetstate.CodeFileExists:           fleetstate.ErrFileExists,
	fleetstate.CodeCanOnlyRetrieveFiles: fleetstate.ErrCanOnlyRetrieveFiles,
	fleetstate.CodeSessionNotValid:      fleetstate.ErrSessionNotValid,
	fleetstate.CodeAgentNotValid:        fleetstate.ErrAgentNotValid,
	fleetstate.CodeFileNotFound:         fleetstate.ErrFileNotFound,
	fleetstate.CodeInvalidAgentName:     fleetstate.ErrInvalidAgentName,
	fleetstate.CodeInvalidFileName:      fleetstate.ErrInvalidFileName,
	fleetstate.CodeInvalidSessionName:   fleetstate.ErrInvalidSessionName,
	fleetstate.CodeContentTooLarge:      fleetstate.ErrContentTooLarge,
	fleetstate.CodePathConflict:         fleetstate.ErrPathConflict,
	fleetstate.CodePathEscape:           fleetstate.ErrPathEscape,
	fleetstate.CodeInternal:             fleetstate.ErrInternal,
}

// wantErr fails t unless err carries code want ("" means no error). A
// coded error must also match its sentinel with errors.Is, be an
// *fleetstate.Error, carry the package prefix and, when st is not nil,
// never show where the store lives on the host.
func wantErr(t tb, st *fleetstate.Store, err error, want fleetstate.Code) {
	t.Helper()
	if got := fleetstate.CodeOf(err); got != want {
		t.Fatalf("got error %v (code %q); want code %q", err, got, want)
	}
	if want == "" {
		return
	}
	if !errors.Is(err, sentinels[want]) {
		t.Fatalf("errors.Is(%v, sentinel of %s) = false; want true", err, want)
	}
	var e *fleetstate.Error
	if !errors.As(err, &e) {
		t.Fatalf("errors.As(%v, *fleetstate.Error) = false; want true", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "fleetstate: ") {
		t.Fatalf("got message %q; want prefix %q", msg, "fleetstate: ")
	}
	if st != nil && st.Dir() != "" && strings.Contains(err.Error(), st.Dir()) {
		t.Fatalf("got message %q; want no host path %q in it", err.Error(), st.Dir())
	}
}

// node is what a snapshot keeps of one entry of a file tree.
type node struct {
	mode    fs.FileMode
	modTime time.Time
	data    string // content of a regular file, target of a symbolic link
}

// snapshot records the tree below root on fsys without following symbolic
// links. Comparing two snapshots proves that a call changed nothing.
func snapshot(t tb, fsys afero.Fs, root string) map[string]node {
	t.Helper()
	tree := map[string]node{}
	err := afero.Walk(fsys, root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		n := node{mode: fi.Mode(), modTime: fi.ModTime()}
		switch {
		case fi.Mode().IsRegular():
			data, err := afero.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			n.data = string(data)
		case fi.Mode()&fs.ModeSymlink != 0:
			if r, ok := fsys.(afero.LinkReader); ok {
				if n.data, err = r.ReadlinkIfPossible(p); err != nil {
					return err
				}
			}
		}
		tree[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return tree
}

// treeDiff describes how two snapshots differ, or returns "".
func treeDiff(before, after map[string]node) string {
	var diffs []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			diffs = append(diffs, "removed "+p)
		case a.mode != b.mode:
			diffs = append(diffs, fmt.Sprintf("mode of %s: %v -> %v", p, b.mode, a.mode))
		case a.data != b.data:
			diffs = append(diffs, fmt.Sprintf("content of %s: %q -> %q", p, clip(b.data), clip(a.data)))
		case !a.modTime.Equal(b.modTime):
			diffs = append(diffs, fmt.Sprintf("mtime of %s: %v -> %v", p, b.modTime, a.modTime))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "added "+p)
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// unchanged runs call and fails t if it changed anything on the file
// system of st: outside the state directory as well as inside it. For a
// store on a backend it compares the backend's snapshots (see
// [Snapshotter]).
func unchanged(t tb, st *fleetstate.Store, call func()) {
	t.Helper()
	if b := st.Backend(); b != nil {
		before := backendSnapshot(t, b)
		call()
		if d := treeDiff(before, backendSnapshot(t, b)); d != "" {
			t.Fatalf("got the backend changed by a failed call (%s); want it unchanged", d)
		}
		return
	}
	root := filepath.Dir(st.Dir())
	before := snapshot(t, st.Fs(), root)
	call()
	if d := treeDiff(before, snapshot(t, st.Fs(), root)); d != "" {
		t.Fatalf("got the file tree changed by a failed call (%s); want it unchanged", d)
	}
}

// backendSnapshot records what b keeps, as snapshot does for a file tree.
func backendSnapshot(t tb, b fleetstate.Backend) map[string]node {
	t.Helper()
	sn, ok := b.(Snapshotter)
	if !ok {
		t.Fatalf("backend %T cannot be snapshotted: it does not implement fleetstatetest.Snapshotter", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	things, err := sn.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot of backend %T: %v", b, err)
	}
	tree := make(map[string]node, len(things))
	for k, v := range things {
		tree[k] = node{data: v}
	}
	return tree
}

// currentRun returns the current session as current_run.txt holds it.
func currentRun(t tb, st *fleetstate.Store) string {
	t.Helper()
	if st.Backend() == nil {
		return readFile(t, st, "current_run.txt")
	}
	sess, err := st.CurrentSession()
	if err != nil {
		t.Fatalf("CurrentSession() error: %v", err)
	}
	return sess.String()
}

// runLog returns the run log, and whether there is one: on disk, whether
// previous_run_log.txt exists; in a backend, whether it has a line.
func runLog(t tb, st *fleetstate.Store) (string, bool) {
	t.Helper()
	b := st.Backend()
	if b == nil {
		if !exists(t, st.Fs(), filepath.Join(st.Dir(), "previous_run_log.txt")) {
			return "", false
		}
		return readFile(t, st, "previous_run_log.txt"), true
	}
	r, ok := b.(RunLogger)
	if !ok {
		t.Fatalf("backend %T shows no run log: it does not implement fleetstatetest.RunLogger", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	log, err := r.RunLog(ctx)
	if err != nil {
		t.Fatalf("RunLog: %v", err)
	}
	return log, log != ""
}

func idStrings(files []fleetstate.FileInfo) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.ID.Agent() + "/" + f.ID.Name()
	}
	return out
}

func isLowerUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

// ---- the store suite -------------------------------------------------------

func testOpen(t *testing.T, mk storeMaker) {
	if !mk.disk() {
		// A second store on the same fleet sees the first one's work.
		st := setup(t, mk, nil)
		sess := newSession(t, st, "shared")
		id := put(t, st, "scout", "notes.md", "hello", false)
		if st.Dir() != "" {
			t.Errorf("Dir() of a store on a backend = %q; want \"\"", st.Dir())
		}
		again := reopen(t, st, nil)
		if got, err := again.CurrentSession(); err != nil || got != sess {
			t.Errorf("CurrentSession() of a second store = %v, %v; want %v", got, err, sess)
		}
		if got := get(t, again, id); got != "hello" {
			t.Errorf("Get from a second store = %q; want %q", got, "hello")
		}
		return
	}
	fsys, dir := mk.fs(t)
	st := open(t, fsys, dir, nil)
	if got, want := st.Dir(), filepath.Clean(dir); got != want {
		t.Errorf("Dir() = %q; want %q", got, want)
	}
	if st.Fs() != fsys {
		t.Errorf("Fs() = %v; want the file system given to Open", st.Fs())
	}
	fi, err := fsys.Stat(dir)
	if err != nil || !fi.IsDir() {
		t.Fatalf("Stat(state dir) = %v, %v; want a directory", fi, err)
	}

	// A second store on the same directory sees the first one's work.
	sess := newSession(t, st, "shared")
	id := put(t, st, "scout", "notes.md", "hello", false)
	again := open(t, fsys, dir+"/./sub/..", nil)
	if got := again.Dir(); got != st.Dir() {
		t.Errorf("Dir() of %q = %q; want %q", dir+"/./sub/..", got, st.Dir())
	}
	got, err := again.CurrentSession()
	if err != nil || got != sess {
		t.Errorf("CurrentSession() of a second store = %v, %v; want %v", got, err, sess)
	}
	if got := get(t, again, id); got != "hello" {
		t.Errorf("Get from a second store = %q; want %q", got, "hello")
	}
}

func testSessions(t *testing.T, mk storeMaker) {
	st := setup(t, mk, nil)
	_, err := st.CurrentSession()
	wantErr(t, st, err, fleetstate.CodeNoActiveSession)
	names := []string{"first", "second run", "third ::: with colons", "名前 ✓"}
	var sessions []fleetstate.Session
	for i, name := range names {
		sess := newSession(t, st, name)
		if !isLowerUUID(sess.ID) {
			t.Fatalf("NewSession(%q).ID = %q; want a lower-case UUID", name, sess.ID)
		}
		if sess.Name != name {
			t.Fatalf("NewSession(%q).Name = %q; want %q", name, sess.Name, name)
		}
		if got, want := sess.String(), sess.ID+":::"+name; got != want {
			t.Fatalf("Session.String() = %q; want %q", got, want)
		}
		for _, old := range sessions {
			if old.ID == sess.ID {
				t.Fatalf("NewSession(%q).ID = %q, the ID of an earlier session", name, sess.ID)
			}
		}
		sessions = append(sessions, sess)

		cur, err := st.CurrentSession()
		if err != nil || cur != sess {
			t.Fatalf("CurrentSession() = %v, %v; want %v", cur, err, sess)
		}
		if got, want := currentRun(t, st), sess.ID+":::"+name; got != want {
			t.Fatalf("current_run.txt = %q; want exactly %q", got, want)
		}
		log, ok := runLog(t, st)
		if i == 0 {
			if ok {
				t.Fatalf("previous_run_log.txt exists after the first session; want none")
			}
			continue
		}
		var want strings.Builder
		for _, old := range sessions[:i] {
			want.WriteString(old.ID + ":::" + old.Name + "\n")
		}
		if got := log; got != want.String() {
			t.Fatalf("previous_run_log.txt = %q; want %q", got, want.String())
		}
	}
}

func testNoActiveSession(t *testing.T, mk storeMaker) {
	ops := []struct {
		name string
		call func(st *fleetstate.Store) error
	}{
		{"Put", func(st *fleetstate.Store) error {
			_, err := st.Put("scout", "notes.md", []byte("x"), false)
			return err
		}},
		{"PutOverwrite", func(st *fleetstate.Store) error {
			_, err := st.Put("scout", "notes.md", []byte("x"), true)
			return err
		}},
		{"ListCurrent", func(st *fleetstate.Store) error {
			_, err := st.List("", "")
			return err
		}},
		{"ListCurrentAgent", func(st *fleetstate.Store) error {
			_, err := st.List("", "scout")
			return err
		}},
		{"CurrentSession", func(st *fleetstate.Store) error {
			_, err := st.CurrentSession()
			return err
		}},
	}
	states := []struct {
		name    string
		prepare func(t *testing.T, st *fleetstate.Store)
		disk    bool // current_run.txt written by another program
	}{
		{"Fresh", func(*testing.T, *fleetstate.Store) {}, false},
		{"Cleaned", func(t *testing.T, st *fleetstate.Store) {
			newSession(t, st, "gone")
			put(t, st, "scout", "old.md", "x", false)
			if err := st.Clean(); err != nil {
				t.Fatalf("Clean() error: %v", err)
			}
		}, false},
		{"CurrentRunNotAnID", func(t *testing.T, st *fleetstate.Store) {
			writeRaw(t, st, "current_run.txt", "garbage")
		}, true},
		{"CurrentRunEmpty", func(t *testing.T, st *fleetstate.Store) {
			writeRaw(t, st, "current_run.txt", "")
		}, true},
		{"CurrentRunUpperCaseUUID", func(t *testing.T, st *fleetstate.Store) {
			writeRaw(t, st, "current_run.txt", "550E8400-E29B-41D4-A716-446655440000:::x")
		}, true},
		{"CurrentRunNoSeparator", func(t *testing.T, st *fleetstate.Store) {
			writeRaw(t, st, "current_run.txt", "550e8400-e29b-41d4-a716-446655440000")
		}, true},
	}
	for _, state := range states {
		if state.disk && !mk.disk() {
			continue
		}
		for _, op := range ops {
			t.Run(state.name+"/"+op.name, func(t *testing.T) {
				st := setup(t, mk, nil)
				state.prepare(t, st)
				unchanged(t, st, func() {
					wantErr(t, st, op.call(st), fleetstate.CodeNoActiveSession)
				})
			})
		}
		t.Run(state.name+"/NewSessionRecovers", func(t *testing.T) {
			st := setup(t, mk, nil)
			state.prepare(t, st)
			sess := newSession(t, st, "fresh start")
			if got, err := st.CurrentSession(); err != nil || got != sess {
				t.Fatalf("CurrentSession() = %v, %v; want %v", got, err, sess)
			}
			id := put(t, st, "scout", "notes.md", "works", false)
			if got := get(t, st, id); got != "works" {
				t.Fatalf("Get = %q; want %q", got, "works")
			}
		})
	}
}

// writeRaw writes a file below the state directory directly, as another
// program would.
func writeRaw(t tb, st *fleetstate.Store, rel, content string) {
	t.Helper()
	p := filepath.Join(st.Dir(), filepath.FromSlash(rel))
	if err := st.Fs().MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	if err := afero.WriteFile(st.Fs(), p, []byte(content), 0o644); err != nil {
		t.Fatalf("WriteFile(%s): %v", rel, err)
	}
}

func testSessionDirLazy(t *testing.T, mk storeMaker) {
	st, sess := setupSession(t, mk, nil)
	sessDir := filepath.Join(st.Dir(), sess.ID)
	if mk.disk() && exists(t, st.Fs(), sessDir) {
		t.Fatalf("session directory exists before the first put; want none")
	}
	for _, session := range []string{"", sess.ID} {
		files, err := st.List(session, "")
		if err != nil || len(files) != 0 {
			t.Fatalf("List(%q, \"\") of an empty current session = %v, %v; want an empty list", session, files, err)
		}
	}
	_, err := st.Get(fileID(t, sess.ID, "scout", "notes.md"))
	wantErr(t, st, err, fleetstate.CodeSessionNotValid)
	if mk.disk() && exists(t, st.Fs(), sessDir) {
		t.Fatalf("session directory exists after List and Get; want none")
	}

	id := put(t, st, "scout", "nested/dir/notes.md", "x", false)
	if files, err := st.List(sess.ID, ""); err != nil || len(files) != 1 || files[0].ID != id {
		t.Fatalf("List after the first put = %v, %v; want [%v]", files, err, id)
	}
	if !mk.disk() {
		return
	}
	for _, p := range []string{sess.ID, sess.ID + "/scout", sess.ID + "/scout/nested/dir"} {
		fi, err := st.Fs().Stat(filepath.Join(st.Dir(), p))
		if err != nil || !fi.IsDir() {
			t.Fatalf("Stat(%s) after the first put = %v, %v; want a directory", p, fi, err)
		}
	}
}

func testPutGet(t *testing.T, mk storeMaker) {
	tests := []struct {
		name    string
		agent   string
		file    string
		content string
	}{
		{"Simple", "scout", "notes.md", "# notes\n"},
		{"Nested", "scout", "nested/dir/code.ts", "export {}\n"},
		{"Empty", "scout", "empty.txt", ""},
		{"Binary", "scout", "blob.bin", "\x00\x01\xff\xfe not utf-8 \x00"},
		{"Unicode", "エージェント", "日本語/ファイル.md", "内容 ✓"},
		{"DoubleColonInName", "scout", "a::b::c.md", "colons"},
		{"DoubleColonSegments", "scout", "::/x::/::y", "colons everywhere"},
		{"LeadingColonInName", "scout", ":memory:", "x"},
		{"LeadingColonAgent", ":lead", "notes.md", "x"},
		{"SingleColonAgent", "a:b", "notes.md", "x"},
		{"Dots", "agent.v2", ".hidden/...x/.../a.b.c", "dots"},
		{"Spaces", "agent with spaces", "dir with spaces/file name.md", "spaces"},
		{"TempLookalike", "scout", "fleetstate-tmp-x/.fleetstate-tmp", "not the reserved prefix"},
		{"MaxAgent", strings.Repeat("a", fleetstate.MaxAgentNameLen), "x", "long agent"},
		{"MaxSegment", "scout", strings.Repeat("s", fleetstate.MaxSegmentLen), "long segment"},
		{"MaxName", "scout", maxFileName(), "long name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, sess := setupSession(t, mk, nil)
			id := put(t, st, tc.agent, tc.file, tc.content, false)
			if id.Session() != sess.ID || id.Agent() != tc.agent || id.Name() != tc.file {
				t.Fatalf("Put returned %q/%q/%q; want %q/%q/%q",
					id.Session(), id.Agent(), id.Name(), sess.ID, tc.agent, tc.file)
			}
			want := "fsm::file::" + sess.ID + "::" + tc.agent + "::" + tc.file
			if got := id.String(); got != want {
				t.Fatalf("id.String() = %q; want %q", got, want)
			}
			parsed, err := fleetstate.ParseFileID(id.String())
			if err != nil || parsed != id {
				t.Fatalf("ParseFileID(%q) = %v, %v; want %v", id.String(), parsed, err, id)
			}
			if got := get(t, st, id); got != tc.content {
				t.Fatalf("Get = %q; want %q", got, tc.content)
			}
			if got := get(t, st, parsed); got != tc.content {
				t.Fatalf("Get(parsed ID) = %q; want %q", got, tc.content)
			}
			// The layout on disk is <dir>/<session>/<agent>/<file>, byte for byte.
			if !mk.disk() {
				return
			}
			if got := readFile(t, st, sess.ID+"/"+tc.agent+"/"+tc.file); got != tc.content {
				t.Fatalf("file on disk = %q; want %q", got, tc.content)
			}
		})
	}
}

// maxFileName returns a valid file name of exactly MaxFileNameLen bytes.
func maxFileName() string {
	seg := strings.Repeat("n", fleetstate.MaxSegmentLen)
	name := seg + "/" + seg + "/" + seg + "/" + seg[:254] + "/x"
	if len(name) != fleetstate.MaxFileNameLen {
		panic(fmt.Sprintf("maxFileName is %d bytes", len(name)))
	}
	return name
}

func testOverwrite(t *testing.T, mk storeMaker) {
	st, _ := setupSession(t, mk, nil)
	id := put(t, st, "scout", "notes.md", "version 1, a bit longer", false)
	id2 := put(t, st, "scout", "notes.md", "v2", true)
	if id2 != id {
		t.Fatalf("overwriting Put returned %v; want %v", id2, id)
	}
	if got := get(t, st, id); got != "v2" {
		t.Fatalf("Get after overwrite = %q; want %q", got, "v2")
	}
	if mk.disk() {
		if got := readFile(t, st, id.Session()+"/scout/notes.md"); got != "v2" {
			t.Fatalf("file on disk after overwrite = %q; want %q", got, "v2")
		}
	}
	// Overwrite of a name that does not exist yet creates it.
	id3 := put(t, st, "scout", "new/file.md", "created", true)
	if got := get(t, st, id3); got != "created" {
		t.Fatalf("Get of a file created with overwrite = %q; want %q", got, "created")
	}
	files, err := st.List("", "scout")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got, want := idStrings(files), []string{"scout/new/file.md", "scout/notes.md"}; !slices.Equal(got, want) {
		t.Fatalf("List after overwrites = %q; want %q (no temporary files)", got, want)
	}
}

func testFileExists(t *testing.T, mk storeMaker) {
	st, _ := setupSession(t, mk, nil)
	id := put(t, st, "scout", "dir/notes.md", "original", false)
	unchanged(t, st, func() {
		got, err := st.Put("scout", "dir/notes.md", []byte("replacement"), false)
		wantErr(t, st, err, fleetstate.CodeFileExists)
		if got.IsValid() {
			t.Fatalf("Put that failed returned ID %v; want the zero FileID", got)
		}
	})
	if got := get(t, st, id); got != "original" {
		t.Fatalf("Get after ERR_FILE_EXISTS = %q; want %q", got, "original")
	}
	// The same name is free for another agent and in another session.
	put(t, st, "other", "dir/notes.md", "other agent", false)
	newSession(t, st, "next")
	put(t, st, "scout", "dir/notes.md", "next session", false)
	if got := get(t, st, id); got != "original" {
		t.Fatalf("Get of the first session's file = %q; want %q", got, "original")
	}
}

func testGetPreviousSession(t *testing.T, mk storeMaker) {
	st, first := setupSession(t, mk, nil)
	old := put(t, st, "scout", "plan.md", "first session", false)
	second := newSession(t, st, "second")
	cur := put(t, st, "scout", "plan.md", "second session", false)
	if old.Session() != first.ID || cur.Session() != second.ID {
		t.Fatalf("IDs in sessions %s and %s; want %s and %s", old.Session(), cur.Session(), first.ID, second.ID)
	}
	newSession(t, st, "third")
	for _, tc := range []struct {
		id   fleetstate.FileID
		want string
	}{{old, "first session"}, {cur, "second session"}} {
		if got := get(t, st, tc.id); got != tc.want {
			t.Errorf("Get(%v) = %q; want %q", tc.id, got, tc.want)
		}
	}
	files, err := st.List(first.ID, "")
	if err != nil || len(files) != 1 || files[0].ID != old {
		t.Fatalf("List(first session) = %v, %v; want [%v]", files, err, old)
	}
}

func testGetErrors(t *testing.T, mk storeMaker) {
	st, sess := setupSession(t, mk, nil)
	put(t, st, "scout", "nested/dir/notes.md", "x", false)
	put(t, st, "scout", "top.md", "x", false)
	put(t, st, "other", "x.md", "x", false)
	never := newSession(t, st, "never wrote") // its directory never appears
	unknown := uuid.NewString()

	tests := []struct {
		name string
		id   fleetstate.FileID
		want fleetstate.Code
	}{
		{"ZeroID", fleetstate.FileID{}, fleetstate.CodeCanOnlyRetrieveFiles},
		{"UnknownSession", fileID(t, unknown, "scout", "top.md"), fleetstate.CodeSessionNotValid},
		{"SessionWithoutFiles", fileID(t, never.ID, "scout", "top.md"), fleetstate.CodeSessionNotValid},
		{"UnknownAgent", fileID(t, sess.ID, "nobody", "top.md"), fleetstate.CodeAgentNotValid},
		{"AgentOfOtherFile", fileID(t, sess.ID, "other", "top.md"), fleetstate.CodeFileNotFound},
		{"UnknownFile", fileID(t, sess.ID, "scout", "missing.md"), fleetstate.CodeFileNotFound},
		{"UnknownFolder", fileID(t, sess.ID, "scout", "nope/notes.md"), fleetstate.CodeFileNotFound},
		{"NameIsFolder", fileID(t, sess.ID, "scout", "nested"), fleetstate.CodeFileNotFound},
		{"NameIsDeepFolder", fileID(t, sess.ID, "scout", "nested/dir"), fleetstate.CodeFileNotFound},
		{"FolderIsFile", fileID(t, sess.ID, "scout", "top.md/notes.md"), fleetstate.CodeFileNotFound},
		{"DeepFolderIsFile", fileID(t, sess.ID, "scout", "nested/dir/notes.md/x/y"), fleetstate.CodeFileNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			unchanged(t, st, func() {
				data, err := st.Get(tc.id)
				wantErr(t, st, err, tc.want)
				if data != nil {
					t.Fatalf("Get that failed returned %q; want nil", data)
				}
			})
		})
	}
}

func testGetContentTooLarge(t *testing.T, mk storeMaker) {
	st, sess := setupSession(t, mk, &fleetstate.Options{MaxContentSize: 8})
	id := put(t, st, "scout", "limit.txt", "12345678", false)
	if got := get(t, st, id); got != "12345678" {
		t.Fatalf("Get at the limit = %q; want %q", got, "12345678")
	}
	// Another program wrote a file past the limit.
	if mk.disk() {
		writeRaw(t, st, sess.ID+"/scout/big.txt", "123456789")
	} else {
		put(t, reopen(t, st, nil), "scout", "big.txt", "123456789", false)
	}
	_, err := st.Get(fileID(t, sess.ID, "scout", "big.txt"))
	wantErr(t, st, err, fleetstate.CodeContentTooLarge)
}

func testList(t *testing.T, mk storeMaker) {
	st, sess := setupSession(t, mk, nil)
	// Put in an order other than the sorted one.
	before := time.Now()
	put(t, st, "bravo", "x.md", "bravo", false)
	put(t, st, "alpha", "z.md", "zz", false)
	put(t, st, "alpha", "a/b.md", "abc", false)
	put(t, st, "alpha", "m.md", "", false)
	put(t, st, "alpha", "a/c/d.md", "dddd", false)

	after := time.Now()
	stamp := time.Date(2024, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	if mk.disk() {
		p := filepath.Join(st.Dir(), sess.ID, "alpha", "m.md")
		if err := st.Fs().Chtimes(p, stamp, stamp); err != nil {
			t.Fatalf("Chtimes: %v", err)
		}
	}

	tests := []struct {
		name    string
		session string
		agent   string
		want    []string
	}{
		{"CurrentAll", "", "", []string{"alpha/a/b.md", "alpha/a/c/d.md", "alpha/m.md", "alpha/z.md", "bravo/x.md"}},
		{"ExplicitAll", sess.ID, "", []string{"alpha/a/b.md", "alpha/a/c/d.md", "alpha/m.md", "alpha/z.md", "bravo/x.md"}},
		{"Agent", "", "alpha", []string{"alpha/a/b.md", "alpha/a/c/d.md", "alpha/m.md", "alpha/z.md"}},
		{"OtherAgent", sess.ID, "bravo", []string{"bravo/x.md"}},
		{"AgentWithoutFiles", "", "nobody", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, err := st.List(tc.session, tc.agent)
			if err != nil {
				t.Fatalf("List(%q, %q) error: %v", tc.session, tc.agent, err)
			}
			if got := idStrings(files); !slices.Equal(got, tc.want) {
				t.Fatalf("List(%q, %q) = %q; want %q", tc.session, tc.agent, got, tc.want)
			}
			for _, f := range files {
				if f.ID.Session() != sess.ID {
					t.Errorf("listed %v in session %s; want %s", f.ID, f.ID.Session(), sess.ID)
				}
				content := get(t, st, f.ID)
				if f.Size != int64(len(content)) {
					t.Errorf("Size of %v = %d; want %d", f.ID, f.Size, len(content))
				}
				if !mk.disk() {
					// The time of the last write, as the engine recorded it
					// (a server on this machine, in the tests: one clock).
					if f.ModTime.Before(before.Add(-time.Second)) || f.ModTime.After(after.Add(time.Second)) {
						t.Errorf("ModTime of %v = %v; want between %v and %v", f.ID, f.ModTime, before, after)
					}
					continue
				}
				fi, err := st.Fs().Stat(filepath.Join(st.Dir(), sess.ID, f.ID.Agent(), filepath.FromSlash(f.ID.Name())))
				if err != nil {
					t.Fatalf("Stat: %v", err)
				}
				if !f.ModTime.Equal(fi.ModTime()) {
					t.Errorf("ModTime of %v = %v; want %v", f.ID, f.ModTime, fi.ModTime())
				}
				if f.ID.Name() == "m.md" && !f.ModTime.Equal(stamp) {
					t.Errorf("ModTime of m.md = %v; want %v", f.ModTime, stamp)
				}
			}
		})
	}

	t.Run("SkipsWhatNoIDCanName", func(t *testing.T) {
		if !mk.disk() {
			t.Skip("files written into the state directory by another program")
		}
		st, sess := setupSession(t, mk, nil)
		put(t, st, "scout", "ok.md", "x", false)
		writeRaw(t, st, sess.ID+"/stray-file-in-session.txt", "x") // not in an agent folder
		writeRaw(t, st, sess.ID+"/bad::agent/file.md", "x")        // no valid agent name
		writeRaw(t, st, sess.ID+"/scout/back\\slash.md", "x")      // no valid file name
		writeRaw(t, st, sess.ID+"/scout/ctl\x01.md", "x")
		files, err := st.List("", "")
		if err != nil {
			t.Fatalf("List error: %v", err)
		}
		if got, want := idStrings(files), []string{"scout/ok.md"}; !slices.Equal(got, want) {
			t.Fatalf("List = %q; want %q", got, want)
		}
	})
}

func testListErrors(t *testing.T, mk storeMaker) {
	st, sess := setupSession(t, mk, nil)
	put(t, st, "scout", "x.md", "x", false)
	tests := []struct {
		name    string
		session string
		agent   string
		want    fleetstate.Code
	}{
		{"UnknownSession", uuid.NewString(), "", fleetstate.CodeSessionNotValid},
		{"NotAUUID", "my-session", "", fleetstate.CodeSessionNotValid},
		{"UpperCaseUUID", strings.ToUpper(sess.ID), "", fleetstate.CodeSessionNotValid},
		{"PathInSession", "../" + sess.ID, "", fleetstate.CodeSessionNotValid},
		{"InvalidAgent", "", "../scout", fleetstate.CodeInvalidAgentName},
		{"InvalidAgentDoubleColon", sess.ID, "a::b", fleetstate.CodeInvalidAgentName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			unchanged(t, st, func() {
				files, err := st.List(tc.session, tc.agent)
				wantErr(t, st, err, tc.want)
				if files != nil {
					t.Fatalf("List that failed returned %v; want nil", files)
				}
			})
		})
	}
}

func testClean(t *testing.T, mk storeMaker) {
	st, first := setupSession(t, mk, nil)
	old := put(t, st, "scout", "a/b.md", "x", false)
	newSession(t, st, "second")
	big := put(t, st, "other", "c.md", strings.Repeat("y", 1<<20), false) // not inline in a backend's index
	if mk.disk() {
		writeRaw(t, st, "stray.txt", "left by someone")
		writeRaw(t, st, ".fleetstate/rendezvous/ticket.json", "{}")
		writeRaw(t, st, ".fleetstate/config.json", "{}")
	}

	for i := range 2 { // Clean is idempotent.
		if err := st.Clean(); err != nil {
			t.Fatalf("Clean() #%d error: %v", i+1, err)
		}
		if !mk.disk() {
			continue
		}
		fi, err := st.Fs().Stat(st.Dir())
		if err != nil || !fi.IsDir() {
			t.Fatalf("state directory after Clean: %v, %v; want a directory", fi, err)
		}
		tree := snapshot(t, st.Fs(), st.Dir())
		for p := range tree {
			if p != "." && p != ".fleetstate" && !strings.HasPrefix(p, ".fleetstate/") && p != "stray.txt" {
				t.Errorf("%s survived Clean; want only the private folder and what the store did not make", p)
			}
		}
		// What the store did not make is not the store's to remove.
		if _, ok := tree["stray.txt"]; !ok {
			t.Errorf("Clean removed stray.txt, which the store did not make")
		}
		if _, ok := tree[".fleetstate/rendezvous"]; ok {
			t.Errorf("rendezvous state survived Clean")
		}
		if _, ok := tree[".fleetstate/config.json"]; !ok {
			t.Errorf("private configuration removed by Clean; want it kept")
		}
	}

	_, err := st.CurrentSession()
	wantErr(t, st, err, fleetstate.CodeNoActiveSession)
	_, err = st.Get(old)
	wantErr(t, st, err, fleetstate.CodeSessionNotValid)
	_, err = st.Get(big)
	wantErr(t, st, err, fleetstate.CodeSessionNotValid)
	_, err = st.List(first.ID, "")
	wantErr(t, st, err, fleetstate.CodeSessionNotValid)

	// The store keeps working, and the new session archives nothing.
	sess := newSession(t, st, "after clean")
	id := put(t, st, "scout", "a/b.md", "fresh", false)
	if got := get(t, st, id); got != "fresh" {
		t.Fatalf("Get after Clean = %q; want %q", got, "fresh")
	}
	if log, ok := runLog(t, st); ok {
		t.Fatalf("previous_run_log.txt = %q after Clean and one new session; want none", log)
	}
	if got, want := currentRun(t, st), sess.String(); got != want {
		t.Fatalf("current_run.txt = %q; want %q", got, want)
	}

	t.Run("Fresh", func(t *testing.T) {
		st := setup(t, mk, nil)
		if err := st.Clean(); err != nil {
			t.Fatalf("Clean() of a fresh store: %v", err)
		}
		newSession(t, st, "works")
	})
}

// badName is a name a rule refuses, with the rule.
type badName struct {
	name, value string
}

var badAgentNames = []badName{
	{"Empty", ""},
	{"Dot", "."},
	{"DotDot", ".."},
	{"Slash", "a/b"},
	{"Absolute", "/etc"},
	{"TrailingSlash", "scout/"},
	{"Backslash", `a\b`},
	{"DoubleColon", "a::b"},
	{"OnlyDoubleColon", "::"},
	{"TrailingColon", "scout:"},
	{"NUL", "sc\x00out"},
	{"Escape", "\x1b[31mred"},
	{"Newline", "scout\n"},
	{"Tab", "a\tb"},
	{"DEL", "a\x7f"},
	{"C1Control", "a\u0085b"},
	{"InvalidUTF8", "sc\xffout"},
	{"Overlong", strings.Repeat("a", fleetstate.MaxAgentNameLen+1)},
	{"OverlongMultibyte", strings.Repeat("é", fleetstate.MaxAgentNameLen/2) + "a"},
	{"TempPrefix", ".fleetstate-tmp-123"},
}

var badFileNames = []badName{
	{"Empty", ""},
	{"Absolute", "/etc/passwd"},
	{"Root", "/"},
	{"DotDot", ".."},
	{"Dot", "."},
	{"DotDotEscape", "../../etc/passwd"},
	{"DotDotInside", "a/../../b"},
	{"DotSegment", "a/./b"},
	{"LeadingDot", "./a"},
	{"EmptySegment", "a//b"},
	{"TrailingSlash", "dir/"},
	{"Backslash", `a\b.md`},
	{"WindowsPath", `C:\Windows\system.ini`},
	{"NUL", "a\x00.md"},
	{"Escape", "\x1b[31m.md"},
	{"Newline", "a\nb"},
	{"C1Control", "a\u009bb"},
	{"InvalidUTF8", "a/\xff\xfe.md"},
	{"OverlongSegment", strings.Repeat("s", fleetstate.MaxSegmentLen+1)},
	{"OverlongName", maxFileName() + "x"},
	{"TempPrefix", ".fleetstate-tmp-1234"},
	{"TempPrefixFolder", "a/.fleetstate-tmp-x/b.md"},
}

// testBadNames checks, for each name, that Put refuses it with code before
// any I/O, and that the other entry points refuse it too.
func testBadNames(t *testing.T, mk storeMaker, names []badName, agent bool) {
	for _, tc := range names {
		t.Run(tc.name, func(t *testing.T) {
			st, sess := setupSession(t, mk, nil)
			put(t, st, "scout", "existing.md", "x", false)
			a, n, code := "scout", tc.value, fleetstate.CodeInvalidFileName
			validate := fleetstate.ValidateFileName
			if agent {
				a, n, code = tc.value, "notes.md", fleetstate.CodeInvalidAgentName
				validate = fleetstate.ValidateAgentName
			}
			for _, overwrite := range []bool{false, true} {
				unchanged(t, st, func() {
					id, err := st.Put(a, n, []byte("content"), overwrite)
					wantErr(t, st, err, code)
					if id.IsValid() {
						t.Fatalf("Put that failed returned ID %v; want the zero FileID", id)
					}
				})
			}
			wantErr(t, st, validate(tc.value), code)
			_, err := fleetstate.NewFileID(sess.ID, a, n)
			wantErr(t, st, err, code)
			if agent && tc.value != "" { // List("", "") lists every agent
				unchanged(t, st, func() {
					_, err := st.List("", tc.value)
					wantErr(t, st, err, code)
				})
			}
			// The text form of such an ID is not an ID, or names something else.
			s := "fsm::file::" + sess.ID + "::" + a + "::" + n
			if id, err := fleetstate.ParseFileID(s); err == nil {
				if id.Agent() == a && id.Name() == n {
					t.Fatalf("ParseFileID(%q) accepted agent %q and name %q", s, a, n)
				}
			} else {
				wantErr(t, st, err, fleetstate.CodeCanOnlyRetrieveFiles)
			}
		})
	}
}

func testBadAgentName(t *testing.T, mk storeMaker) { testBadNames(t, mk, badAgentNames, true) }
func testBadFileName(t *testing.T, mk storeMaker)  { testBadNames(t, mk, badFileNames, false) }

func testNonUTF8Names(t *testing.T, mk storeMaker) {
	t.Run("Agent", func(t *testing.T) {
		testBadNames(t, mk, []badName{{"Lone", "\xff"}, {"Truncated", "é"[:1]}, {"Surrogate", "\xed\xa0\x80"}}, true)
	})
	t.Run("File", func(t *testing.T) {
		testBadNames(t, mk, []badName{{"Lone", "\xff"}, {"Truncated", "a/é"[:3]}, {"OverlongEncoding", "\xc0\xaf"}}, false)
	})
}

func testOverlongNames(t *testing.T, mk storeMaker) {
	t.Run("Agent", func(t *testing.T) {
		testBadNames(t, mk, []badName{
			{"ByOne", strings.Repeat("x", fleetstate.MaxAgentNameLen+1)},
			{"Huge", strings.Repeat("x", 1<<20)},
		}, true)
	})
	t.Run("File", func(t *testing.T) {
		testBadNames(t, mk, []badName{
			{"Segment", strings.Repeat("x", fleetstate.MaxSegmentLen+1)},
			{"Name", maxFileName() + "y"},
			{"ShortSegmentsTooMany", strings.Repeat("a/", fleetstate.MaxFileNameLen/2) + "a"},
			{"Huge", strings.Repeat("x/", 1<<19)},
		}, false)
	})
	t.Run("AtTheLimits", func(t *testing.T) {
		st, _ := setupSession(t, mk, nil)
		put(t, st, strings.Repeat("é", fleetstate.MaxAgentNameLen/2), maxFileName(), "at the limits", false)
	})
}

func testBadSessionName(t *testing.T, mk storeMaker) {
	tests := []badName{
		{"Empty", ""},
		{"Overlong", strings.Repeat("n", fleetstate.MaxSessionNameLen+1)},
		{"InvalidUTF8", "run \xff"},
		{"Newline", "run\nforged-line"},
		{"CarriageReturn", "run\r"},
		{"NUL", "run\x00"},
		{"Tab", "a\tb"},
		{"Escape", "\x1b[2J"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, sess := setupSession(t, mk, nil)
			unchanged(t, st, func() {
				got, err := st.NewSession(tc.value)
				wantErr(t, st, err, fleetstate.CodeInvalidSessionName)
				if got != (fleetstate.Session{}) {
					t.Fatalf("NewSession that failed returned %v; want the zero Session", got)
				}
			})
			if cur, err := st.CurrentSession(); err != nil || cur != sess {
				t.Fatalf("CurrentSession() after a refused NewSession = %v, %v; want %v", cur, err, sess)
			}
		})
	}
	t.Run("Limit", func(t *testing.T) {
		st := setup(t, mk, nil)
		name := strings.Repeat("n", fleetstate.MaxSessionNameLen)
		if got := newSession(t, st, name); got.Name != name {
			t.Fatalf("NewSession of %d bytes: Name = %q", len(name), got.Name)
		}
	})
}

func testContentTooLarge(t *testing.T, mk storeMaker) {
	const limit = 16
	st, _ := setupSession(t, mk, &fleetstate.Options{MaxContentSize: limit})
	put(t, st, "scout", "at-limit.md", strings.Repeat("x", limit), false)
	existing := put(t, st, "scout", "existing.md", "old", false)
	tests := []struct {
		name      string
		file      string
		overwrite bool
	}{
		{"New", "new.md", false},
		{"NewNested", "deep/new.md", false},
		{"Overwrite", "existing.md", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			unchanged(t, st, func() {
				_, err := st.Put("scout", tc.file, []byte(strings.Repeat("x", limit+1)), tc.overwrite)
				wantErr(t, st, err, fleetstate.CodeContentTooLarge)
			})
		})
	}
	if got := get(t, st, existing); got != "old" {
		t.Fatalf("Get after a refused overwrite = %q; want %q", got, "old")
	}

	t.Run("DefaultLimit", func(t *testing.T) {
		st, _ := setupSession(t, mk, nil)
		big := make([]byte, fleetstate.DefaultMaxContentSize+1)
		unchanged(t, st, func() {
			_, err := st.Put("scout", "big.bin", big, false)
			wantErr(t, st, err, fleetstate.CodeContentTooLarge)
		})
		id, err := st.Put("scout", "big.bin", big[:fleetstate.DefaultMaxContentSize], false)
		if err != nil {
			t.Fatalf("Put of exactly DefaultMaxContentSize bytes: %v", err)
		}
		if data, err := st.Get(id); err != nil || len(data) != fleetstate.DefaultMaxContentSize {
			t.Fatalf("Get = %d bytes, %v; want %d bytes", len(data), err, fleetstate.DefaultMaxContentSize)
		}
	})
}

func testPathConflict(t *testing.T, mk storeMaker) {
	tests := []struct {
		name     string
		existing string
		file     string
	}{
		{"FolderIsFile", "a", "a/b"},
		{"DeepFolderIsFile", "a/b", "a/b/c/d"},
		{"NameIsFolder", "a/b", "a"},
		{"NameIsDeepFolder", "a/b/c", "a/b"},
	}
	for _, tc := range tests {
		for _, overwrite := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/overwrite=%v", tc.name, overwrite), func(t *testing.T) {
				st, _ := setupSession(t, mk, nil)
				id := put(t, st, "scout", tc.existing, "keep me", false)
				unchanged(t, st, func() {
					_, err := st.Put("scout", tc.file, []byte("x"), overwrite)
					wantErr(t, st, err, fleetstate.CodePathConflict)
				})
				if got := get(t, st, id); got != "keep me" {
					t.Fatalf("Get after a refused put = %q; want %q", got, "keep me")
				}
			})
		}
	}
}

func testGitIgnore(t *testing.T, mk storeMaker) {
	const entry = "/sub/.ai-fleet-state/\n"
	tests := []struct {
		name   string
		setup  map[string]string // files to create below the repository; "" marks a folder
		opts   *fleetstate.Options
		opens  int
		want   map[string]string // file -> content; "-" means must not exist
		wantGI int               // .gitignore files in the whole tree
	}{
		{
			name:  "Adds",
			setup: map[string]string{".git/HEAD": "ref: refs/heads/main\n"},
			opens: 1,
			want:  map[string]string{".gitignore": entry},
		},
		{
			name:  "OnceWhenOpenedTwice",
			setup: map[string]string{".git/HEAD": "x"},
			opens: 3,
			want:  map[string]string{".gitignore": entry},
		},
		{
			name:  "AppendsAfterLineWithoutNewline",
			setup: map[string]string{".git/HEAD": "x", ".gitignore": "node_modules"},
			opens: 2,
			want:  map[string]string{".gitignore": "node_modules\n" + entry},
		},
		{
			name:  "AppendsAfterNewline",
			setup: map[string]string{".git/HEAD": "x", ".gitignore": "*.log\n"},
			opens: 1,
			want:  map[string]string{".gitignore": "*.log\n" + entry},
		},
		{
			name:  "KnowsExistingEntry",
			setup: map[string]string{".git/HEAD": "x", ".gitignore": "*.log\nsub/.ai-fleet-state\n"},
			opens: 2,
			want:  map[string]string{".gitignore": "*.log\nsub/.ai-fleet-state\n"},
		},
		{
			name:  "GitFileOfWorktree",
			setup: map[string]string{".git": "gitdir: /elsewhere\n"},
			opens: 1,
			want:  map[string]string{".gitignore": entry},
		},
		{
			name:  "NearestWorkTree",
			setup: map[string]string{".git/HEAD": "x", "sub/.git/HEAD": "x"},
			opens: 1,
			want:  map[string]string{".gitignore": "-", "sub/.gitignore": "/.ai-fleet-state/\n"},
		},
		{
			name:  "NoGitIgnoreOption",
			setup: map[string]string{".git/HEAD": "x"},
			opts:  &fleetstate.Options{NoGitIgnore: true},
			opens: 2,
			want:  map[string]string{".gitignore": "-"},
		},
		{
			name:  "NoGitIgnoreKeepsFile",
			setup: map[string]string{".git/HEAD": "x", ".gitignore": "*.log"},
			opts:  &fleetstate.Options{NoGitIgnore: true},
			opens: 1,
			want:  map[string]string{".gitignore": "*.log"},
		},
		{
			name:  "NotInWorkTree",
			setup: map[string]string{"README": "no .git here"},
			opens: 2,
			want:  map[string]string{".gitignore": "-", "sub/.gitignore": "-"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := mk.fs(t)
			repo := filepath.Join(filepath.Dir(dir), "repo")
			for rel, content := range tc.setup {
				p := filepath.Join(repo, filepath.FromSlash(rel))
				if err := fsys.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := afero.WriteFile(fsys, p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stateDir := filepath.Join(repo, "sub", ".ai-fleet-state")
			for range tc.opens {
				open(t, fsys, stateDir, tc.opts)
			}
			for rel, want := range tc.want {
				p := filepath.Join(repo, filepath.FromSlash(rel))
				data, err := afero.ReadFile(fsys, p)
				switch {
				case want == "-" && err == nil:
					t.Errorf("%s = %q; want no such file", rel, data)
				case want == "-" && !errors.Is(err, fs.ErrNotExist):
					t.Errorf("reading %s: %v", rel, err)
				case want != "-" && (err != nil || string(data) != want):
					t.Errorf("%s = %q, %v; want %q", rel, data, err, want)
				}
			}
			// Nothing else anywhere got a .gitignore.
			for p := range snapshot(t, fsys, filepath.Dir(dir)) {
				rel := strings.TrimPrefix(p, "repo/")
				if filepath.Base(p) == ".gitignore" {
					if _, ok := tc.want[rel]; !ok {
						t.Errorf("unexpected .gitignore at %s", p)
					}
				}
			}
		})
	}
}

func testCrashLeftovers(t *testing.T, mk storeMaker) {
	st, sess := setupSession(t, mk, nil)
	put(t, st, "scout", "notes.md", "stored", false)
	put(t, st, "scout", "nested/plan.md", "stored", false)
	agentDir := sess.ID + "/scout/"
	old := time.Now().Add(-11 * time.Minute)
	recent := time.Now().Add(-9 * time.Minute)
	leftovers := []struct {
		rel       string
		mtime     time.Time // zero: now
		wantSwept bool
	}{
		{".fleetstate-tmp-1234567", time.Time{}, false},
		{".fleetstate-tmp-recent", recent, false},
		{".fleetstate-tmp-2345678", old, true},
		{"nested/.fleetstate-tmp-3456789", old, true},
	}
	for _, l := range leftovers {
		writeRaw(t, st, agentDir+l.rel, "torn half of a wri")
		if !l.mtime.IsZero() {
			if err := st.Fs().Chtimes(filepath.Join(st.Dir(), filepath.FromSlash(agentDir+l.rel)), l.mtime, l.mtime); err != nil {
				t.Fatalf("Chtimes: %v", err)
			}
		}
	}
	// A folder with the prefix is not a leftover of a write: List skips it
	// but does not remove it, nor anything in it.
	writeRaw(t, st, agentDir+".fleetstate-tmp-folder/inside.md", "x")

	// Get never reads a leftover: its name is not a file name.
	for _, l := range leftovers {
		_, err := fleetstate.NewFileID(sess.ID, "scout", l.rel)
		wantErr(t, st, err, fleetstate.CodeInvalidFileName)
		_, err = fleetstate.ParseFileID("fsm::file::" + sess.ID + "::scout::" + l.rel)
		wantErr(t, st, err, fleetstate.CodeCanOnlyRetrieveFiles)
	}

	files, err := st.List("", "")
	if err != nil {
		t.Fatalf("List error: %v", err)
	}
	if got, want := idStrings(files), []string{"scout/nested/plan.md", "scout/notes.md"}; !slices.Equal(got, want) {
		t.Fatalf("List = %q; want %q", got, want)
	}
	for _, l := range leftovers {
		p := filepath.Join(st.Dir(), filepath.FromSlash(agentDir+l.rel))
		if got := !exists(t, st.Fs(), p); got != l.wantSwept {
			t.Errorf("%s removed by List: %v; want %v", l.rel, got, l.wantSwept)
		}
	}
	if !exists(t, st.Fs(), filepath.Join(st.Dir(), filepath.FromSlash(agentDir+".fleetstate-tmp-folder/inside.md"))) {
		t.Errorf("List removed a folder with the temporary prefix; want it kept")
	}
	// Stored files are intact and still readable.
	for _, name := range []string{"notes.md", "nested/plan.md"} {
		if got := get(t, st, fileID(t, sess.ID, "scout", name)); got != "stored" {
			t.Errorf("Get(%s) = %q; want %q", name, got, "stored")
		}
	}
	// The list of one agent sweeps too.
	writeRaw(t, st, agentDir+".fleetstate-tmp-later", "x")
	if err := st.Fs().Chtimes(filepath.Join(st.Dir(), filepath.FromSlash(agentDir+".fleetstate-tmp-later")), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := st.List(sess.ID, "scout"); err != nil {
		t.Fatalf("List(agent) error: %v", err)
	}
	if exists(t, st.Fs(), filepath.Join(st.Dir(), filepath.FromSlash(agentDir+".fleetstate-tmp-later"))) {
		t.Errorf("List(session, agent) kept a stale leftover; want it removed")
	}
}

// testConcurrentCreate races goroutines that put one new name without
// overwrite: exactly one wins, the others get ERR_FILE_EXISTS, and the file
// holds the winner's content.
func testConcurrentCreate(t *testing.T, mk storeMaker) {
	const writers, rounds = 8, 10
	st, _ := setupSession(t, mk, nil)
	for r := range rounds {
		name := fmt.Sprintf("claims/claim-%d.txt", r)
		start := make(chan struct{})
		errs := make([]error, writers)
		ids := make([]fleetstate.FileID, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				ids[i], errs[i] = st.Put("racer", name, []byte("writer "+strconv.Itoa(i)), false)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both created %s; want one", r, winner, i, name)
				}
				winner = i
				continue
			}
			wantErr(t, st, err, fleetstate.CodeFileExists)
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %s; want one", r, name)
		}
		if got, want := get(t, st, ids[winner]), "writer "+strconv.Itoa(winner); got != want {
			t.Fatalf("round %d: content = %q; want the winner's %q", r, got, want)
		}
	}
	files, err := st.List("", "racer")
	if err != nil || len(files) != rounds {
		t.Fatalf("List = %d files, %v; want %d (no temporary files)", len(files), err, rounds)
	}
	if mk.disk() {
		assertNoTempFiles(t, st)
	}
}

func assertNoTempFiles(t tb, st *fleetstate.Store) {
	t.Helper()
	for p := range snapshot(t, st.Fs(), st.Dir()) {
		if strings.HasPrefix(filepath.Base(p), ".fleetstate-tmp-") {
			t.Fatalf("temporary file %s left behind", p)
		}
	}
}

// testConcurrentOverwrite has writers replace one file with full payloads
// while readers read it: every read is exactly one of the payloads.
func testConcurrentOverwrite(t *testing.T, mk storeMaker) {
	const writers, readers, writes, size = 4, 4, 25, 64 << 10
	st, _ := setupSession(t, mk, nil)
	payloads := make([][]byte, writers+1)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte('A' + i)}, size+i) // content and length differ
	}
	id := put(t, st, "scout", "shared/state.bin", string(payloads[writers]), false)

	var wwg, rwg sync.WaitGroup
	done := make(chan struct{})
	var mu sync.Mutex
	var failures []string
	reads := make([]int, readers)
	fail := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, msg)
	}
	for r := range readers {
		rwg.Go(func() {
			for {
				select {
				case <-done:
					if reads[r] > 0 {
						return
					}
				default:
				}
				data, err := st.Get(id)
				if err != nil {
					fail(fmt.Sprintf("reader %d: Get error: %v", r, err))
					return
				}
				if !slices.ContainsFunc(payloads, func(p []byte) bool { return bytes.Equal(p, data) }) {
					fail(fmt.Sprintf("reader %d: torn read of %d bytes starting %q", r, len(data), clip(string(data))))
					return
				}
				reads[r]++
			}
		})
	}
	for w := range writers {
		wwg.Go(func() {
			for range writes {
				if _, err := st.Put("scout", "shared/state.bin", payloads[w], true); err != nil {
					fail(fmt.Sprintf("writer %d: Put error: %v", w, err))
					return
				}
			}
		})
	}
	wwg.Wait()
	close(done)
	rwg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if mk.disk() {
		assertNoTempFiles(t, st)
	}
}

// testConcurrentSessions starts sessions from many goroutines: the archive
// gets exactly one whole line per replaced session.
func testConcurrentSessions(t *testing.T, mk storeMaker) {
	const workers, each = 8, 4
	st, first := setupSession(t, mk, nil)
	created := make([][]fleetstate.Session, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for k := range each {
				sess, err := st.NewSession(fmt.Sprintf("w%d-%d", w, k))
				if err != nil {
					t.Errorf("NewSession: %v", err)
					return
				}
				created[w] = append(created[w], sess)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	checkSessionLog(t, st, first, created, workers*each)
}

// checkSessionLog checks previous_run_log.txt and current_run.txt after
// concurrent NewSession calls that followed session first: the log holds
// first and every created session but the current one, each once, as a
// whole "ID:::NAME" line, each creator's sessions in its order.
func checkSessionLog(t *testing.T, st *fleetstate.Store, first fleetstate.Session, created [][]fleetstate.Session, total int) {
	t.Helper()
	byID := map[string]fleetstate.Session{first.ID: first}
	order := map[string][2]int{} // ID -> creator, index
	for w, c := range created {
		for k, s := range c {
			byID[s.ID] = s
			order[s.ID] = [2]int{w, k}
		}
	}
	if len(byID) != total+1 {
		t.Fatalf("got %d distinct sessions; want %d", len(byID), total+1)
	}
	cur, err := st.CurrentSession()
	if err != nil {
		t.Fatalf("CurrentSession() error: %v", err)
	}
	if want, ok := byID[cur.ID]; !ok || want != cur {
		t.Fatalf("current session %v is none of the created ones", cur)
	}
	if got, want := currentRun(t, st), cur.String(); got != want {
		t.Fatalf("current_run.txt = %q; want %q", got, want)
	}
	log, _ := runLog(t, st)
	if !strings.HasSuffix(log, "\n") {
		t.Fatalf("previous_run_log.txt does not end with a newline: %q", clip(log))
	}
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	if len(lines) != total {
		t.Fatalf("previous_run_log.txt has %d lines; want %d", len(lines), total)
	}
	seen := map[string]bool{cur.ID: true}
	last := make([]int, len(created))
	for i := range last {
		last[i] = -1
	}
	for i, line := range lines {
		id, name, ok := strings.Cut(line, ":::")
		s, known := byID[id]
		if !ok || !known || s.Name != name {
			t.Fatalf("line %d of previous_run_log.txt = %q; want ID:::NAME of a created session", i+1, line)
		}
		if seen[id] {
			t.Fatalf("session %s archived twice or archived while current", id)
		}
		seen[id] = true
		if o, ok := order[id]; ok {
			if o[1] <= last[o[0]] {
				t.Fatalf("sessions of creator %d archived out of order", o[0])
			}
			last[o[0]] = o[1]
		}
	}
	if lines[0] != first.String() {
		t.Fatalf("first archived session = %q; want %q", lines[0], first.String())
	}
}
