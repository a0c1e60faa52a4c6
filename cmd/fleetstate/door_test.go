package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon's door bounds are flags of serve: one that makes no sense is
// refused here. What the bounds do (idle and silent connections closed,
// MCP sessions capped, the token file the live roster) is the daemon's,
// tested in process in package daemon (door_test.go there).

// TestDoorBadFlags: a bound that makes no sense is refused by name before
// anything is opened.
func TestDoorBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--max-sessions", "0"}, {"--max-sessions-per-token", "-2"}, {"--max-conns", "-1"},
		{"--idle-timeout", "0s"}, {"--header-timeout", "-1s"}, {"--session-ttl", "0s"}, {"--token-poll", "0s"},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		var out syncBuffer
		err := run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0", "--dir", dir}, args...), strings.NewReader(""), &out, &out, nil)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("serve %v: %v; want an error naming %s", args, err, args[0])
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("serve %v made the state directory: %v", args, err)
		}
	}
}
