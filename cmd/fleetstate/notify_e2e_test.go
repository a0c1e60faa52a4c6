package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// --notify runs its command with the event as JSON when a member asks,
// in the daemon the binary runs with --log-format json. (The event stream
// and the event log are the daemon package's tests, in process.)
func TestDaemonNotifyCommand(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	out := filepath.Join(t.TempDir(), "notified")
	d := startDaemon(t, dir, "--log-format", "json", "--notify", "cat >> "+out+"; echo >> "+out)
	bg := context.Background()
	lead := connectHTTP(t, d.url, tokens["lead"])
	scout := connectHTTP(t, d.url, tokens["scout"])
	ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "task", "wait": false})
	ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 5})
	asked := async(bg, t, scout, "fleet_ask", map[string]any{"question": "which way?", "default": "left"})
	if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool {
		data, _ := os.ReadFile(out)
		return strings.Contains(string(data), `"kind":"asked"`) && strings.Contains(string(data), "which way?")
	}) {
		data, _ := os.ReadFile(out)
		t.Fatalf("notification file %q; want the asked event as JSON (logs %v)", data, d.lines())
	}
	p := ok(bg, t, lead, "fleet_poll", nil)
	tk := p["tickets"].([]any)[0].(map[string]any)
	ok(bg, t, lead, "fleet_send", map[string]any{"turn_id": tk["turn_id"], "content": "right"})
	<-asked
}
