package fleetup

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// StartCommand returns the command that starts the daemon of the state
// directory dir again: fleetstate up with its fleet file when up brought
// the fleet up there (its record names the file), else fleetstate serve.
// It reads the record only, and creates nothing.
func StartCommand(dir string) string {
	var rec Record
	data, err := os.ReadFile(filepath.Join(dir, ".fleetstate", RecordFile))
	if err == nil && json.Unmarshal(data, &rec) == nil && rec.File != "" {
		return "fleetstate up " + rec.File + " --dir " + dir
	}
	return "fleetstate serve --dir " + dir
}
