package fleetstate

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
		id := newID("turn-")
		rest, ok := strings.CutPrefix(id, "turn-")
		if !ok {
			t.Fatalf("newID = %q; want the prefix turn-", id)
		}
		u, err := uuid.Parse(rest)
		if err != nil || u.String() != rest || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("newID = %q: %v, version %d, variant %v; want a canonical version 4 UUID", id, err, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("newID repeated %q", id)
		}
		seen[id] = true
	}
}
