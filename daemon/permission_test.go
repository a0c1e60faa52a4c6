package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/permission"
	"github.com/fleetstate/fleetstate/internal/fleettest/mcptest"
)

// hookPost raises a permission request as the member's hook does, and
// returns the status and the decision.
func hookPost(t *testing.T, base, token string, body map[string]any) (int, fleetstate.Decision) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+permission.Path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var hd permission.HookDecision
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&hd); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, hd.Decision
}

// TestPermissionRulesAndLeads: a daemon with a fleet file whose approvals
// hold rules decides what they cover without asking, and lets the lead
// decide the rest with fleet_approve, which fleet_members lists.
func TestPermissionRulesAndLeads(t *testing.T) {
	dir := t.TempDir()
	tok := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	roster := filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(roster, []byte(`{"approvals":{"allow":["Bash(git status *)","Read(*)"],"deny":["Bash(rm -rf /*)"],"leads":true},
		"agents":[{"name":"lead","role":"lead"},{"name":"scout","role":"member"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := serveConfig(dir)
	cfg.Roster = roster
	url := startDaemon(t, cfg)
	base := strings.TrimSuffix(url, "/mcp")

	if status, d := hookPost(t, base, tok["scout"], map[string]any{"tool_name": "Bash", "tool_input": map[string]any{"command": "git status"}}); status != http.StatusOK ||
		d.Behavior != fleetstate.BehaviorAllow || d.By != "rule Bash(git status *)" {
		t.Fatalf("git status: %d %+v; want allowed by rule Bash(git status *)", status, d)
	}
	if status, d := hookPost(t, base, tok["scout"], map[string]any{"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf /home"}}); status != http.StatusOK ||
		d.Behavior != fleetstate.BehaviorDeny || d.By != "rule Bash(rm -rf /*)" {
		t.Fatalf("rm -rf /home: %d %+v; want denied by rule Bash(rm -rf /*)", status, d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead := mcptest.Connect(t, url, tok["lead"])
	type answer struct {
		status int
		d      fleetstate.Decision
	}
	hook := make(chan answer, 1)
	go func() {
		s, d := hookPost(t, base, tok["scout"], map[string]any{"tool_name": "Bash", "tool_input": map[string]any{"command": "make install"}})
		hook <- answer{s, d}
	}()
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		perms, _ := mcptest.OK(ctx, t, lead, "fleet_members", nil)["permissions"].([]any)
		if len(perms) == 1 {
			p := perms[0].(map[string]any)
			if p["member"] != "scout" || p["input"] != `{"command":"make install"}` {
				t.Fatalf("pending request = %v", p)
			}
			id = p["id"].(string)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("the lead never saw the pending request")
	}
	mcptest.OK(ctx, t, lead, "fleet_approve", map[string]any{"id": id, "behavior": "allow"})
	if a := <-hook; a.status != http.StatusOK || a.d.Behavior != fleetstate.BehaviorAllow || a.d.By != "lead" {
		t.Fatalf("hook after the lead's allow: %+v; want allow by lead", a)
	}
}

// TestPermissionLeadsNotAllowed: without approvals.leads in the fleet
// file, fleet_approve is refused.
func TestPermissionLeadsNotAllowed(t *testing.T) {
	dir := t.TempDir()
	tok := addTokens(t, dir, map[string]string{"lead": "lead"})
	url := startDaemon(t, serveConfig(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead := mcptest.Connect(t, url, tok["lead"])
	mcptest.Fails(ctx, t, lead, "fleet_approve", map[string]any{"id": "perm-x", "behavior": "allow"}, "ERR_NOT_PERMITTED")
}
