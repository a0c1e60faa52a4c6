package fleetup

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStartCommand: a directory whose fleet up brought up is started
// again with up and its fleet file; any other with serve.
func TestStartCommand(t *testing.T) {
	dir := t.TempDir()
	if got, want := StartCommand(dir), "fleetstate serve --dir "+dir; got != want {
		t.Errorf("without a record: %q; want %q", got, want)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".fleetstate"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := `{"pid": 0, "url": "http://127.0.0.1:7333/mcp", "file": "/srv/fleet.json"}`
	if err := os.WriteFile(filepath.Join(dir, ".fleetstate", RecordFile), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := StartCommand(dir), "fleetstate up /srv/fleet.json --dir "+dir; got != want {
		t.Errorf("after up and down: %q; want %q", got, want)
	}
}
