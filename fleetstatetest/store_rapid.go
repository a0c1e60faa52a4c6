package fleetstatetest

import (
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"github.com/spf13/afero"
	"pgregory.net/rapid"
)

// genSessionID draws a session ID the store may have handed out.
var genSessionID = rapid.Custom(func(t *rapid.T) string {
	return uuid.UUID(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid")).String()
})

type fileKey struct{ session, agent, name string }

// storeMachine drives a store and a model of what it must hold.
type storeMachine struct {
	st *fleetstate.Store

	current  fleetstate.Session // zero: no current session
	files    map[fileKey]string // what every stored file holds
	log      string             // the run log, as previous_run_log.txt holds it
	sessions []string           // every session ID handed out, for gets and lists of old ones
}

var (
	smAgents       = []string{"alpha", "beta", "エー:ジェント"}
	smNames        = []string{"a", "a/b", "a/b/c", "b::c", "x.md", "d/e.md", "d/f.md", "::"}
	smSessionNames = []string{"s", "run 2", "a:::b", "名前"}
)

// TestStoreStateMachine drives stores from open, one per run, through
// random sequences of Put, Get, List, NewSession and Clean against a map
// model. After every step it compares the whole store with the model: the
// current session, the run log, and every file of every session; on a
// state directory, every file and folder below it, byte for byte as the
// layout has them.
//
// A store on a backend must show its run log (see [RunLogger]).
func TestStoreStateMachine(t *testing.T, open func(t *testing.T) *fleetstate.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &storeMachine{st: open(t), files: map[fileKey]string{}}
		rt.Repeat(map[string]func(*rapid.T){
			"put":         m.put,
			"get":         m.get,
			"getExisting": m.getExisting,
			"newSession":  m.newSession,
			"clean":       m.clean,
			"list":        m.list,
			"":            m.check,
		})
	})
}

func (m *storeMachine) hasFiles(session, agent string) bool {
	for k := range m.files {
		if k.session == session && (agent == "" || k.agent == agent) {
			return true
		}
	}
	return false
}

// conflicts reports whether name, in the agent's folder of session, needs
// a folder where a file is, or names a folder.
func (m *storeMachine) conflicts(session, agent, name string) bool {
	for k := range m.files {
		if k.session == session && k.agent == agent &&
			(strings.HasPrefix(name, k.name+"/") || strings.HasPrefix(k.name, name+"/")) {
			return true
		}
	}
	return false
}

func (m *storeMachine) drawSession(t *rapid.T) string {
	choices := append([]string{genSessionID.Draw(t, "unknownSession")}, m.sessions...)
	return rapid.SampledFrom(choices).Draw(t, "session")
}

func (m *storeMachine) put(t *rapid.T) {
	agent := rapid.SampledFrom(smAgents).Draw(t, "agent")
	name := rapid.SampledFrom(smNames).Draw(t, "name")
	content := string(rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(t, "content"))
	overwrite := rapid.Bool().Draw(t, "overwrite")

	key := fileKey{m.current.ID, agent, name}
	_, exists := m.files[key]
	var want fleetstate.Code
	switch {
	case m.current.ID == "":
		want = fleetstate.CodeNoActiveSession
	case m.conflicts(m.current.ID, agent, name):
		want = fleetstate.CodePathConflict
	case exists && !overwrite:
		want = fleetstate.CodeFileExists
	}
	id, err := m.st.Put(agent, name, []byte(content), overwrite)
	wantErr(t, m.st, err, want)
	if want != "" {
		return
	}
	if wantID := fileID(t, m.current.ID, agent, name); id != wantID {
		t.Fatalf("Put returned %v; want %v", id, wantID)
	}
	m.files[key] = content
}

func (m *storeMachine) getAndCheck(t *rapid.T, id fleetstate.FileID) {
	key := fileKey{id.Session(), id.Agent(), id.Name()}
	content, exists := m.files[key]
	var want fleetstate.Code
	switch {
	case !m.hasFiles(key.session, ""):
		want = fleetstate.CodeSessionNotValid
	case !m.hasFiles(key.session, key.agent):
		want = fleetstate.CodeAgentNotValid
	case !exists:
		want = fleetstate.CodeFileNotFound
	}
	data, err := m.st.Get(id)
	wantErr(t, m.st, err, want)
	if want == "" && string(data) != content {
		t.Fatalf("Get(%v) = %q; want %q", id, data, content)
	}
}

func (m *storeMachine) get(t *rapid.T) {
	session := m.drawSession(t)
	agent := rapid.SampledFrom(smAgents).Draw(t, "agent")
	name := rapid.SampledFrom(smNames).Draw(t, "name")
	m.getAndCheck(t, fileID(t, session, agent, name))
}

func (m *storeMachine) getExisting(t *rapid.T) {
	keys := slices.SortedFunc(maps.Keys(m.files), func(a, b fileKey) int {
		return strings.Compare(a.session+"\x00"+a.agent+"\x00"+a.name, b.session+"\x00"+b.agent+"\x00"+b.name)
	})
	if len(keys) == 0 {
		t.Skip("no files yet")
	}
	k := rapid.SampledFrom(keys).Draw(t, "file")
	m.getAndCheck(t, fileID(t, k.session, k.agent, k.name))
}

func (m *storeMachine) newSession(t *rapid.T) {
	name := rapid.SampledFrom(smSessionNames).Draw(t, "sessionName")
	sess, err := m.st.NewSession(name)
	if err != nil {
		t.Fatalf("NewSession(%q) error: %v", name, err)
	}
	if !isLowerUUID(sess.ID) || sess.Name != name || slices.Contains(m.sessions, sess.ID) {
		t.Fatalf("NewSession(%q) = %v; want a new lower-case UUID and the name", name, sess)
	}
	if m.current.ID != "" {
		m.log += m.current.String() + "\n"
	}
	m.current = sess
	m.sessions = append(m.sessions, sess.ID)
}

func (m *storeMachine) clean(t *rapid.T) {
	if err := m.st.Clean(); err != nil {
		t.Fatalf("Clean error: %v", err)
	}
	m.current, m.log = fleetstate.Session{}, ""
	clear(m.files)
}

func (m *storeMachine) list(t *rapid.T) {
	session := ""
	if rapid.Bool().Draw(t, "explicitSession") {
		session = m.drawSession(t)
	}
	agent := ""
	if rapid.Bool().Draw(t, "oneAgent") {
		agent = rapid.SampledFrom(smAgents).Draw(t, "agent")
	}
	files, err := m.st.List(session, agent)

	s := session
	if s == "" {
		if m.current.ID == "" {
			wantErr(t, m.st, err, fleetstate.CodeNoActiveSession)
			return
		}
		s = m.current.ID
	}
	if !m.hasFiles(s, "") && s != m.current.ID {
		wantErr(t, m.st, err, fleetstate.CodeSessionNotValid)
		return
	}
	wantErr(t, m.st, err, "")
	var want []string
	for k := range m.files {
		if k.session == s && (agent == "" || k.agent == agent) {
			want = append(want, k.agent+"/"+k.name)
		}
	}
	// List sorts by agent, then by name.
	slices.SortFunc(want, func(a, b string) int {
		aa, an, _ := strings.Cut(a, "/")
		ba, bn, _ := strings.Cut(b, "/")
		if c := strings.Compare(aa, ba); c != 0 {
			return c
		}
		return strings.Compare(an, bn)
	})
	if got := idStrings(files); !slices.Equal(got, want) {
		t.Fatalf("List(%q, %q) = %q; want %q", session, agent, got, want)
	}
	for _, f := range files {
		if f.ID.Session() != s {
			t.Fatalf("List(%q, %q) listed %v of another session", session, agent, f.ID)
		}
		if want := len(m.files[fileKey{s, f.ID.Agent(), f.ID.Name()}]); f.Size != int64(want) {
			t.Fatalf("Size of %v = %d; want %d", f.ID, f.Size, want)
		}
	}
}

// check compares the whole store with the model: the current session, the
// archive, and every file of every session (on a state directory, every
// file and folder).
func (m *storeMachine) check(t *rapid.T) {
	cur, err := m.st.CurrentSession()
	if m.current.ID == "" {
		wantErr(t, m.st, err, fleetstate.CodeNoActiveSession)
	} else if err != nil || cur != m.current {
		t.Fatalf("CurrentSession() = %v, %v; want %v", cur, err, m.current)
	}
	if m.st.Backend() != nil {
		m.checkBackend(t)
		return
	}

	want := map[string]string{} // path -> content; "/" marks a folder
	if m.current.ID != "" {
		want["current_run.txt"] = m.current.String()
	}
	if m.log != "" {
		want["previous_run_log.txt"] = m.log
	}
	for k, content := range m.files {
		p := k.session + "/" + k.agent + "/" + k.name
		want[p] = content
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			want[d] = "/"
		}
	}
	got := map[string]string{}
	fsys, root := m.st.Fs(), m.st.Dir()
	err = afero.Walk(fsys, root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case rel == ".":
		case rel == ".fleetstate":
			return filepath.SkipDir
		case fi.IsDir():
			got[rel] = "/"
		default:
			data, err := afero.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			got[rel] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the state directory: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("state directory differs from the model:\n%s", mapDiff(got, want))
	}
}

// checkBackend compares the run log and the files of a store on a backend
// with the model, through the store: every session's files, as List
// lists them and Get reads them.
func (m *storeMachine) checkBackend(t *rapid.T) {
	if log, _ := runLog(t, m.st); log != m.log {
		t.Fatalf("run log = %q; want %q", log, m.log)
	}
	want := map[string]string{}
	for k, content := range m.files {
		want[k.session+"/"+k.agent+"/"+k.name] = content
	}
	got := map[string]string{}
	for _, s := range m.sessions {
		files, err := m.st.List(s, "")
		if fleetstate.CodeOf(err) == fleetstate.CodeSessionNotValid {
			continue // no file, and not the current one
		}
		if err != nil {
			t.Fatalf("List(%s): %v", s, err)
		}
		for _, f := range files {
			data, err := m.st.Get(f.ID)
			if err != nil {
				t.Fatalf("Get(%v) of a listed file: %v", f.ID, err)
			}
			got[s+"/"+f.ID.Agent()+"/"+f.ID.Name()] = string(data)
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("store differs from the model:\n%s", mapDiff(got, want))
	}
}

func mapDiff(got, want map[string]string) string {
	var lines []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			lines = append(lines, fmt.Sprintf("missing %s", k))
		} else if g != w {
			lines = append(lines, fmt.Sprintf("%s = %q; want %q", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("unexpected %s", k))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
