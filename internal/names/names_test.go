package names

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestNewID: an ID is its prefix and a version 4 UUID in canonical form,
// as prefix+uuid.NewString() wrote them.
func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID("turn-")
		rest, ok := strings.CutPrefix(id, "turn-")
		if !ok {
			t.Fatalf("NewID = %q; want the prefix turn-", id)
		}
		u, err := uuid.Parse(rest)
		if err != nil || u.String() != rest || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("NewID = %q: %v, version %d, variant %v; want a canonical version 4 UUID", id, err, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("NewID repeated %q", id)
		}
		seen[id] = true
	}
}

func TestRules(t *testing.T) {
	for _, c := range []struct {
		check func(string) error
		name  string
		ok    bool
	}{
		{Agent, "bob", true},
		{Agent, "a::b", false},
		{Agent, "a:", false},
		{Agent, "..", false},
		{Agent, "a/b", false},
		{Agent, strings.Repeat("a", MaxAgent+1), false},
		{File, "notes/plan::v2.md", true},
		{File, "", false},
		{File, "a//b", false},
		{File, "a/../b", false},
		{File, "a\\b", false},
		{File, "bell\a", false},
		{File, "\xff", false},
		{Session, "sprint 3", true},
		{Session, "two\nlines", false},
		{Session, "", false},
	} {
		if err := c.check(c.name); (err == nil) != c.ok {
			t.Errorf("check of %q: %v; want ok %v", c.name, err, c.ok)
		}
	}
	if !IsSessionID("0b7c3f2e-8d4a-4c1e-9f6b-2a5d7e9c1b3f") || IsSessionID("0B7C3F2E-8D4A-4C1E-9F6B-2A5D7E9C1B3F") {
		t.Error("IsSessionID does not take exactly the lower-case canonical form")
	}
}
