package fleetstate_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// The committed seed corpora of hostile inputs are in
// testdata/fuzz/FuzzParseFileID and testdata/fuzz/FuzzValidateNames.

const fuzzSession = "550e8400-e29b-41d4-a716-446655440000"

func FuzzParseFileID(f *testing.F) {
	f.Add("fsm::file::" + fuzzSession + "::scout::notes.md")
	f.Add("fsm::file::" + fuzzSession + "::scout::a::b/c::")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := fleetstate.ParseFileID(s)
		if err != nil {
			wantErr(t, nil, err, fleetstate.CodeCanOnlyRetrieveFiles)
			if id != (fleetstate.FileID{}) {
				t.Fatalf("ParseFileID(%q) returned %#v with its error; want the zero FileID", s, id)
			}
			msg := err.Error()
			if len(msg) > 512 || !utf8.ValidString(msg) || strings.ContainsFunc(msg, unicode.IsControl) {
				t.Fatalf("error message %q is long, not UTF-8 or holds control characters", msg)
			}
			return
		}
		if !id.IsValid() {
			t.Fatalf("ParseFileID(%q) accepted it but IsValid() = false", s)
		}
		if got := id.String(); got != s {
			t.Fatalf("ParseFileID(%q).String() = %q; want the input back", s, got)
		}
		if !isLowerUUID(id.Session()) {
			t.Fatalf("ParseFileID(%q) accepted session %q", s, id.Session())
		}
		if !agentNameOK(id.Agent()) {
			t.Fatalf("ParseFileID(%q) accepted agent %q", s, id.Agent())
		}
		if !fileNameOK(id.Name()) {
			t.Fatalf("ParseFileID(%q) accepted file name %q", s, id.Name())
		}
		again, err := fleetstate.NewFileID(id.Session(), id.Agent(), id.Name())
		if err != nil || again != id {
			t.Fatalf("NewFileID of the parts of %q = %#v, %v; want %#v", s, again, err, id)
		}
	})
}

func FuzzValidateNames(f *testing.F) {
	f.Add("scout", "notes.md")
	f.Add("a:b", "nested/a::b/c.md")
	f.Fuzz(func(t *testing.T, agent, name string) {
		agentErr := fleetstate.ValidateAgentName(agent)
		nameErr := fleetstate.ValidateFileName(name)
		if got, want := agentErr == nil, agentNameOK(agent); got != want {
			t.Fatalf("ValidateAgentName(%q) = %v; want accepted=%v", agent, agentErr, want)
		}
		if got, want := nameErr == nil, fileNameOK(name); got != want {
			t.Fatalf("ValidateFileName(%q) = %v; want accepted=%v", name, nameErr, want)
		}
		if agentErr != nil {
			wantErr(t, nil, agentErr, fleetstate.CodeInvalidAgentName)
		} else {
			checkAcceptedName(t, agent, true)
		}
		if nameErr != nil {
			wantErr(t, nil, nameErr, fleetstate.CodeInvalidFileName)
		} else {
			checkAcceptedName(t, name, false)
		}

		st := open(t, afero.NewMemMapFs(), "/state", nil)
		newSession(t, st, "fuzz")
		put(t, st, "scout", "existing.md", "x", false)
		content := []byte(agent + "\x00" + name)
		if agentErr != nil || nameErr != nil {
			want := fleetstate.CodeInvalidAgentName
			if agentErr == nil {
				want = fleetstate.CodeInvalidFileName
			}
			// No store for wantErr: a fuzzed name may spell the store's path.
			unchanged(t, st, func() {
				_, err := st.Put(agent, name, content, false)
				wantErr(t, nil, err, want)
				_, err = st.Put(agent, name, content, true)
				wantErr(t, nil, err, want)
			})
			return
		}
		id := put(t, st, agent, name, string(content), false)
		if got := get(t, st, id); got != string(content) {
			t.Fatalf("Get of %q/%q = %q; want %q", agent, name, got, content)
		}
		parsed, err := fleetstate.ParseFileID(id.String())
		if err != nil || parsed != id {
			t.Fatalf("ParseFileID(%q) = %#v, %v; want %#v", id.String(), parsed, err, id)
		}
		files, err := st.List("", agent)
		if err != nil {
			t.Fatalf("List(%q): %v", agent, err)
		}
		found := false
		for _, fi := range files {
			found = found || fi.ID == id
		}
		if !found {
			t.Fatalf("List(%q) = %v; want it to hold %v", agent, files, id)
		}
	})
}

// checkAcceptedName checks what an accepted name must never hold, whatever
// the rules say in detail.
func checkAcceptedName(t *testing.T, s string, agent bool) {
	t.Helper()
	switch {
	case s == "":
		t.Fatalf("accepted an empty name")
	case !utf8.ValidString(s):
		t.Fatalf("accepted %q, not valid UTF-8", s)
	case strings.ContainsAny(s, "\\\x00"):
		t.Fatalf("accepted %q with a backslash or NUL", s)
	case strings.ContainsFunc(s, unicode.IsControl):
		t.Fatalf("accepted %q with a control character", s)
	case strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//"):
		t.Fatalf("accepted %q: absolute, trailing slash or empty segment", s)
	case agent && (strings.Contains(s, "/") || strings.Contains(s, "::") || len(s) > fleetstate.MaxAgentNameLen):
		t.Fatalf("accepted agent %q with a slash, \"::\" or over the length limit", s)
	case !agent && len(s) > fleetstate.MaxFileNameLen:
		t.Fatalf("accepted file name of %d bytes", len(s))
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg == "." || seg == ".." {
			t.Fatalf("accepted %q with a %q segment", s, seg)
		}
	}
}

// agentNameOK and fileNameOK restate the naming rules of the README, as an
// oracle for the fuzz targets.
func agentNameOK(s string) bool {
	return len(s) <= fleetstate.MaxAgentNameLen && !strings.Contains(s, "::") &&
		!strings.HasSuffix(s, ":") && segmentOK(s)
}

func fileNameOK(s string) bool {
	if s == "" || len(s) > fleetstate.MaxFileNameLen {
		return false
	}
	for seg := range strings.SplitSeq(s, "/") {
		if !segmentOK(seg) {
			return false
		}
	}
	return true
}

func segmentOK(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > fleetstate.MaxSegmentLen ||
		strings.HasPrefix(s, ".fleetstate-tmp-") || !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r == '/' || r == '\\' || unicode.IsControl(r) })
}
