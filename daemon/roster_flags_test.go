package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
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
