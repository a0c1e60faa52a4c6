package fleetstate_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"github.com/spf13/afero"
	"pgregory.net/rapid"
)

// ---- generators of valid IDs -------------------------------------------------

var (
	genSessionID = rapid.Custom(func(t *rapid.T) string {
		return uuid.UUID(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid")).String()
	})

	// nameRune is a rune allowed in names: letters, digits, marks,
	// punctuation, symbols and spaces of every script, and often the
	// characters that make IDs hard: ':', '.', '-'.
	nameRune = rapid.OneOf(
		rapid.RuneFrom([]rune("ab019:.-_ ")),
		rapid.RuneFrom(nil, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs),
	).Filter(func(r rune) bool { return r != '/' && r != '\\' })

	// specialSegment holds segments that are valid but easy to get wrong.
	specialSegment = rapid.SampledFrom([]string{
		"::", ":::", "::::", ":", "...", ".x", "x.", ".fleetstate-tmp", "fleetstate-tmp-1",
		"fsm::file::", "日本語", "e\u0301", "\u200b", "\ufeff", "\U0001F600",
	})
)

// fill draws a valid segment of exactly n bytes: a short drawn string
// repeated, then padded.
func fill(t *rapid.T, label string, n int) string {
	base := rapid.StringOfN(nameRune, 1, 8, -1).Draw(t, label)
	var b strings.Builder
	for b.Len()+len(base) <= n {
		b.WriteString(base)
	}
	b.WriteString(strings.Repeat("a", n-b.Len()))
	return repair(b.String())
}

// segment draws a valid path segment of at most max bytes; sometimes
// exactly max bytes.
func segment(t *rapid.T, label string, max int) string {
	switch rapid.IntRange(0, 9).Draw(t, label+"Kind") {
	case 0:
		return fill(t, label, max)
	case 1, 2:
		return specialSegment.Draw(t, label)
	}
	return repair(rapid.StringOfN(nameRune, 1, 12, max).Draw(t, label))
}

// repair changes, without changing its length, a segment that the rules
// refuse although its runes are all allowed.
func repair(s string) string {
	switch {
	case s == ".":
		return "x"
	case s == "..":
		return "x."
	case strings.HasPrefix(s, ".fleetstate-tmp-"):
		return "x" + s[1:]
	}
	return s
}

var genAgent = rapid.Custom(func(t *rapid.T) string {
	s := segment(t, "agent", fleetstate.MaxAgentNameLen)
	for strings.Contains(s, "::") {
		s = strings.ReplaceAll(s, "::", ":x")
	}
	if strings.HasSuffix(s, ":") {
		s = s[:len(s)-1] + "x"
	}
	return s
})

var genFileName = rapid.Custom(func(t *rapid.T) string {
	if rapid.IntRange(0, 9).Draw(t, "maxName") == 0 {
		// Exactly MaxFileNameLen bytes, each segment but the last two at
		// MaxSegmentLen.
		max := fleetstate.MaxSegmentLen
		return strings.Join([]string{
			fill(t, "seg", max), fill(t, "seg", max), fill(t, "seg", max), fill(t, "seg", max-1), fill(t, "seg", 1),
		}, "/")
	}
	n := rapid.IntRange(1, 5).Draw(t, "segments")
	segs := make([]string, n)
	for i := range segs {
		segs[i] = segment(t, "seg", 64)
	}
	return strings.Join(segs, "/")
})

var genFileID = rapid.Custom(func(t *rapid.T) fleetstate.FileID {
	session, agent, name := genSessionID.Draw(t, "session"), genAgent.Draw(t, "agent"), genFileName.Draw(t, "name")
	id, err := fleetstate.NewFileID(session, agent, name)
	if err != nil {
		t.Fatalf("NewFileID(%q, %q, %q) error: %v; want none for valid parts", session, agent, name, err)
	}
	return id
})

func TestFileIDRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := genFileID.Draw(t, "id")
		s := id.String()
		got, err := fleetstate.ParseFileID(s)
		if err != nil {
			t.Fatalf("ParseFileID(%q) error: %v; want %#v", s, err, id)
		}
		if got != id {
			t.Fatalf("ParseFileID(%q) = %#v; want %#v", s, got, id)
		}
		if got.String() != s {
			t.Fatalf("String() after parse = %q; want %q", got.String(), s)
		}
		if err := fleetstate.ValidateAgentName(id.Agent()); err != nil {
			t.Fatalf("ValidateAgentName(%q): %v", id.Agent(), err)
		}
		if err := fleetstate.ValidateFileName(id.Name()); err != nil {
			t.Fatalf("ValidateFileName(%q): %v", id.Name(), err)
		}
		text, err := id.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back fleetstate.FileID
		if err := back.UnmarshalText(text); err != nil || back != id {
			t.Fatalf("UnmarshalText(MarshalText()) = %#v, %v; want %#v", back, err, id)
		}
		data, err := json.Marshal(map[string]fleetstate.FileID{"id": id})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]fleetstate.FileID
		if err := json.Unmarshal(data, &m); err != nil || m["id"] != id {
			t.Fatalf("json round trip of %s = %#v, %v; want %#v", data, m["id"], err, id)
		}
	})
}

// ---- a state machine of the store against a map model ----------------------

type fileKey struct{ session, agent, name string }

// storeMachine drives a store on a MemMapFs and a model of what it must hold.
type storeMachine struct {
	st *fleetstate.Store

	current  fleetstate.Session // zero: no current session
	files    map[fileKey]string // what every stored file holds
	log      string             // previous_run_log.txt
	sessions []string           // every session ID handed out, for gets and lists of old ones
}

var (
	smAgents       = []string{"alpha", "beta", "エー:ジェント"}
	smNames        = []string{"a", "a/b", "a/b/c", "b::c", "x.md", "d/e.md", "d/f.md", "::"}
	smSessionNames = []string{"s", "run 2", "a:::b", "名前"}
)

func TestStoreStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		m := &storeMachine{st: st, files: map[fileKey]string{}}
		t.Repeat(map[string]func(*rapid.T){
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

// check compares the whole state directory with the model: the current
// session, the archive, and every file and folder of every session.
func (m *storeMachine) check(t *rapid.T) {
	cur, err := m.st.CurrentSession()
	if m.current.ID == "" {
		wantErr(t, m.st, err, fleetstate.CodeNoActiveSession)
	} else if err != nil || cur != m.current {
		t.Fatalf("CurrentSession() = %v, %v; want %v", cur, err, m.current)
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
