package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// TestNATSStdioAndTokens: on a fleet kept in NATS, `token list` and
// `token revoke --nats` see what `token add --nats` made; `mcp --nats` is
// the store's stdio drop-in on the same fleet (what it puts, a daemon's
// agent reads); its fleet tools answer ERR_FLEET_OWNED naming the daemon
// that owns the fleet, and it refuses to clean the sessions under that
// daemon's turns.
func TestNATSStdioAndTokens(t *testing.T) {
	node := startNATSNode(t, "solo", "--addr", "127.0.0.1:0")
	urls := natsURLs(node)
	lead := natsToken(t, urls, "lead", "lead")
	natsToken(t, urls, "gone", "member")
	out, err := exec.Command(binary, "token", "revoke", "--nats", urls, "--agent", "gone").CombinedOutput()
	if err != nil {
		t.Fatalf("token revoke --nats: %v: %s", err, out)
	}
	out, err = exec.Command(binary, "token", "list", "--nats", urls).Output()
	if err != nil || strings.TrimSpace(string(out)) != "lead\tlead" {
		t.Fatalf("token list --nats = %q, %v; want only the lead", out, err)
	}
	if out, err := exec.Command(binary, "token", "list", "--nats", urls, "--dir", t.TempDir()).CombinedOutput(); err == nil {
		t.Fatalf("token list with --nats and --dir succeeded: %s", out)
	}

	d := startNATSDaemon(t, urls)
	waitOwner(t, natsFleet(t, urls), d.url, 30*time.Second)
	agent := dialNATS(t, d.url, lead, "lead")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cs := connectStdio(t, []string{"FLEET_AGENT=lead", "FLEET_ROLE=lead", "FLEET_STATE_DIRECTORY="}, "mcp", "--nats", urls)
	sess, isErr := call(ctx, t, cs, "new_session", map[string]any{"name": "stdio on nats"})
	if isErr {
		t.Fatalf("new_session over mcp --nats: %v", sess)
	}
	put, isErr := call(ctx, t, cs, "put", map[string]any{"agent_name": "writer", "file_name": "notes/a.txt", "content": "from stdio"})
	if isErr {
		t.Fatalf("put over mcp --nats: %v", put)
	}
	id, err := fleetstate.ParseFileID(put["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if !fleettest.Until(10*time.Second, 20*time.Millisecond, func() bool {
		got, err = agent.Get(ctx, id)
		return err == nil
	}) || string(got) != "from stdio" {
		t.Fatalf("the daemon's agent read %q; want what the stdio server put", got)
	}
	res, isErr := call(ctx, t, cs, "fleet_members", nil)
	if !isErr || res["error"] != "ERR_FLEET_OWNED" || !strings.Contains(res["message"].(string), d.url) {
		t.Fatalf("fleet_members over mcp --nats = %v; want ERR_FLEET_OWNED naming %s", res, d.url)
	}
	res, isErr = call(ctx, t, cs, "clean_sessions", nil)
	if !isErr || res["error"] != "ERR_FLEET_OWNED" {
		t.Fatalf("clean_sessions over mcp --nats while a daemon owns the fleet = %v; want ERR_FLEET_OWNED", res)
	}
	if _, err := agent.Get(ctx, id); err != nil {
		t.Fatalf("the refused clean removed the file: %v", err)
	}
}
