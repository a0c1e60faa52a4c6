package fleetstate_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetstatetest"
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

// TestStoreStateMachine runs the store's state machine (package
// fleetstatetest) on state directories of in-memory file systems.
func TestStoreStateMachine(t *testing.T) {
	fleetstatetest.TestStoreStateMachine(t, func(t *testing.T) *fleetstate.Store {
		return open(t, afero.NewMemMapFs(), "/state", nil)
	})
}
