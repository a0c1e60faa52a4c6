package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The whole path of a permission request, with real processes: the
// binary's `hook permission` as an agent runs it, reading the agent's
// request on stdin, against a real daemon on the disk and on NATS, and a
// lead deciding through MCP as the fleet file lets it.

// hookFleetFile lets the lead decide, and holds one allow and one deny
// rule.
const hookFleetFile = `{"approvals":{"allow":["Bash(git status *)"],"deny":["Bash(rm -rf /*)"],"leads":true},
	"agents":[{"name":"lead","role":"lead"},{"name":"scout","role":"member"}]}`

// hookBackend starts a daemon of one fleet, again on the same address
// after a restart: addr is "" the first time.
type hookBackend struct {
	tokens map[string]string
	start  func(t *testing.T, addr string) *daemonProc
}

func TestHookPermissionDisk(t *testing.T) {
	dir := t.TempDir()
	roster := writeHookFleetFile(t)
	testHookPermission(t, hookBackend{
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

func TestHookPermissionNATS(t *testing.T) {
	urls := natsURLs(startNATSNode(t, "n1", "--addr", "127.0.0.1:0"))
	roster := writeHookFleetFile(t)
	testHookPermission(t, hookBackend{
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

func writeHookFleetFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(path, []byte(hookFleetFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// hookRun is a running `fleetstate hook permission`.
type hookRun struct {
	kill   func() // kills the hook and waits for it
	done   chan struct{}
	stdout bytes.Buffer
	stderr bytes.Buffer
	err    error
}

// runHook starts the hook as the agent of token, with the request for
// command on stdin.
func runHook(t *testing.T, fleetURL, token, command string, timeout time.Duration) *hookRun {
	t.Helper()
	cmd := exec.Command(binary, "hook", "permission", "--timeout", timeout.String())
	cmd.Env = append(os.Environ(), "FLEET_URL="+fleetURL, "FLEET_TOKEN="+token)
	cmd.Stdin = strings.NewReader(`{"session_id":"sess-1","tool_use_id":"` + strings.ReplaceAll(command, " ", "_") +
		`","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"` + command + `"},"cwd":"/src"}`)
	h := &hookRun{done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &h.stdout, &h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.err = cmd.Wait()
		close(h.done)
	}()
	h.kill = func() {
		_ = cmd.Process.Kill()
		<-h.done // its output is whole, and read by nobody else
	}
	t.Cleanup(h.kill)
	return h
}

// output waits for the hook to exit 0 and returns what it printed.
func (h *hookRun) output(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(within):
		h.kill()
		t.Fatalf("the hook did not exit within %v; stderr: %s", within, h.stderr.String())
	}
	if h.err != nil {
		t.Fatalf("the hook: %v; stderr: %s", h.err, h.stderr.String())
	}
	return h.stdout.String()
}

// pendingID waits until the lead, through MCP on the daemon at url, sees
// a pending request of scout to run command, and returns its ID.
func pendingID(t *testing.T, url, token, command string) string {
	t.Helper()
	var id string
	if !fleettest.Until(60*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := mcpadapter.Dial(ctx, url, token, "lead")
		if err != nil {
			return false
		}
		defer c.Close()
		var out struct {
			Permissions []struct{ ID, Member, Input string }
		}
		if c.Call(ctx, "fleet_members", nil, &out) != nil {
			return false
		}
		for _, p := range out.Permissions {
			if p.Member == "scout" && strings.Contains(p.Input, command) {
				id = p.ID
			}
		}
		return id != ""
	}) {
		t.Fatalf("the lead never saw scout's request to run %q", command)
	}
	return id
}

// approve decides the request id as the lead, with fleet_approve.
func approve(t *testing.T, url, token, id, behavior, message string) {
	t.Helper()
	var err error
	if !fleettest.Until(30*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var c *mcpadapter.Client
		if c, err = mcpadapter.Dial(ctx, url, token, "lead"); err != nil {
			return false
		}
		defer c.Close()
		args := map[string]any{"id": id, "behavior": behavior}
		if message != "" {
			args["message"] = message
		}
		var te *mcpadapter.ToolError
		err = c.Call(ctx, "fleet_approve", args, nil)
		return err == nil || errors.As(err, &te) // a tool's error is an answer
	}) || err != nil {
		t.Fatalf("fleet_approve %s %s: %v", behavior, id, err)
	}
}

const (
	allowOut = `{"hookSpecificOutput":{"decision":{"behavior":"allow"},"hookEventName":"PermissionRequest"}}` + "\n"
	denyOut  = `{"hookSpecificOutput":{"decision":{"behavior":"deny","message":"%s"},"hookEventName":"PermissionRequest"}}` + "\n"
)

func testHookPermission(t *testing.T, b hookBackend) {
	d := b.start(t, "")
	scout, lead := b.tokens["scout"], b.tokens["lead"]

	t.Run("allow", func(t *testing.T) {
		h := runHook(t, d.url, scout, "go test ./...", time.Minute)
		approve(t, d.url, lead, pendingID(t, d.url, lead, "go test"), "allow", "")
		if got := h.output(t, 30*time.Second); got != allowOut {
			t.Fatalf("stdout %q; want %q", got, allowOut)
		}
	})
	t.Run("deny with a message", func(t *testing.T) {
		h := runHook(t, d.url, scout, "rm -rf build", time.Minute)
		approve(t, d.url, lead, pendingID(t, d.url, lead, "rm -rf build"), "deny", "build is shared")
		if got, want := h.output(t, 30*time.Second), strings.Replace(denyOut, "%s", "build is shared", 1); got != want {
			t.Fatalf("stdout %q; want %q", got, want)
		}
	})
	t.Run("timeout to no decision", func(t *testing.T) {
		h := runHook(t, d.url, scout, "make install", 2*time.Second)
		pendingID(t, d.url, lead, "make install")
		if got := h.output(t, 30*time.Second); got != "" {
			t.Fatalf("stdout %q; want nothing", got)
		}
	})
	t.Run("daemon down to no decision", func(t *testing.T) {
		dead := "http://" + fleettest.DeadAddr(t) + "/mcp"
		h := runHook(t, dead, scout, "make", time.Second)
		if got := h.output(t, 30*time.Second); got != "" {
			t.Fatalf("stdout %q; want nothing", got)
		}
	})
	t.Run("rules decide without asking", func(t *testing.T) {
		if got := runHook(t, d.url, scout, "git status --short", time.Minute).output(t, 30*time.Second); got != allowOut {
			t.Fatalf("git status: stdout %q; want %q", got, allowOut)
		}
		want := strings.Replace(denyOut, "%s", "the fleet file's rule Bash(rm -rf /*) denies this: rm -rf /home", 1)
		if got := runHook(t, d.url, scout, "rm -rf /home", time.Minute).output(t, 30*time.Second); got != want {
			t.Fatalf("rm -rf /home: stdout %q; want %q", got, want)
		}
	})
	t.Run("owner restarted while a request waits", func(t *testing.T) {
		h := runHook(t, d.url, scout, "go build", 90*time.Second)
		before := pendingID(t, d.url, lead, "go build")
		d.kill(syscall.SIGKILL)
		u, err := url.Parse(d.url)
		if err != nil {
			t.Fatal(err)
		}
		d = b.start(t, u.Host)
		after := pendingID(t, d.url, lead, "go build")
		if after != before {
			t.Fatalf("after the restart the request is %s; want %s, the one raised before", after, before)
		}
		approve(t, d.url, lead, after, "allow", "")
		if got := h.output(t, 60*time.Second); got != allowOut {
			t.Fatalf("stdout %q; want %q", got, allowOut)
		}
	})
}
