package modelserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest/modelserver"
	"github.com/fleetstate/fleetstate/internal/fleettest/realagent"
)

// agentTimeout bounds one headless run of a CLI through a script of a
// few steps; each takes 1.5 to 3 s on a machine of two cores.
const agentTimeout = 2 * time.Minute

// realScript is the script both CLIs run: a command, an MCP tool call
// that succeeds and one that fails, and a final answer.
const realScript = "Write out.txt, then reply to the lead.\n[[script]]\n" +
	"bash echo hi > out.txt\n" +
	"tool fleet_reply {\"text\":\"hello <lead> & \\\"all\\\"\"}\n" +
	"tool fleet_refuse {\"why\":\"testing\"}\n" +
	"say done\n" +
	"[[end]]"

// mcpServer returns the command line of the test's MCP server (this test
// binary, see serveMCP) and the file it logs its calls to.
func mcpServer(t *testing.T) (exe, log string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe, filepath.Join(t.TempDir(), "mcp.log")
}

// checkRun checks what both CLIs must have done with realScript: the
// file written, the two MCP calls made with the script's arguments, and
// the results carried back to the model server.
func checkRun(t *testing.T, srv *modelserver.Server, work, mcpLog, bash, reply, refuse string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(work, "out.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("out.txt = %q, %v; want \"hi\\n\"", b, err)
	}
	b, err := os.ReadFile(mcpLog)
	if err != nil {
		t.Fatalf("the MCP server was never called: %v", err)
	}
	var calls []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var c struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		var args any
		json.Unmarshal(c.Arguments, &args)
		calls = append(calls, fmt.Sprintf("%s %v", c.Tool, args))
	}
	if want := []string{`fleet_reply map[text:hello <lead> & "all"]`, "fleet_refuse map[why:testing]"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("MCP calls %q; want %q", calls, want)
	}

	reqs := srv.Requests()
	var answers []string
	for _, r := range reqs {
		if r.Answer.Status != 200 {
			t.Errorf("%s %s?%s was answered %d", r.Method, r.Path, r.RawQuery, r.Answer.Status)
		}
		a := r.Answer.Tool
		if a == "" {
			a = "say " + r.Answer.Text
		}
		answers = append(answers, a)
	}
	t.Logf("answers: %q", answers)
	last := reqs[len(reqs)-1]
	if last.Answer.Text != "done" {
		t.Errorf("last answer %+v; want the script's say done", last.Answer)
	}
	byName := map[string]modelserver.ToolResult{}
	for _, tr := range last.ToolResults {
		byName[tr.Name] = tr
	}
	if r, ok := byName[bash]; !ok || r.IsError {
		t.Errorf("the command's result %+v; want a result that is no error", r)
	}
	if r := byName[reply]; !strings.Contains(r.Text, "replied") || r.IsError {
		t.Errorf("fleet_reply's result %+v; want the text replied", r)
	}
	if r := byName[refuse]; !strings.Contains(r.Text, "refused") {
		t.Errorf("fleet_refuse's result %+v; want the text refused", r)
	}
}

// TestClaudeCode runs the real Claude Code headless (claude -p) through
// a script, with the test binary as its MCP server.
func TestClaudeCode(t *testing.T) {
	claude, _ := realagent.Install(t)
	srv := modelserver.Start(t, nil)
	home, work := t.TempDir(), t.TempDir()
	env := realagent.ClaudeHome(t, home, srv.URL(), "sk-test-modelserver-0123456789abcdef")
	exe, mcpLog := mcpServer(t)
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"fleetstate": map[string]any{
		"type": "stdio", "command": exe, "args": []string{}, "env": map[string]string{mcpLogEnv: mcpLog},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	// Claude Code refuses --permission-mode bypassPermissions to root, as
	// CI runs; the allowed tools let the script's tools run headless.
	cmd := realagent.Command(ctx, claude, "-p", realScript,
		"--allowedTools", "Bash,mcp__fleetstate__fleet_reply,mcp__fleetstate__fleet_refuse",
		"--mcp-config", cfgPath, "--strict-mcp-config")
	cmd.Dir, cmd.Env = work, realagent.Env(env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("claude -p took %v", time.Since(start).Round(time.Millisecond))
	if err != nil || strings.TrimSpace(string(out)) != "done" {
		t.Fatalf("claude -p: %v; printed %q and %q; want done", err, out, stderr.Bytes())
	}
	checkRun(t, srv, work, mcpLog, "Bash", "mcp__fleetstate__fleet_reply", "mcp__fleetstate__fleet_refuse")
	for _, r := range srv.Requests() {
		if r.API != modelserver.Anthropic || r.Path != "/v1/messages" || r.RawQuery != "beta=true" || !r.Stream {
			t.Errorf("Claude Code sent %s %s?%s (stream %v); want only streamed POST /v1/messages?beta=true", r.Method, r.Path, r.RawQuery, r.Stream)
		}
	}
	if r := srv.Requests(); !r[len(r)-1].ToolResults[len(r[len(r)-1].ToolResults)-1].IsError {
		t.Errorf("fleet_refuse's error result came back without is_error")
	}
}

// TestCodex runs the real Codex headless (codex exec) through a script,
// with the test binary as its MCP server.
func TestCodex(t *testing.T) {
	_, codex := realagent.Install(t)
	srv := modelserver.Start(t, nil)
	home, work := t.TempDir(), t.TempDir()
	exe, mcpLog := mcpServer(t)
	env := realagent.CodexHome(t, home, srv.URL(), fmt.Sprintf("[mcp_servers.fleetstate]\ncommand = %q\nenv = { %s = %q }", exe, mcpLogEnv, mcpLog))

	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := realagent.Command(ctx, codex, "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", realScript)
	cmd.Dir, cmd.Env = work, realagent.Env(env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("codex exec took %v", time.Since(start).Round(time.Millisecond))
	if err != nil || strings.TrimSpace(string(out)) != "done" {
		t.Fatalf("codex exec: %v; printed %q and %q; want done", err, out, stderr.Bytes())
	}
	checkRun(t, srv, work, mcpLog, "exec_command", "fleet_reply", "fleet_refuse")
	for _, r := range srv.Requests() {
		if r.API != modelserver.OpenAI || r.Path != "/v1/responses" || !r.Stream {
			t.Errorf("Codex sent %s %s (stream %v); want only streamed POST /v1/responses", r.Method, r.Path, r.Stream)
		}
	}
}
