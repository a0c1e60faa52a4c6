package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// End-to-end tests of issue 10, "One owner per fleet", with real
// processes: two daemons on one directory, stdio servers beside a daemon,
// clean in a work tree, restarts with members that never come back, that
// reopen their stream, that are mid-ask or revoked, two connections under
// one member token, and abandoned blocking sends.

// freeAddr returns a loopback address with a port that was free a moment
// ago, for a daemon that must come back on the same port after a restart
// (see fleettest.FreePort).
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := fleettest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p)
}

// stopDaemon signals d and waits at most within for it to exit; a daemon
// that does not exit in time is killed and the test fails.
func stopDaemon(t *testing.T, d *daemonProc, sig syscall.Signal, within time.Duration) {
	t.Helper()
	if d.cmd.ProcessState != nil {
		return
	}
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if sig == syscall.SIGTERM && err != nil {
			t.Errorf("daemon exit after SIGTERM: %v", err)
		}
	case <-time.After(within):
		_ = d.cmd.Process.Kill()
		<-done
		t.Fatalf("the daemon did not exit within %v of %v", within, sig)
	}
}

// connectStdioIn is connectStdio with the server's working directory set.
func connectStdioIn(t *testing.T, wd string, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), env...)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// pollUntilDone polls a ticket until its turn ended, for at most within.
func pollUntilDone(ctx context.Context, t *testing.T, lead *mcp.ClientSession, ticket any, within time.Duration) map[string]any {
	t.Helper()
	var p map[string]any
	if !fleettest.Until(within, 0, func() bool {
		p = ok(ctx, t, lead, "fleet_poll", map[string]any{"ticket": ticket, "wait_s": 1})
		return p["state"] == "done"
	}) {
		t.Fatalf("ticket %v did not end within %v: %v", ticket, within, p)
	}
	return p
}

// ---- 1. two daemons on one directory ----------------------------------------

// TestOwnerSecondDaemonRefused: a second daemon on a directory that a
// running daemon owns exits non-zero at once, naming the directory, the
// owner (pid and URL) and ERR_FLEET_OWNED; the first goes on serving; once
// the first is killed with SIGKILL, a new daemon starts on the directory
// (the kernel released the lock).
func TestOwnerSecondDaemonRefused(t *testing.T) {
	dir := t.TempDir()
	lead := addToken(t, dir, "lead", "lead")
	d1 := startDaemon(t, dir)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, binary, "serve", "--dir", dir, "--addr", "127.0.0.1:0")
	var stderr bytes.Buffer
	second.Stderr = &stderr
	start := time.Now()
	err := second.Run()
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("the second daemon on %s exited 0; stderr: %s", dir, stderr.String())
	}
	if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() <= 0 {
		t.Fatalf("the second daemon: %v (after %v); want a non-zero exit of its own; stderr: %s", err, elapsed, stderr.String())
	}
	if elapsed > 5*time.Second {
		t.Errorf("the second daemon took %v to refuse", elapsed)
	}
	msg := stderr.String()
	for what, want := range map[string]string{
		"the directory":   dir,
		"the owner's pid": fmt.Sprintf("pid %d", d1.cmd.Process.Pid),
		"the owner's URL": d1.url,
		"the error code":  "ERR_FLEET_OWNED",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the second daemon's error does not name %s (%q):\n%s", what, want, msg)
		}
	}

	// The first daemon goes on serving.
	bg := context.Background()
	cs := connectHTTP(t, d1.url, lead)
	ok(bg, t, cs, "new_session", map[string]any{"name": "still served"})
	ok(bg, t, cs, "fleet_members", nil)

	// Killed without a chance to clean up, it leaves the directory free.
	d1.kill(syscall.SIGKILL)
	d3 := startDaemon(t, dir)
	cs3 := connectHTTP(t, d3.url, lead)
	if s := ok(bg, t, cs3, "get_session", nil); s["name"] != "still served" {
		t.Fatalf("get_session on the new daemon = %v", s)
	}
	ok(bg, t, cs3, "fleet_members", nil)
}

// ---- 2. stdio servers beside a daemon ---------------------------------------

// TestOwnerStdioBesideDaemon: stdio servers on a directory the daemon
// owns serve the store; their fleet tools answer ERR_FLEET_OWNED naming
// the daemon's URL and `fleetstate mcp --connect`; their clean_sessions
// removes nothing; a stdio member named like an HTTP member never takes
// the daemon's queued message, which the HTTP member gets exactly once.
func TestOwnerStdioBesideDaemon(t *testing.T) {
	dir := t.TempDir()
	tokens := map[string]string{"lead": addToken(t, dir, "lead", "lead"), "scout": addToken(t, dir, "scout", "member")}
	d := startDaemon(t, dir)
	bg := context.Background()
	lead := connectHTTP(t, d.url, tokens["lead"])
	sess := ok(bg, t, lead, "new_session", map[string]any{"name": "owned"})
	daemonPut := ok(bg, t, lead, "put", map[string]any{"agent_name": "lead", "file_name": "plan.md", "content": "the plan"})

	// The daemon queues a message for scout before any scout is connected.
	queued := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "survey the repo", "wait": false})
	if queued["outcome"] != "pending" || queued["ticket"] == nil {
		t.Fatalf("detached send = %v", queued)
	}

	noID := []string{"FLEET_AGENT=", "FLEET_ROLE=", "FLEET_STATE_DIRECTORY="}
	anon := connectStdio(t, noID, "mcp", "--dir", dir)
	member := connectStdio(t, noID, "mcp", "--dir", dir, "--agent", "scout", "--role", "member")
	stdioLead := connectStdio(t, noID, "mcp", "--dir", dir, "--agent", "lead", "--role", "lead")

	// Store tools work on the daemon's session.
	for name, cs := range map[string]*mcp.ClientSession{"anonymous": anon, "member scout": member} {
		if s := ok(bg, t, cs, "get_session", nil); s["id"] != sess["id"] {
			t.Fatalf("%s: get_session = %v; want the daemon's session %v", name, s, sess["id"])
		}
		if c := ok(bg, t, cs, "get", map[string]any{"id": daemonPut["id"]}); c["content"] != "the plan" {
			t.Fatalf("%s: get of the daemon's file = %v", name, c)
		}
	}
	anonPut := ok(bg, t, anon, "put", map[string]any{"agent_name": "helper", "file_name": "a.txt", "content": "from anon"})
	scoutPut := ok(bg, t, member, "put", map[string]any{"agent_name": "scout", "file_name": "s.txt", "content": "from stdio scout"})
	if c := ok(bg, t, lead, "get", map[string]any{"id": scoutPut["id"]}); c["content"] != "from stdio scout" {
		t.Fatalf("the daemon reads the stdio member's file as %v", c)
	}
	if c := ok(bg, t, member, "get", map[string]any{"id": anonPut["id"]}); c["content"] != "from anon" {
		t.Fatalf("get = %v", c)
	}
	if files, _ := ok(bg, t, member, "list", nil)["files"].([]any); len(files) != 3 {
		t.Fatalf("list beside the daemon: %v; want the 3 files", files)
	}

	// The stdio member's fleet tools say where the fleet is; its
	// fleet_next never takes the daemon's queued message.
	for _, fc := range []struct {
		name string
		args map[string]any
	}{
		{"fleet_next", map[string]any{"wait_s": 1}},
		{"fleet_reply", map[string]any{"content": "x"}},
		{"fleet_ask", map[string]any{"question": "q?"}},
	} {
		out, isErr := call(bg, t, member, fc.name, fc.args)
		msg, _ := out["message"].(string)
		if !isErr || out["error"] != "ERR_FLEET_OWNED" || !strings.Contains(msg, d.url) || !strings.Contains(msg, "fleetstate mcp --connect") {
			t.Fatalf("stdio member's %s beside the daemon = %v (isError %v); want ERR_FLEET_OWNED naming %s and fleetstate mcp --connect", fc.name, out, isErr, d.url)
		}
	}
	// The stdio lead's fleet tools too.
	fails(bg, t, stdioLead, "fleet_send", map[string]any{"to": "scout", "content": "x", "wait": false}, "ERR_FLEET_OWNED")
	fails(bg, t, stdioLead, "fleet_poll", nil, "ERR_FLEET_OWNED")

	// clean_sessions from beside the daemon removes nothing: the stdio
	// lead's answers ERR_FLEET_OWNED, the member's and the anonymous
	// caller's are refused.
	fails(bg, t, stdioLead, "clean_sessions", nil, "ERR_FLEET_OWNED")
	for name, cs := range map[string]*mcp.ClientSession{"anonymous": anon, "member scout": member} {
		if out, isErr := call(bg, t, cs, "clean_sessions", nil); !isErr {
			t.Fatalf("%s: clean_sessions beside the daemon = %v; want an error", name, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, sess["id"].(string))); err != nil {
		t.Fatalf("the session folder after refused cleans: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "current_run.txt")); err != nil {
		t.Fatalf("current_run.txt after refused cleans: %v", err)
	}
	for _, id := range []any{daemonPut["id"], anonPut["id"], scoutPut["id"]} {
		ok(bg, t, lead, "get", map[string]any{"id": id})
	}
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": queued["ticket"]}); p["state"] != "queued" {
		t.Fatalf("the queued ticket after the stdio calls = %v; want still queued", p)
	}

	// The HTTP member gets the message, once.
	scout := connectHTTP(t, d.url, tokens["scout"])
	msg := ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 5})
	if msg["content"] != "survey the repo" || msg["turn_id"] != queued["turn_id"] {
		t.Fatalf("the HTTP member's fleet_next = %v; want the queued message", msg)
	}
	ok(bg, t, scout, "fleet_reply", map[string]any{"content": "surveyed"})
	if again := ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 1}); again["outcome"] != "none" {
		t.Fatalf("a second fleet_next = %v; want none (delivered exactly once)", again)
	}
	fails(bg, t, member, "fleet_next", map[string]any{"wait_s": 0}, "ERR_FLEET_OWNED")
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": queued["ticket"], "wait_s": 5}); p["outcome"] != "reply" || p["content"] != "surveyed" {
		t.Fatalf("the ticket = %v; want the HTTP member's reply", p)
	}
}

// ---- 3. clean in a work tree --------------------------------------------------

// TestOwnerCleanKeepsWorkTree: with the state directory being a git work
// tree itself (FLEET_STATE_DIRECTORY=.), new_session, put and
// clean_sessions remove the session folders, current_run.txt and
// previous_run_log.txt, and nothing else: .git and src survive intact.
// Both for an anonymous stdio server (store only) and a stdio lead (which
// owns the fleet and cleans it too).
func TestOwnerCleanKeepsWorkTree(t *testing.T) {
	for _, who := range []string{"anonymous", "lead"} {
		t.Run(who, func(t *testing.T) {
			tree := t.TempDir()
			if out, err := exec.Command("git", "init", "-q", tree).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v: %s", err, out)
			}
			mainGo := "package main\n\nfunc main() {}\n"
			if err := os.MkdirAll(filepath.Join(tree, "src"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tree, "src", "main.go"), []byte(mainGo), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tree, "NOTES.txt"), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			head, err := os.ReadFile(filepath.Join(tree, ".git", "HEAD"))
			if err != nil {
				t.Fatal(err)
			}
			env := []string{"FLEET_STATE_DIRECTORY=.", "FLEET_AGENT=", "FLEET_ROLE="}
			args := []string{"mcp"}
			if who == "lead" {
				args = append(args, "--agent", "lead", "--role", "lead")
			}
			cs := connectStdioIn(t, tree, env, args...)
			bg := context.Background()
			first := ok(bg, t, cs, "new_session", map[string]any{"name": "one"})
			sess := ok(bg, t, cs, "new_session", map[string]any{"name": "two"})
			ok(bg, t, cs, "put", map[string]any{"agent_name": "scout", "file_name": "notes/plan.md", "content": "plan"})
			for _, name := range []string{sess["id"].(string), "current_run.txt", "previous_run_log.txt"} {
				if _, err := os.Stat(filepath.Join(tree, name)); err != nil {
					t.Fatalf("before the clean, %s: %v", name, err)
				}
			}
			if r := ok(bg, t, cs, "clean_sessions", nil); r["success"] != true {
				t.Fatalf("clean_sessions = %v", r)
			}
			for _, name := range []string{first["id"].(string), sess["id"].(string), "current_run.txt", "previous_run_log.txt"} {
				if _, err := os.Stat(filepath.Join(tree, name)); !os.IsNotExist(err) {
					t.Errorf("after the clean, %s: %v; want it gone", name, err)
				}
			}
			if data, err := os.ReadFile(filepath.Join(tree, "src", "main.go")); err != nil || string(data) != mainGo {
				t.Errorf("src/main.go after the clean: %q, %v", data, err)
			}
			if data, err := os.ReadFile(filepath.Join(tree, "NOTES.txt")); err != nil || string(data) != "mine" {
				t.Errorf("NOTES.txt after the clean: %q, %v", data, err)
			}
			if data, err := os.ReadFile(filepath.Join(tree, ".git", "HEAD")); err != nil || !bytes.Equal(data, head) {
				t.Errorf(".git/HEAD after the clean: %q, %v", data, err)
			}
			if out, err := exec.Command("git", "-C", tree, "status", "--porcelain").CombinedOutput(); err != nil {
				t.Errorf("git status after the clean: %v: %s", err, out)
			}
			fails(bg, t, cs, "get_session", nil, "ERR_NO_ACTIVE_SESSION")
		})
	}
}

// ---- 4. a member that never comes back; cancel --------------------------------

// TestOwnerRestartMemberNeverReturns: a pull member takes a detached
// turn; the daemon stops (SIGTERM) and restarts with --rejoin-timeout 1s;
// the member never calls: the ticket ends failed, member_gone, within a
// few seconds, and fleet_ack then succeeds.
func TestOwnerRestartMemberNeverReturns(t *testing.T) {
	f := newFleet(t)
	bg := context.Background()
	o := ok(bg, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "long job", "wait": false})
	if msg := ok(bg, t, f.m1, "fleet_next", map[string]any{"wait_s": 5}); msg["content"] != "long job" {
		t.Fatalf("fleet_next = %v", msg)
	}
	stopDaemon(t, f.d, syscall.SIGTERM, 10*time.Second)
	d2 := startDaemon(t, f.dir, "--rejoin-timeout", "1s")
	start := time.Now()
	lead := connectHTTP(t, d2.url, f.tokens["lead"])
	p := pollUntilDone(bg, t, lead, o["ticket"], 6*time.Second)
	if p["outcome"] != "failed" || p["reason"] != "member_gone" {
		t.Fatalf("ticket of a member that never came back = %v; want failed, member_gone", p)
	}
	t.Logf("ended %v after the restart", time.Since(start).Round(time.Millisecond))
	ok(bg, t, lead, "fleet_ack", map[string]any{"ticket": o["ticket"]})
	fails(bg, t, lead, "fleet_poll", map[string]any{"ticket": o["ticket"]}, "ERR_UNKNOWN_TICKET")
}

// TestOwnerCancelWorkingAndQueued: a lead cancels a working ticket: it
// ends failed, cancelled, and the member's fleet_reply gets
// ERR_TURN_CANCELLED; a cancelled queued message is never delivered.
func TestOwnerCancelWorkingAndQueued(t *testing.T) {
	f := newFleet(t)
	bg := context.Background()
	working := ok(bg, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "job", "wait": false})
	ok(bg, t, f.m1, "fleet_next", map[string]any{"wait_s": 5})
	if p := ok(bg, t, f.lead, "fleet_poll", map[string]any{"ticket": working["ticket"]}); p["state"] != "working" {
		t.Fatalf("ticket = %v; want working", p)
	}
	c := ok(bg, t, f.lead, "fleet_cancel", map[string]any{"ticket": working["ticket"]})
	if c["outcome"] != "failed" || c["reason"] != "cancelled" {
		t.Fatalf("fleet_cancel of a working ticket = %v; want failed, cancelled", c)
	}
	if p := ok(bg, t, f.lead, "fleet_poll", map[string]any{"ticket": working["ticket"]}); p["outcome"] != "failed" || p["reason"] != "cancelled" || p["state"] != "done" {
		t.Fatalf("poll after cancel = %v", p)
	}
	fails(bg, t, f.m1, "fleet_reply", map[string]any{"content": "too late"}, "ERR_TURN_CANCELLED")
	if p := ok(bg, t, f.lead, "fleet_poll", map[string]any{"ticket": working["ticket"]}); p["content"] == "too late" || p["reason"] != "cancelled" {
		t.Fatalf("the cancelled ticket took the late reply: %v", p)
	}

	// m1 holds a turn; a second message waits behind it and is cancelled
	// by its turn ID.
	hold := ok(bg, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "hold", "wait": false})
	if msg := ok(bg, t, f.m1, "fleet_next", map[string]any{"wait_s": 5}); msg["content"] != "hold" {
		t.Fatalf("fleet_next = %v", msg)
	}
	queued := ok(bg, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "never delivered", "wait": false})
	if p := ok(bg, t, f.lead, "fleet_poll", map[string]any{"ticket": queued["ticket"]}); p["state"] != "queued" {
		t.Fatalf("ticket = %v; want queued", p)
	}
	if c := ok(bg, t, f.lead, "fleet_cancel", map[string]any{"turn_id": queued["turn_id"]}); c["outcome"] != "failed" || c["reason"] != "cancelled" {
		t.Fatalf("fleet_cancel of a queued message = %v", c)
	}
	ok(bg, t, f.m1, "fleet_reply", map[string]any{"content": "held"})
	after := ok(bg, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "after", "wait": false})
	for range 2 {
		msg := ok(bg, t, f.m1, "fleet_next", map[string]any{"wait_s": 1})
		if msg["content"] == "never delivered" {
			t.Fatalf("the cancelled queued message was delivered: %v", msg)
		}
		if msg["outcome"] == "none" {
			break
		}
		if msg["turn_id"] != after["turn_id"] {
			t.Fatalf("fleet_next = %v; want the message sent after the cancel", msg)
		}
		ok(bg, t, f.m1, "fleet_reply", map[string]any{"content": "after done"})
	}
	for tk, want := range map[any]string{hold["ticket"]: "held", after["ticket"]: "after done"} {
		if p := ok(bg, t, f.lead, "fleet_poll", map[string]any{"ticket": tk}); p["content"] != want {
			t.Fatalf("ticket %v = %v; want %q", tk, p, want)
		}
	}
}

// ---- 5. readiness rebuilt after a restart -------------------------------------

// TestOwnerRestartProxyStaysReady: a member behind `fleetstate mcp
// --connect` holds a turn with a second message queued behind it; the
// daemon restarts on the same port with --ready-timeout 1s and
// --rejoin-timeout 2s; the proxy reopens its listening stream, and 3 s on
// the queued ticket is still queued (not member_not_ready) and the open
// turn still open: the member's reply lands, then it gets the queued one.
func TestOwnerRestartProxyStaysReady(t *testing.T) {
	dir := t.TempDir()
	tokens := map[string]string{"lead": addToken(t, dir, "lead", "lead"), "m1": addToken(t, dir, "m1", "member")}
	addr := freeAddr(t)
	d1 := startDaemon(t, dir, "--addr", addr)
	bg := context.Background()
	lead := connectHTTP(t, d1.url, tokens["lead"])
	proxy := startRaw(t, []string{"FLEET_TOKEN=" + tokens["m1"]}, "mcp", "--connect", d1.url)
	first := ok(bg, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "first", "wait": false})
	if msg := proxy.ok(proxy.call("fleet_next", map[string]any{"wait_s": 5})); msg["content"] != "first" {
		t.Fatalf("fleet_next through the proxy = %v", msg)
	}
	second := ok(bg, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "second", "wait": false})
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": second["ticket"]}); p["state"] != "queued" {
		t.Fatalf("second ticket = %v; want queued", p)
	}

	stopDaemon(t, d1, syscall.SIGTERM, 10*time.Second)
	d2 := startDaemon(t, dir, "--addr", addr, "--ready-timeout", "1s", "--rejoin-timeout", "2s")
	if d2.url != d1.url {
		t.Fatalf("restarted on %s; want %s", d2.url, d1.url)
	}
	// A call through the proxy makes it try the daemon at once rather
	// than at its next backoff (up to 3 s away when the restart was slow,
	// past the 2 s rejoin window); it has to wait for the new link, and so
	// for the reopened stream's dial.
	if r := proxy.wait(proxy.call("get_session", nil), 30*time.Second); r.Result == nil || (r.Result.IsError && r.Result.StructuredContent["error"] != "ERR_NO_ACTIVE_SESSION") {
		t.Fatalf("get_session through the proxy after the restart: %+v %+v", r.Result, r.Error)
	}
	time.Sleep(3 * time.Second) // past both bounds; only the reopened stream keeps m1 ready
	lead2 := connectHTTP(t, d2.url, tokens["lead"])
	if p := ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": second["ticket"]}); p["state"] != "queued" {
		t.Fatalf("3 s after the restart the queued ticket = %v; want still queued (the proxy's stream reopened)", p)
	}
	if p := ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": first["ticket"]}); p["state"] != "working" {
		t.Fatalf("3 s after the restart the open turn = %v; want still working", p)
	}
	if m := ok(bg, t, lead2, "fleet_members", nil)["members"].([]any)[0].(map[string]any); m["ready"] != true {
		t.Errorf("m1 after the restart: %v; want ready", m)
	}
	proxy.ok(proxy.call("fleet_reply", map[string]any{"content": "first done"}))
	if p := ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": first["ticket"], "wait_s": 3}); p["outcome"] != "reply" || p["content"] != "first done" {
		t.Fatalf("first ticket = %v; want the reply on the restored turn", p)
	}
	if msg := proxy.ok(proxy.call("fleet_next", map[string]any{"wait_s": 5})); msg["content"] != "second" || msg["turn_id"] != second["turn_id"] {
		t.Fatalf("fleet_next after the restart = %v; want the queued message", msg)
	}
	proxy.ok(proxy.call("fleet_reply", map[string]any{"content": "second done"}))
	if p := ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": second["ticket"], "wait_s": 3}); p["content"] != "second done" {
		t.Fatalf("second ticket = %v", p)
	}
}

// ---- 6. restart mid-ask ---------------------------------------------------------

// TestOwnerRestartMidAskAnswered: a member's fleet_ask is blocked when the
// daemon restarts; its call ends with an error; the lead sees the
// question after the restart and answers it by turn ID; the member,
// reconnected, asks again in that turn and gets the answer at once; its
// reply then reaches the lead.
func TestOwnerRestartMidAskAnswered(t *testing.T) {
	dir := t.TempDir()
	tokens := map[string]string{"lead": addToken(t, dir, "lead", "lead"), "m1": addToken(t, dir, "m1", "member")}
	addr := freeAddr(t)
	d1 := startDaemon(t, dir, "--addr", addr, "--ask-timeout", "5s")
	bg := context.Background()
	lead := connectHTTP(t, d1.url, tokens["lead"])
	m1 := connectHTTP(t, d1.url, tokens["m1"])
	o := ok(bg, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "build it", "wait": false})
	ok(bg, t, m1, "fleet_next", map[string]any{"wait_s": 5})
	askCtx, cancelAsk := context.WithTimeout(bg, 10*time.Second)
	defer cancelAsk()
	asked := async(askCtx, t, m1, "fleet_ask", map[string]any{"question": "which branch?", "default": "main"})
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": o["ticket"], "wait_s": 5}); p["state"] != "question" || p["content"] != "which branch?" {
		t.Fatalf("poll = %v; want the question", p)
	}

	stopDaemon(t, d1, syscall.SIGTERM, 10*time.Second)
	a := recvWithin(t, asked, 8*time.Second)
	if a["call_error"] == nil && a["error"] == nil {
		t.Fatalf("the member's fleet_ask across the restart = %v; want an error", a)
	}
	if a["answer"] != nil {
		t.Fatalf("the member's fleet_ask across the restart answered %v", a)
	}
	t.Logf("fleet_ask across the restart: %v", a)

	d2 := startDaemon(t, dir, "--addr", addr, "--ask-timeout", "5s")
	lead2 := connectHTTP(t, d2.url, tokens["lead"])
	p := ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": o["ticket"]})
	if p["state"] != "question" || p["content"] != "which branch?" {
		t.Fatalf("poll after the restart = %v; want the question", p)
	}
	sendCtx, cancelSend := context.WithTimeout(bg, 10*time.Second)
	defer cancelSend()
	answered := async(sendCtx, t, lead2, "fleet_send", map[string]any{"turn_id": p["turn_id"], "content": "release-2"})
	select {
	case r := <-answered:
		t.Fatalf("answering the restored question = %v; want it accepted (blocking on the reply)", r)
	case <-time.After(200 * time.Millisecond):
	}

	m1b := connectHTTP(t, d2.url, tokens["m1"])
	start := time.Now()
	again := ok(bg, t, m1b, "fleet_ask", map[string]any{"question": "which branch?", "default": "main"})
	if again["answer"] != "release-2" || again["timed_out"] != false {
		t.Fatalf("fleet_ask in the restored turn = %v; want the lead's answer", again)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the answered fleet_ask took %v; want it at once", d)
	}
	ok(bg, t, m1b, "fleet_reply", map[string]any{"content": "built release-2"})
	if r := recvWithin(t, answered, 8*time.Second); r["outcome"] != "reply" || r["content"] != "built release-2" {
		t.Fatalf("the answer's outcome = %v; want the reply", r)
	}
	if p := ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["content"] != "built release-2" || p["state"] != "done" {
		t.Fatalf("ticket = %v", p)
	}
}

// TestOwnerRestoredQuestionWindowPasses: a restored question nobody
// answers goes back to working when its window passes, and a waiting
// fleet_poll over all tickets after the lead has seen the question does
// not return at once (it does not spin). The window (8 s) leaves room for
// a slow restart.
func TestOwnerRestoredQuestionWindowPasses(t *testing.T) {
	dir := t.TempDir()
	tokens := map[string]string{"lead": addToken(t, dir, "lead", "lead"), "m1": addToken(t, dir, "m1", "member")}
	d1 := startDaemon(t, dir, "--ask-timeout", "8s")
	bg := context.Background()
	lead := connectHTTP(t, d1.url, tokens["lead"])
	m1 := connectHTTP(t, d1.url, tokens["m1"])
	o := ok(bg, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "job", "wait": false})
	ok(bg, t, m1, "fleet_next", map[string]any{"wait_s": 5})
	askCtx, cancelAsk := context.WithTimeout(bg, 10*time.Second)
	defer cancelAsk()
	asked := async(askCtx, t, m1, "fleet_ask", map[string]any{"question": "why?", "default": "because"})
	askedAt := time.Now()
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": o["ticket"], "wait_s": 3}); p["state"] != "question" {
		t.Fatalf("poll = %v; want the question", p)
	}
	stopDaemon(t, d1, syscall.SIGTERM, 10*time.Second)
	recvWithin(t, asked, 8*time.Second)

	d2 := startDaemon(t, dir, "--ask-timeout", "8s")
	lead2 := connectHTTP(t, d2.url, tokens["lead"])
	// The lead sees the question once.
	all := ok(bg, t, lead2, "fleet_poll", nil)
	ts, _ := all["tickets"].([]any)
	if len(ts) != 1 || ts[0].(map[string]any)["state"] != "question" {
		if time.Since(askedAt) < 7*time.Second {
			t.Fatalf("tickets after the restart = %v; want the question", all)
		}
		t.Fatalf("the restart took too long (%v) for the window; tickets %v", time.Since(askedAt), all)
	}
	// A waiting poll over all tickets does not return at once.
	start := time.Now()
	all = ok(bg, t, lead2, "fleet_poll", map[string]any{"wait_s": 3})
	elapsed := time.Since(start)
	ts, _ = all["tickets"].([]any)
	state := ""
	if len(ts) == 1 {
		state, _ = ts[0].(map[string]any)["state"].(string)
	}
	if elapsed < 2*time.Second && state != "working" {
		t.Fatalf("fleet_poll {wait_s: 3} after the question was seen returned after %v with %v; want it to wait for news", elapsed, all)
	}
	// The window passes: the ticket works again, and the question can no
	// longer be answered.
	var p map[string]any
	if !fleettest.Until(12*time.Second, 100*time.Millisecond, func() bool {
		p = ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": o["ticket"]})
		return p["state"] == "working"
	}) {
		t.Fatalf("%v after the question was asked with an 8 s window, ticket = %v; want working", time.Since(askedAt), p)
	}
	if w := time.Since(askedAt); w < 7*time.Second {
		t.Errorf("the question's window ended after %v; want about 8 s", w)
	}
	fails(bg, t, lead2, "fleet_send", map[string]any{"turn_id": o["turn_id"], "content": "late"}, "ERR_NO_PENDING_QUESTION")
	fails(bg, t, lead2, "fleet_ack", map[string]any{"ticket": o["ticket"]}, "ERR_TICKET_OPEN")
}

// ---- 7. two connections under one member token ---------------------------------

// memberConn is one connection of a member: a tool call returning the
// structured content and whether it is an error result.
type memberConn func(name string, args map[string]any) (map[string]any, bool)

// TestOwnerTwoConnectionsOneToken: connections A and B under one member
// token: A takes task 1; B's fleet_next takes task 2; A's reply "X = 42" is
// refused and recorded nowhere; B's reply "Y = 7" lands on task 2.
//
// With MCP sessions (two `fleetstate mcp --connect` proxy processes), B's
// first fleet call supersedes A: task 1 ends failed, member_gone, and A's
// calls answer ERR_SUPERSEDED. Clients of the official Go SDK speak the
// 2026-07-28 protocol, which has no sessions: the two cannot be told apart,
// so each passes the turn_id fleet_next gave it, and A's reply, bound to
// task 1, is refused with ERR_NO_OPEN_TURN (B's fleet_next ended task 1
// turn_done, as a member asking for new work does).
func TestOwnerTwoConnectionsOneToken(t *testing.T) {
	t.Run("proxies", func(t *testing.T) {
		twoConnections(t, true, func(t *testing.T, url, token string) memberConn {
			p := startRaw(t, []string{"FLEET_TOKEN=" + token}, "mcp", "--connect", url)
			return func(name string, args map[string]any) (map[string]any, bool) {
				r := p.wait(p.call(name, args), 10*time.Second)
				if r.Result == nil {
					t.Fatalf("%s through the proxy: %+v", name, r.Error)
				}
				return r.Result.StructuredContent, r.Result.IsError
			}
		})
	})
	t.Run("sdk clients", func(t *testing.T) {
		twoConnections(t, false, func(t *testing.T, url, token string) memberConn {
			cs := connectHTTP(t, url, token)
			return func(name string, args map[string]any) (map[string]any, bool) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return call(ctx, t, cs, name, args)
			}
		})
	})
}

func twoConnections(t *testing.T, sessions bool, connect func(t *testing.T, url, token string) memberConn) {
	dir := t.TempDir()
	tokens := map[string]string{"lead": addToken(t, dir, "lead", "lead"), "scout": addToken(t, dir, "scout", "member")}
	d := startDaemon(t, dir)
	bg := context.Background()
	lead := connectHTTP(t, d.url, tokens["lead"])
	a := connect(t, d.url, tokens["scout"])
	b := connect(t, d.url, tokens["scout"])
	t1 := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "task 1: compute X", "wait": false})
	t2 := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "task 2: compute Y", "wait": false})
	if msg, isErr := a("fleet_next", map[string]any{"wait_s": 5}); isErr || msg["turn_id"] != t1["turn_id"] {
		t.Fatalf("A's fleet_next = %v; want task 1", msg)
	}
	if msg, isErr := b("fleet_next", map[string]any{"wait_s": 5}); isErr || msg["turn_id"] != t2["turn_id"] {
		t.Fatalf("B's fleet_next = %v; want task 2", msg)
	}
	p1 := pollUntilDone(bg, t, lead, t1["ticket"], 5*time.Second)
	wantT1, wantA := "failed/member_gone", "ERR_SUPERSEDED"
	if !sessions {
		wantT1, wantA = "turn_done/<nil>", "ERR_NO_OPEN_TURN"
	}
	if got := fmt.Sprintf("%v/%v", p1["outcome"], p1["reason"]); got != wantT1 {
		t.Errorf("task 1 after B took task 2 = %v; want %s", p1, wantT1)
	}
	if out, isErr := a("fleet_reply", map[string]any{"content": "X = 42", "turn_id": t1["turn_id"]}); !isErr || out["error"] != wantA {
		t.Errorf("A's fleet_reply after B took over = %v (isError %v); want %s", out, isErr, wantA)
	}
	if out, isErr := b("fleet_reply", map[string]any{"content": "Y = 7", "turn_id": t2["turn_id"]}); isErr {
		t.Errorf("B's fleet_reply = %v; want it accepted", out)
	}
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": t2["ticket"], "wait_s": 3}); p["outcome"] != "reply" || p["content"] != "Y = 7" {
		t.Errorf("task 2 = %v; want B's reply Y = 7", p)
	}
	for _, tk := range ok(bg, t, lead, "fleet_poll", nil)["tickets"].([]any) {
		o := tk.(map[string]any)
		if o["content"] == "X = 42" {
			t.Errorf("A's refused reply was recorded: %v", o)
		}
	}
	if !sessions {
		return
	}
	if out, isErr := a("fleet_next", map[string]any{"wait_s": 0}); !isErr || out["error"] != "ERR_SUPERSEDED" {
		t.Errorf("A's fleet_next after B took over = %v (isError %v); want ERR_SUPERSEDED", out, isErr)
	}
}

// ---- 8. abandoned blocking sends -------------------------------------------------

var abandonRounds = flag.Int("abandon-rounds", 300, "rounds of TestOwnerAbandonedSendsLoseNothing")

// TestOwnerAbandonedSendsLoseNothing: a lead's blocking fleet_send is
// cancelled by its client right as the member replies, round after round
// on one lead connection, with varying tiny delays; every reply either
// reached the call or is found afterwards by a new lead connection's
// fleet_poll.
func TestOwnerAbandonedSendsLoseNothing(t *testing.T) {
	rounds := *abandonRounds
	f := newFleet(t)
	bg := context.Background()
	received := map[int]bool{}
	replied := map[int]bool{}
	cancelledFirst := 0
	for i := range rounds {
		ctx, cancel := context.WithCancel(bg)
		sent := async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": fmt.Sprintf("job %d", i)})
		mctx, mcancel := context.WithTimeout(bg, 5*time.Second)
		if msg := ok(mctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 5}); msg["content"] != fmt.Sprintf("job %d", i) {
			mcancel()
			cancel()
			t.Fatalf("round %d: fleet_next = %v", i, msg)
		}
		var wg sync.WaitGroup
		var replyOut map[string]any
		var replyIsErr bool
		var replyErr error
		wg.Go(func() {
			replyOut, replyIsErr, replyErr = tryCall(mctx, f.m1, "fleet_reply", map[string]any{"content": fmt.Sprintf("reply %d", i)})
		})
		time.Sleep(time.Duration(i%10) * 200 * time.Microsecond)
		cancel()
		wg.Wait()
		mcancel()
		if replyErr != nil || replyIsErr {
			t.Fatalf("round %d: fleet_reply = %v, %v", i, replyOut, replyErr)
		}
		replied[i] = true
		r := recvWithin(t, sent, 5*time.Second)
		switch {
		case r["call_error"] != nil:
			cancelledFirst++
		case r["outcome"] == "reply":
			if r["content"] != fmt.Sprintf("reply %d", i) {
				t.Fatalf("round %d: the send returned %v", i, r)
			}
			received[i] = true
		default:
			t.Fatalf("round %d: the send returned %v", i, r)
		}
	}
	// One more call on the lead's connection: it releases what that
	// connection's calls returned, and only that.
	ok(bg, t, f.lead, "fleet_members", nil)
	ok(bg, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "flush", "wait": false})

	back := connectHTTP(t, f.d.url, f.tokens["lead"])
	found := map[int]bool{}
	for _, tk := range ok(bg, t, back, "fleet_poll", map[string]any{"limit": 1000})["tickets"].([]any) {
		o := tk.(map[string]any)
		var n int
		if c, _ := o["content"].(string); o["outcome"] == "reply" {
			if _, err := fmt.Sscanf(c, "reply %d", &n); err == nil {
				found[n] = true
			}
		}
	}
	lost := []int{}
	for i := range rounds {
		if replied[i] && !received[i] && !found[i] {
			lost = append(lost, i)
		}
	}
	t.Logf("%d rounds: %d replies returned to the call, %d calls cancelled first, %d found by poll; lost %d", rounds, len(received), cancelledFirst, len(found), len(lost))
	if len(lost) != 0 {
		t.Fatalf("replies lost (neither returned to the cancelled call nor held on a ticket): rounds %v", lost)
	}
}

// ---- 9. a member revoked while the daemon is down -----------------------------

// TestOwnerRevokedMemberTurnsEnd: a member's token is revoked while the
// daemon is down, with one turn of it open and one queued; after the
// restart both tickets end failed within a few seconds (member_removed,
// or member_not_ready for the queued one); neither stays queued or
// working.
func TestOwnerRevokedMemberTurnsEnd(t *testing.T) {
	dir := t.TempDir()
	tokens := map[string]string{"lead": addToken(t, dir, "lead", "lead"), "scout": addToken(t, dir, "scout", "member")}
	d1 := startDaemon(t, dir)
	bg := context.Background()
	lead := connectHTTP(t, d1.url, tokens["lead"])
	scout := connectHTTP(t, d1.url, tokens["scout"])
	open := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "open", "wait": false})
	ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 5})
	queued := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "queued", "wait": false})
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": queued["ticket"]}); p["state"] != "queued" {
		t.Fatalf("ticket = %v; want queued", p)
	}
	stopDaemon(t, d1, syscall.SIGTERM, 10*time.Second)
	if out, err := exec.Command(binary, "token", "revoke", "--agent", "scout", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("token revoke: %v: %s", err, out)
	}
	d2 := startDaemon(t, dir, "--ready-timeout", "1s")
	lead2 := connectHTTP(t, d2.url, tokens["lead"])
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range []struct {
		name   string
		ticket any
	}{{"queued", queued["ticket"]}, {"open", open["ticket"]}} {
		var p map[string]any
		fleettest.Until(time.Until(deadline), 0, func() bool {
			p = ok(bg, t, lead2, "fleet_poll", map[string]any{"ticket": c.ticket, "wait_s": 1})
			return p["state"] == "done"
		})
		reason := p["reason"]
		if p["outcome"] != "failed" || reason != "member_removed" {
			t.Errorf("5 s after the restart, the %s ticket of a member revoked meanwhile = %v; want failed, member_removed", c.name, p)
			continue
		}
		ok(bg, t, lead2, "fleet_ack", map[string]any{"ticket": c.ticket})
	}
	fails(bg, t, lead2, "fleet_send", map[string]any{"to": "scout", "content": "x", "wait": false}, "ERR_UNKNOWN_MEMBER")
}
