package mcphttp

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fleetstate/fleetstate/mcpadapter"

	"pgregory.net/rapid"
)

// TestSessionCapsRapid: whatever sessions open, end and are revoked, the
// caps count each live session once, for its identity and in all, never
// let an identity or the total past its cap, and releaseAll returns
// exactly the revoked identity's sessions.
func TestSessionCapsRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		perID, total := rapid.IntRange(1, 4).Draw(rt, "perID"), rapid.IntRange(1, 8).Draw(rt, "total")
		c := newSessionCaps(perID, total)
		ids := []mcpadapter.Identity{{}, {Agent: "a", Role: mcpadapter.RoleLead}, {Agent: "b", Role: mcpadapter.RoleMember}, {Agent: "c", Role: mcpadapter.RoleMember}}
		live := map[string]mcpadapter.Identity{} // the model
		next := 0
		count := func(id mcpadapter.Identity) int {
			n := 0
			for _, o := range live {
				if o == id {
					n++
				}
			}
			return n
		}
		rt.Repeat(map[string]func(*rapid.T){
			"open": func(rt *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				sid := fmt.Sprintf("s%d", next)
				next++
				refused := c.open(id, sid)
				if want := count(id) >= perID || len(live) >= total; (refused != nil) != want {
					rt.Fatalf("open(%v) refused %v; want refused %v", id, refused, want)
				}
				if refused == nil {
					live[sid] = id
				}
			},
			"release": func(rt *rapid.T) {
				sid := fmt.Sprintf("s%d", rapid.IntRange(0, next).Draw(rt, "sid"))
				c.release(sid)
				delete(live, sid)
			},
			"revoke": func(rt *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				got := c.releaseAll(id)
				var want []string
				for sid, o := range live {
					if o == id {
						want = append(want, sid)
						delete(live, sid)
					}
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					rt.Fatalf("releaseAll(%v) = %v; want %v", id, got, want)
				}
			},
			"": func(rt *rapid.T) {
				for _, id := range ids {
					if n, all := c.counts(id); n != count(id) || all != len(live) {
						rt.Fatalf("counts(%v) = %d, %d; want %d, %d", id, n, all, count(id), len(live))
					}
				}
			},
		})
	})
}
