package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// What each real CLI's transcript in internal/usage/testdata records:
// the scripted model server reports 100 input, 20 output, 50 cache-read
// and 10 cache-write tokens a call (Codex: no cache writes, and the cached
// input inside the input, which the reader takes out).
var (
	claudeTranscriptTotal = fleetstate.Usage{Input: 600, Output: 120, CacheRead: 300, CacheWrite: 60}
	codexTranscriptTotal  = fleetstate.Usage{Input: 200, Output: 80, CacheRead: 200}
)

func TestStatusHookCountsUsageDisk(t *testing.T) {
	dir := t.TempDir()
	roster := writeHookFleetFile(t)
	testStatusHookCountsUsage(t, hookBackend{
		tokens: addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"}),
		start: func(t *testing.T, addr string) *daemonProc {
			args := []string{"--dir", dir, "--roster", roster}
			if addr != "" {
				args = append(args, "--addr", addr)
			}
			return startServe(t, args...)
		},
	})
}

func TestStatusHookCountsUsageNATS(t *testing.T) {
	urls := natsURLs(startNATSNode(t, "n1", "--addr", "127.0.0.1:0"))
	roster := writeHookFleetFile(t)
	testStatusHookCountsUsage(t, hookBackend{
		tokens: natsTokenSet(t, urls, map[string]string{"lead": "lead", "scout": "member"}),
		start: func(t *testing.T, addr string) *daemonProc {
			args := []string{"--roster", roster}
			if addr != "" {
				args = append(args, "--addr", addr)
			}
			return startNATSDaemon(t, urls, args...)
		},
	})
}

// testStatusHookCountsUsage: the status hook, run as the CLIs run it with
// their transcripts named in the hook event, reports what the transcript
// records; the member's usage counts each model call once, across hooks
// run again and a restart of the daemon.
func testStatusHookCountsUsage(t *testing.T, b hookBackend) {
	d := b.start(t, "")
	scout, lead := b.tokens["scout"], b.tokens["lead"]
	claude := copyTranscript(t, "claude-code-2.1.328.jsonl")
	codex := copyTranscript(t, "codex-0.169.0.jsonl")

	runStatusHook(t, d.url, scout, "PreToolUse", claude)
	wantMemberUsage(t, d.url, lead, claudeTranscriptTotal, "after a PreToolUse")
	runStatusHook(t, d.url, scout, "Stop", claude)
	runStatusHook(t, d.url, scout, "PostToolUse", claude) // reads no transcript
	wantMemberUsage(t, d.url, lead, claudeTranscriptTotal, "after the same transcript again")
	runStatusHook(t, d.url, scout, "Stop", codex)
	both := claudeTranscriptTotal.Add(codexTranscriptTotal)
	wantMemberUsage(t, d.url, lead, both, "after a second transcript")

	d.kill(syscall.SIGKILL)
	u, err := url.Parse(d.url)
	if err != nil {
		t.Fatal(err)
	}
	d = b.start(t, u.Host)
	wantMemberUsage(t, d.url, lead, both, "after a restart")
	runStatusHook(t, d.url, scout, "Stop", claude)
	wantMemberUsage(t, d.url, lead, both, "after a transcript read before the restart is read again")
}

// copyTranscript copies a real CLI's transcript from internal/usage's
// test data to a folder of the test's, as the CLI would keep it.
func copyTranscript(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "usage", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runStatusHook runs `fleetstate status` as the agent of token, with a
// hook event naming transcript on stdin, and requires it to exit 0.
func runStatusHook(t *testing.T, fleetURL, token, event, transcript string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "status")
	cmd.Env = append(os.Environ(), "FLEET_URL="+fleetURL, "FLEET_TOKEN="+token, "FLEET_AGENT=")
	cmd.Stdin = strings.NewReader(`{"session_id":"s1","hook_event_name":"` + event + `","transcript_path":"` + transcript + `","cwd":"/src"}`)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("fleetstate status (%s): %v: %s", event, err, out)
	}
}

// wantMemberUsage waits until fleet_members, called by the lead, shows
// scout's usage as want.
func wantMemberUsage(t *testing.T, url, token string, want fleetstate.Usage, when string) {
	t.Helper()
	var got fleetstate.Usage
	if !fleettest.Until(30*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := mcpadapter.Dial(ctx, url, token, "lead")
		if err != nil {
			return false
		}
		defer c.Close()
		var out struct{ Members []fleetstate.MemberInfo }
		if c.Call(ctx, "fleet_members", nil, &out) != nil {
			return false
		}
		for _, m := range out.Members {
			if m.Name == "scout" {
				got = m.Usage
			}
		}
		return got == want
	}) {
		t.Fatalf("%s: scout's usage is %+v; want %+v", when, got, want)
	}
}
