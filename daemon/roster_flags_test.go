package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRosterServeFlags: the fleet file's timeouts and notify command are
// the flags of the daemon fleetstate up starts.
func TestRosterServeFlags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet.json")
	data := `{"timeouts":{"send":"20s","ask":"30s"},"notify":"notify-send fleet \"$FLEET_EVENT\"","agents":[{"name":"lead","role":"lead"}]}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := LoadRoster(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--ask-timeout", "30s", "--send-timeout", "20s", "--notify", `notify-send fleet "$FLEET_EVENT"`}
	if got := ro.ServeFlags(); !slices.Equal(got, want) {
		t.Errorf("ServeFlags() = %q; want %q", got, want)
	}
	ro.Notify = ""
	if got := ro.ServeFlags(); slices.Contains(got, "--notify") {
		t.Errorf("ServeFlags() without notify = %q", got)
	}
}

// TestRosterPermissionWaitAndTrust: timeouts.permission is the hooks'
// wait, not a flag of the daemon; one longer than a request may wait is
// refused; trust is the file's or the agent's own.
func TestRosterPermissionWaitAndTrust(t *testing.T) {
	dir := t.TempDir()
	load := func(data string) (*Roster, error) {
		path := filepath.Join(dir, "fleet.json")
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadRoster(path, dir)
	}
	ro, err := load(`{"timeouts":{"permission":"5s","send":"20s"},"agents":[{"name":"lead","role":"lead"},{"name":"bob","role":"member","trust":true}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := ro.PermissionWait(); got != 5*time.Second {
		t.Errorf("PermissionWait() = %v; want 5s", got)
	}
	if got, want := ro.ServeFlags(), []string{"--send-timeout", "20s"}; !slices.Equal(got, want) {
		t.Errorf("ServeFlags() = %q; want %q", got, want)
	}
	if ro.Trusted(ro.Agents[0]) || !ro.Trusted(ro.Agents[1]) {
		t.Errorf("Trusted = %v, %v; want only bob", ro.Trusted(ro.Agents[0]), ro.Trusted(ro.Agents[1]))
	}
	ro, err = load(`{"trust":true,"agents":[{"name":"lead","role":"lead"}]}`)
	if err != nil || !ro.Trusted(ro.Agents[0]) || ro.PermissionWait() != 0 {
		t.Errorf("a file's trust: %v, %v", err, ro)
	}
	if _, err := load(`{"timeouts":{"permission":"2h"},"agents":[]}`); err == nil || !strings.Contains(err.Error(), "timeouts.permission") {
		t.Errorf("a wait of 2h: %v; want an error naming timeouts.permission", err)
	}
}

// TestDocumentedFleetFilesLoad: every fleet file the README and the panes
// guide show (a JSON block with "agents") loads as written, and each
// member that up gives a pane is not told to pull with fleet_next, which
// such a member is not permitted to call.
func TestDocumentedFleetFilesLoad(t *testing.T) {
	n := 0
	for _, doc := range []string{"../README.md", "../docs/panes.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(text), "```json\n")
		for i, b := range blocks[1:] {
			block, _, _ := strings.Cut(b, "```")
			if !strings.Contains(block, `"agents"`) || !strings.HasPrefix(block, "{") {
				continue
			}
			n++
			ro, err := parseRoster([]byte(block))
			if err != nil {
				t.Errorf("%s, JSON block %d: %v\n%s", doc, i+1, err, block)
				continue
			}
			for _, a := range ro.Agents {
				if a.Role == "member" && (len(a.Command) > 0 || a.Tmux != "") && strings.Contains(strings.Join(a.Command, " "), "fleet_next") {
					t.Errorf("%s, JSON block %d: member %s has a pane but is told to call fleet_next", doc, i+1, a.Name)
				}
			}
		}
	}
	if n < 3 {
		t.Errorf("found %d fleet files in the README and docs/panes.md; want at least 3", n)
	}
}
