package fleetstate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/google/uuid"
	"github.com/spf13/afero"
)

// tb is what the helpers need of a test: *testing.T and *rapid.T have it.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// newFS gives one test a fresh file system and the path, on it, of a state
// directory that does not exist yet.
type newFS func(t *testing.T) (fsys afero.Fs, dir string)

// storeMaker opens the stores of the tests of a state directory, each on a
// file system of its own from fs.
type storeMaker struct {
	fs newFS
}

// memFS is the in-memory file system the tests use by default.
func memFS(*testing.T) (afero.Fs, string) {
	return afero.NewMemMapFs(), "/home/fleet/state-dir"
}

// TestStore runs the store contract (package fleetstatetest) on state
// directories of afero.NewMemMapFs; TestStoreOS runs it on the disk under
// t.TempDir, and the tests of package fleetnats on JetStream.
func TestStore(t *testing.T) { fleetstatetest.TestStateDir(t, memFS) }

// ---- helpers ---------------------------------------------------------------

func open(t tb, fsys afero.Fs, dir string, opts *fleetstate.Options) *fleetstate.Store {
	t.Helper()
	st, err := fleetstate.Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("Open(%q) error: %v; want none", dir, err)
	}
	return st
}

// setup opens a store on a fresh state directory made by mk.
func setup(t *testing.T, mk storeMaker, opts *fleetstate.Options) *fleetstate.Store {
	t.Helper()
	fsys, dir := mk.fs(t)
	return open(t, fsys, dir, opts)
}

// reopen opens another store on the state directory of st, with opts.
func reopen(t tb, st *fleetstate.Store, opts *fleetstate.Options) *fleetstate.Store {
	t.Helper()
	return open(t, st.Fs(), st.Dir(), opts)
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
// system of st: outside the state directory as well as inside it.
func unchanged(t tb, st *fleetstate.Store, call func()) {
	t.Helper()
	root := filepath.Dir(st.Dir())
	before := snapshot(t, st.Fs(), root)
	call()
	if d := treeDiff(before, snapshot(t, st.Fs(), root)); d != "" {
		t.Fatalf("got the file tree changed by a failed call (%s); want it unchanged", d)
	}
}

// currentRun returns the current session as current_run.txt holds it.
func currentRun(t tb, st *fleetstate.Store) string {
	t.Helper()
	return readFile(t, st, "current_run.txt")
}

// runLog returns previous_run_log.txt, and whether it exists.
func runLog(t tb, st *fleetstate.Store) (string, bool) {
	t.Helper()
	if !exists(t, st.Fs(), filepath.Join(st.Dir(), "previous_run_log.txt")) {
		return "", false
	}
	return readFile(t, st, "previous_run_log.txt"), true
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

func assertNoTempFiles(t tb, st *fleetstate.Store) {
	t.Helper()
	for p := range snapshot(t, st.Fs(), st.Dir()) {
		if strings.HasPrefix(filepath.Base(p), ".fleetstate-tmp-") {
			t.Fatalf("temporary file %s left behind", p)
		}
	}
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

// ---- independent of the file system -----------------------------------------

func TestOpenDefaults(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		dir     string
		wantDir string
	}{
		{"DefaultRelative", "", "", fleetstate.DefaultDirName},
		{"Env", "/custom/state", "", "/custom/state"},
		{"EnvRelative", "rel/state", "", "rel/state"},
		{"ExplicitBeatsEnv", "/custom/state", "/explicit", "/explicit"},
		{"Cleaned", "", "/a/b/../state/", "/a/state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(fleetstate.EnvStateDir, tc.env)
			wantDefault := tc.env
			if wantDefault == "" {
				wantDefault = ".ai-fleet-state"
			}
			if got := fleetstate.DefaultDir(); got != wantDefault {
				t.Fatalf("DefaultDir() = %q; want %q", got, wantDefault)
			}
			fsys := afero.NewMemMapFs()
			st := open(t, fsys, tc.dir, nil)
			if got := st.Dir(); got != tc.wantDir {
				t.Fatalf("Dir() = %q; want %q", got, tc.wantDir)
			}
			if fi, err := fsys.Stat(tc.wantDir); err != nil || !fi.IsDir() {
				t.Fatalf("Stat(%q) = %v, %v; want a directory", tc.wantDir, fi, err)
			}
			newSession(t, st, "works")
			id := put(t, st, "a", "b.md", "c", false)
			if got := get(t, st, id); got != "c" {
				t.Fatalf("Get = %q; want %q", got, "c")
			}
		})
	}
	if fleetstate.DefaultDirName != ".ai-fleet-state" || fleetstate.EnvStateDir != "FLEET_STATE_DIRECTORY" {
		t.Fatalf("DefaultDirName, EnvStateDir = %q, %q; want the spec's names", fleetstate.DefaultDirName, fleetstate.EnvStateDir)
	}
}

func TestErrors(t *testing.T) {
	wire := []struct {
		code     fleetstate.Code
		want     string
		sentinel error
	}{
		{fleetstate.CodeNoActiveSession, "ERR_NO_ACTIVE_SESSION", fleetstate.ErrNoActiveSession},
		{fleetstate.CodeFileExists, "ERR_FILE_EXISTS", fleetstate.ErrFileExists},
		{fleetstate.CodeCanOnlyRetrieveFiles, "ERR_CAN_ONLY_RETRIEVE_FILES", fleetstate.ErrCanOnlyRetrieveFiles},
		{fleetstate.CodeSessionNotValid, "ERR_SESSION_NOT_VALID", fleetstate.ErrSessionNotValid},
		{fleetstate.CodeAgentNotValid, "ERR_AGENT_NOT_VALID", fleetstate.ErrAgentNotValid},
		{fleetstate.CodeFileNotFound, "ERR_FILE_NOT_FOUND", fleetstate.ErrFileNotFound},
		{fleetstate.CodeInvalidAgentName, "ERR_INVALID_AGENT_NAME", fleetstate.ErrInvalidAgentName},
		{fleetstate.CodeInvalidFileName, "ERR_INVALID_FILE_NAME", fleetstate.ErrInvalidFileName},
		{fleetstate.CodeInvalidSessionName, "ERR_INVALID_SESSION_NAME", fleetstate.ErrInvalidSessionName},
		{fleetstate.CodeContentTooLarge, "ERR_CONTENT_TOO_LARGE", fleetstate.ErrContentTooLarge},
		{fleetstate.CodePathConflict, "ERR_PATH_CONFLICT", fleetstate.ErrPathConflict},
		{fleetstate.CodePathEscape, "ERR_PATH_ESCAPE", fleetstate.ErrPathEscape},
		{fleetstate.CodeInternal, "ERR_INTERNAL", fleetstate.ErrInternal},
	}
	if len(wire) != len(sentinels) {
		t.Fatalf("wire table has %d codes; the sentinel table %d", len(wire), len(sentinels))
	}
	for _, tc := range wire {
		t.Run(tc.want, func(t *testing.T) {
			if string(tc.code) != tc.want {
				t.Fatalf("code = %q; want wire spelling %q", tc.code, tc.want)
			}
			err := &fleetstate.Error{Code: tc.code, Op: "put", Err: io.ErrUnexpectedEOF}
			wrapped := fmt.Errorf("saving notes: %w", err)
			twice := fmt.Errorf("handler: %w", errors.Join(errors.New("other"), wrapped))
			for _, e := range []error{err, wrapped, twice} {
				if !errors.Is(e, tc.sentinel) {
					t.Errorf("errors.Is(%v, sentinel) = false; want true", e)
				}
				if got := fleetstate.CodeOf(e); got != tc.code {
					t.Errorf("CodeOf(%v) = %q; want %q", e, got, tc.code)
				}
				var as *fleetstate.Error
				if !errors.As(e, &as) || as != err {
					t.Errorf("errors.As(%v) = %v; want the *Error inside", e, as)
				}
				if !errors.Is(e, io.ErrUnexpectedEOF) {
					t.Errorf("errors.Is(%v, io.ErrUnexpectedEOF) = false; want the cause reachable", e)
				}
				for _, other := range wire {
					if other.code != tc.code && errors.Is(e, other.sentinel) {
						t.Errorf("errors.Is(%v, sentinel of %s) = true; want false", e, other.code)
					}
				}
			}
			if got := errors.Unwrap(err); got != io.ErrUnexpectedEOF {
				t.Errorf("Unwrap() = %v; want io.ErrUnexpectedEOF", got)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "fleetstate: put: ") || !strings.HasSuffix(msg, ": unexpected EOF") {
				t.Errorf("Error() = %q; want \"fleetstate: put: …: unexpected EOF\"", msg)
			}
			if msg := tc.sentinel.Error(); !strings.HasPrefix(msg, "fleetstate: ") {
				t.Errorf("sentinel Error() = %q; want the package prefix", msg)
			}
		})
	}

	t.Run("CodeOf", func(t *testing.T) {
		tests := []struct {
			name string
			err  error
			want fleetstate.Code
		}{
			{"Nil", nil, ""},
			{"Plain", errors.New("disk on fire"), fleetstate.CodeInternal},
			{"WrappedPlain", fmt.Errorf("x: %w", io.EOF), fleetstate.CodeInternal},
			{"Outermost", fmt.Errorf("x: %w", &fleetstate.Error{Code: fleetstate.CodeFileExists, Err: &fleetstate.Error{Code: fleetstate.CodeInternal}}), fleetstate.CodeFileExists},
			{"NilCause", &fleetstate.Error{Code: fleetstate.CodeAgentNotValid}, fleetstate.CodeAgentNotValid},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if got := fleetstate.CodeOf(tc.err); got != tc.want {
					t.Fatalf("CodeOf(%v) = %q; want %q", tc.err, got, tc.want)
				}
			})
		}
	})

	t.Run("FromStore", func(t *testing.T) {
		st := open(t, afero.NewMemMapFs(), "/state", nil)
		newSession(t, st, "s")
		put(t, st, "scout", "a.md", "x", false)
		_, err := st.Put("scout", "a.md", []byte("y"), false)
		wrapped := fmt.Errorf("tool put: %w", err)
		var e *fleetstate.Error
		if !errors.As(wrapped, &e) || e.Code != fleetstate.CodeFileExists || e.Op != "put" {
			t.Fatalf("errors.As(%v) = %+v; want Code ERR_FILE_EXISTS, Op \"put\"", wrapped, e)
		}
		if !errors.Is(wrapped, fleetstate.ErrFileExists) || errors.Is(wrapped, fleetstate.ErrFileNotFound) {
			t.Fatalf("errors.Is on %v matched the wrong sentinels", wrapped)
		}
		_, err = fleetstate.ParseFileID("not an id")
		if !strings.Contains(err.Error(), `"not an id"`) {
			t.Fatalf("ParseFileID error %q does not quote its input", err)
		}
		// Hostile input gives a bounded message.
		_, err = fleetstate.ParseFileID(strings.Repeat("x", 1<<20))
		if n := len(err.Error()); n > 512 {
			t.Fatalf("message for 1 MiB of input is %d bytes; want it bounded", n)
		}
	})
}

func TestFileID(t *testing.T) {
	const session = "550e8400-e29b-41d4-a716-446655440000"

	t.Run("ZeroValue", func(t *testing.T) {
		var id fleetstate.FileID
		if id.IsValid() || id.String() != "" || id.Session() != "" || id.Agent() != "" || id.Name() != "" {
			t.Fatalf("zero FileID: IsValid=%v String=%q; want false and \"\"", id.IsValid(), id.String())
		}
		text, err := id.MarshalText()
		if err != nil || len(text) != 0 {
			t.Fatalf("zero MarshalText() = %q, %v; want empty", text, err)
		}
		back := fileID(t, session, "a", "b")
		if err := back.UnmarshalText(nil); err != nil || back != id {
			t.Fatalf("UnmarshalText(empty) = %v, %v; want the zero FileID", back, err)
		}
		data, err := json.Marshal(struct{ ID fleetstate.FileID }{})
		if err != nil || string(data) != `{"ID":""}` {
			t.Fatalf("json of a zero FileID = %s, %v; want {\"ID\":\"\"}", data, err)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		tests := []struct{ agent, name string }{
			{"scout", "notes.md"},
			{"scout", "nested/dir/code.ts"},
			{"scout", "a::b"},
			{"scout", "::"},
			{"scout", "::leading"},
			{"scout", "trailing::"},
			{"scout", ":::"},
			{"scout", "x/::/y::z/::"},
			{":agent", "::name"},
			{"a:b", ":c"},
			{"エージェント", "ファイル/名前.md"},
			{"scout", "fsm::file::" + session + "::nested::id"},
		}
		for _, tc := range tests {
			t.Run(tc.agent+"/"+tc.name, func(t *testing.T) {
				id := fileID(t, session, tc.agent, tc.name)
				want := "fsm::file::" + session + "::" + tc.agent + "::" + tc.name
				if got := id.String(); got != want {
					t.Fatalf("String() = %q; want %q", got, want)
				}
				parsed, err := fleetstate.ParseFileID(want)
				if err != nil || parsed != id {
					t.Fatalf("ParseFileID(%q) = %#v, %v; want %#v", want, parsed, err, id)
				}
				if parsed.Session() != session || parsed.Agent() != tc.agent || parsed.Name() != tc.name {
					t.Fatalf("parts = %q %q %q; want %q %q %q", parsed.Session(), parsed.Agent(), parsed.Name(), session, tc.agent, tc.name)
				}
				text, err := id.MarshalText()
				if err != nil || string(text) != want {
					t.Fatalf("MarshalText() = %q, %v; want %q", text, err, want)
				}
				var back fleetstate.FileID
				if err := back.UnmarshalText(text); err != nil || back != id {
					t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, back, err, id)
				}
				m := map[fleetstate.FileID]int{id: 1}
				if m[parsed] != 1 {
					t.Fatalf("FileID is not usable as a comparable map key")
				}
			})
		}
	})

	t.Run("JSON", func(t *testing.T) {
		type record struct {
			ID    fleetstate.FileID   `json:"id"`
			Refs  []fleetstate.FileID `json:"refs"`
			Label string              `json:"label"`
		}
		a := fileID(t, session, "scout", "a::b.md")
		b := fileID(t, session, "lead", "plan/x.md")
		in := record{ID: a, Refs: []fleetstate.FileID{b, {}}, Label: "x"}
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		want := `{"id":"` + a.String() + `","refs":["` + b.String() + `",""],"label":"x"}`
		if string(data) != want {
			t.Fatalf("json.Marshal = %s; want %s", data, want)
		}
		var out record
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("json.Unmarshal: %v", err)
		}
		if out.ID != in.ID || !slices.Equal(out.Refs, in.Refs) || out.Label != in.Label {
			t.Fatalf("json round trip = %+v; want %+v", out, in)
		}
		err = json.Unmarshal([]byte(`{"id":"fsm::file::nope"}`), &out)
		if got := fleetstate.CodeOf(err); got != fleetstate.CodeCanOnlyRetrieveFiles {
			t.Fatalf("json.Unmarshal of a bad ID: code %q (%v); want %s", got, err, fleetstate.CodeCanOnlyRetrieveFiles)
		}
	})

	t.Run("UnmarshalTextErrorKeepsValue", func(t *testing.T) {
		id := fileID(t, session, "scout", "x")
		err := id.UnmarshalText([]byte("fsm::file::bad"))
		wantErr(t, nil, err, fleetstate.CodeCanOnlyRetrieveFiles)
		if id != fileID(t, session, "scout", "x") {
			t.Fatalf("UnmarshalText that failed changed the ID to %v", id)
		}
	})

	t.Run("ParseErrors", func(t *testing.T) {
		tests := []struct{ name, in string }{
			{"Empty", ""},
			{"PrefixOnly", "fsm::file::"},
			{"SessionOnly", "fsm::file::" + session},
			{"NoFileName", "fsm::file::" + session + "::scout"},
			{"EmptyFileName", "fsm::file::" + session + "::scout::"},
			{"EmptyAgent", "fsm::file::" + session + "::::x.md"},
			{"EmptySession", "fsm::file::::scout::x.md"},
			{"UpperCaseUUID", "fsm::file::" + strings.ToUpper(session) + "::scout::x.md"},
			{"MixedCaseUUID", "fsm::file::550E8400-e29b-41d4-a716-446655440000::scout::x.md"},
			{"UUIDWithoutHyphens", "fsm::file::550e8400e29b41d4a716446655440000::scout::x.md"},
			{"UUIDInBraces", "fsm::file::{" + session + "}::scout::x.md"},
			{"URNUUID", "fsm::file::urn:uuid:" + session + "::scout::x.md"},
			{"NotAUUID", "fsm::file::my-session::scout::x.md"},
			{"UpperCasePrefix", "FSM::FILE::" + session + "::scout::x.md"},
			{"SingleColons", "fsm:file:" + session + ":scout:x.md"},
			{"LeadingSpace", " fsm::file::" + session + "::scout::x.md"},
			{"OtherKind", "fsm::dir::" + session + "::scout::x.md"},
			{"AgentDotDot", "fsm::file::" + session + "::..::x.md"},
			{"AgentBackslash", "fsm::file::" + session + "::a\\b::x.md"},
			{"AgentControl", "fsm::file::" + session + "::\x1b[31m::x.md"},
			{"NameEscape", "fsm::file::" + session + "::scout::../../etc/passwd"},
			{"NameAbsolute", "fsm::file::" + session + "::scout::/etc/passwd"},
			{"NameEmptySegment", "fsm::file::" + session + "::scout::a//b"},
			{"NameTrailingSlash", "fsm::file::" + session + "::scout::a/"},
			{"NameBackslash", "fsm::file::" + session + "::scout::a\\b"},
			{"NameNUL", "fsm::file::" + session + "::scout::a\x00"},
			{"NameInvalidUTF8", "fsm::file::" + session + "::scout::\xff"},
			{"NameTempPrefix", "fsm::file::" + session + "::scout::.fleetstate-tmp-1"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				id, err := fleetstate.ParseFileID(tc.in)
				wantErr(t, nil, err, fleetstate.CodeCanOnlyRetrieveFiles)
				if id != (fleetstate.FileID{}) {
					t.Fatalf("ParseFileID(%q) returned %v with its error; want the zero FileID", tc.in, id)
				}
				if q := strconv.Quote(tc.in); len(q) < 60 && !strings.Contains(err.Error(), q) {
					t.Fatalf("error %q does not quote the input %s", err, q)
				}
			})
		}
	})

	t.Run("NewFileIDErrors", func(t *testing.T) {
		tests := []struct {
			name, session, agent, file string
			want                       fleetstate.Code
		}{
			{"BadSession", "nope", "a", "b", fleetstate.CodeCanOnlyRetrieveFiles},
			{"UpperSession", strings.ToUpper(session), "a", "b", fleetstate.CodeCanOnlyRetrieveFiles},
			{"BadAgent", session, "a::b", "b", fleetstate.CodeInvalidAgentName},
			{"BadFile", session, "a", "../b", fleetstate.CodeInvalidFileName},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				id, err := fleetstate.NewFileID(tc.session, tc.agent, tc.file)
				wantErr(t, nil, err, tc.want)
				if id.IsValid() {
					t.Fatalf("NewFileID that failed returned a valid ID %v", id)
				}
			})
		}
	})
}
