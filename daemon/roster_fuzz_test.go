package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// FuzzRoster reads arbitrary roster files: a roster is parsed, its names
// and roles checked and its screen patterns compiled, or it is refused
// with an error; nothing panics. (Its seed corpus is in testdata/fuzz.)
func FuzzRoster(f *testing.F) {
	f.Add([]byte(`{"tmux_socket":"/tmp/s","programs":{"claude":{"working":["esc to interrupt"],"idle":["^> "]}},"agents":[{"name":"lead","role":"lead"},{"name":"a","role":"member","tmux":"f:0.1","program":"claude"}]}`))
	f.Add([]byte(`{"agents":[{"name":"../x","role":"member"}]}`))
	f.Add([]byte(`{"agents":[{"name":"a","role":"admin"}]}`))
	f.Add([]byte(`{"programs":{"p":{"idle":["(unclosed"]}},"agents":[{"name":"a","role":"member","tmux":"%1","program":"p"}]}`))
	f.Add([]byte(`{"programs":{"p":{"working":["(a*)*$"]}}}`))
	f.Add([]byte(`[]`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "roster.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ro, err := LoadRoster(path, dir)
		if err != nil {
			return
		}
		if _, err := ro.panes(); err != nil {
			t.Fatalf("a checked roster's panes: %v", err)
		}
		for _, a := range ro.Agents {
			if err := fleetstate.ValidateAgentName(a.Name); err != nil {
				t.Fatalf("a checked roster holds the agent name %q: %v", a.Name, err)
			}
			if _, err := mcpadapter.ParseRole(a.Role); err != nil {
				t.Fatalf("a checked roster holds the role %q", a.Role)
			}
		}
	})
}
