package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// binary is the fleetstate binary built once for the end-to-end tests,
// which drive it with the official MCP Go SDK as an independent client.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleetstate-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "fleetstate")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		panic("build fleetstate: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a running `fleetstate serve`, its standard error kept line by
// line.
type daemonProc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs []string // guarded by mu
}

// lines returns what the daemon logged so far.
func (d *daemonProc) lines() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.logs...)
}

// urlRE finds the daemon's address in its log, text or JSON.
var urlRE = regexp.MustCompile(`"?url"?[=:]"?(http://127\.0\.0\.1:\d+/mcp)`)

// startDaemon runs `fleetstate serve` on a free loopback port and waits for
// it to listen. The test's cleanup kills it.
func startDaemon(t *testing.T, dir string, args ...string) *daemonProc {
	t.Helper()
	return startServe(t, append([]string{"--dir", dir}, args...)...)
}

// startServe runs `fleetstate serve` with args on a free loopback port and
// waits for it to listen. The test's cleanup kills it.
func startServe(t *testing.T, args ...string) *daemonProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{cmd: cmd}
	t.Cleanup(func() {
		d.kill(syscall.SIGKILL)
		if t.Failed() { // what the daemon said, for the failure's story
			t.Logf("the log of the daemon at %s:\n%s", d.url, strings.Join(d.lines(), "\n"))
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.mu.Lock()
			d.logs = append(d.logs, sc.Text())
			d.mu.Unlock()
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case d.url = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not report its address")
	}
	return d
}

// kill signals the daemon and waits for it to exit.
func (d *daemonProc) kill(sig syscall.Signal) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	_ = d.cmd.Wait()
}

// addTokens issues a token to each agent with its role (`fleetstate token
// add`) and returns the tokens by agent.
func addTokens(t *testing.T, dir string, agents map[string]string) map[string]string {
	t.Helper()
	tokens := make(map[string]string, len(agents))
	for agent, role := range agents {
		tokens[agent] = addToken(t, dir, agent, role)
	}
	return tokens
}

func addToken(t *testing.T, dir, agent, role string) string {
	t.Helper()
	out, err := exec.Command(binary, "token", "add", "--dir", dir, "--agent", agent, "--role", role).Output()
	if err != nil {
		t.Fatalf("token add %s: %v", agent, err)
	}
	return strings.TrimSpace(string(out))
}

func connectHTTP(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	return mcptest.Connect(t, url, token)
}

func connectStdio(t *testing.T, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call, ok, fails, async and recvWithin are the test kit's (mcptest).
func call(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	return mcptest.Call(ctx, t, cs, name, args)
}

func ok(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	return mcptest.OK(ctx, t, cs, name, args)
}

func fails(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, code string) {
	t.Helper()
	mcptest.Fails(ctx, t, cs, name, args, code)
}

func TestStdioStoreContract(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cs := connectStdio(t, []string{"FLEET_STATE_DIRECTORY=" + dir, "FLEET_AGENT=", "FLEET_ROLE="})
	fails(ctx, t, cs, "get_session", nil, "ERR_NO_ACTIVE_SESSION")
	fails(ctx, t, cs, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "x"}, "ERR_NO_ACTIVE_SESSION")
	sess := ok(ctx, t, cs, "new_session", map[string]any{"name": "e2e"})
	got := ok(ctx, t, cs, "get_session", nil)
	if got["id"] != sess["id"] || got["name"] != "e2e" {
		t.Fatalf("get_session = %v; want %v named e2e", got, sess["id"])
	}
	put := ok(ctx, t, cs, "put", map[string]any{"agent_name": "scout", "file_name": "nested/dir/notes.md", "content": "hello"})
	id, _ := put["id"].(string)
	if want := "fsm::file::" + sess["id"].(string) + "::scout::nested/dir/notes.md"; id != want {
		t.Fatalf("put id = %q; want %q", id, want)
	}
	fails(ctx, t, cs, "put", map[string]any{"agent_name": "scout", "file_name": "nested/dir/notes.md", "content": "again"}, "ERR_FILE_EXISTS")
	ok(ctx, t, cs, "put", map[string]any{"agent_name": "scout", "file_name": "nested/dir/notes.md", "content": "again", "overwrite": true})
	if c := ok(ctx, t, cs, "get", map[string]any{"id": id}); c["content"] != "again" {
		t.Fatalf("get = %v", c)
	}
	data, err := os.ReadFile(filepath.Join(dir, sess["id"].(string), "scout", "nested", "dir", "notes.md"))
	if err != nil || string(data) != "again" {
		t.Fatalf("file on disk = %q, %v; want the fleet-state-mgr layout", data, err)
	}
	list := ok(ctx, t, cs, "list", nil)
	if files, _ := list["files"].([]any); len(files) != 1 {
		t.Fatalf("list = %v; want one file", list)
	}
	fails(ctx, t, cs, "get", map[string]any{"id": "not-an-id"}, "ERR_CAN_ONLY_RETRIEVE_FILES")
	fails(ctx, t, cs, "get", map[string]any{"id": strings.Replace(id, "scout", "nobody", 1)}, "ERR_AGENT_NOT_VALID")
	fails(ctx, t, cs, "put", map[string]any{"agent_name": "scout", "file_name": "../escape", "content": "x"}, "ERR_INVALID_FILE_NAME")
	fails(ctx, t, cs, "put", map[string]any{"agent_name": "scout", "file_name": "f", "content": 7}, "ERR_INVALID_ARGUMENT")
	fails(ctx, t, cs, "fleet_send", map[string]any{"to": "scout", "content": "x"}, "ERR_NOT_PERMITTED")
	if r := ok(ctx, t, cs, "clean_sessions", nil); r["success"] != true {
		t.Fatalf("clean_sessions = %v", r)
	}
	fails(ctx, t, cs, "get_session", nil, "ERR_NO_ACTIVE_SESSION")
}

// fleet is a daemon with a lead and two members connected over HTTP.
type fleet struct {
	dir    string
	d      *daemonProc
	tokens map[string]string
	lead   *mcp.ClientSession
	m1, m2 *mcp.ClientSession
}

func newFleet(t *testing.T, args ...string) *fleet {
	t.Helper()
	f := &fleet{dir: t.TempDir()}
	f.tokens = addTokens(t, f.dir, map[string]string{"lead": "lead", "m1": "member", "m2": "member"})
	f.d = startDaemon(t, f.dir, args...)
	f.lead = connectHTTP(t, f.d.url, f.tokens["lead"])
	f.m1 = connectHTTP(t, f.d.url, f.tokens["m1"])
	f.m2 = connectHTTP(t, f.d.url, f.tokens["m2"])
	return f
}

func async(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) <-chan map[string]any {
	return mcptest.Async(ctx, cs, name, args)
}

func recvWithin(t *testing.T, ch <-chan map[string]any, d time.Duration) map[string]any {
	t.Helper()
	return mcptest.RecvWithin(t, ch, d)
}

func TestHTTPRestartKeepsHeldReply(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	o := ok(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "job", "wait": false})
	ok(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	ok(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "survives"})
	queued := ok(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "queued", "wait": false})
	f.d.kill(syscall.SIGKILL)

	d2 := startDaemon(t, f.dir)
	lead := connectHTTP(t, d2.url, f.tokens["lead"])
	if p := ok(ctx, t, lead, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["outcome"] != "reply" || p["content"] != "survives" {
		t.Fatalf("after a restart fleet_poll = %v; want the held reply", p)
	}
	m2 := connectHTTP(t, d2.url, f.tokens["m2"])
	if msg := ok(ctx, t, m2, "fleet_next", map[string]any{"wait_s": 5}); msg["content"] != "queued" || msg["turn_id"] == nil {
		t.Fatalf("after a restart fleet_next = %v; want the queued message", msg)
	}
	if p := ok(ctx, t, lead, "fleet_poll", map[string]any{"ticket": queued["ticket"]}); p["state"] != "working" {
		t.Fatalf("queued ticket after delivery = %v", p)
	}
}

func TestStdioConnectForwardsToDaemon(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	proxy := connectStdio(t, []string{"FLEET_TOKEN=" + f.tokens["m1"]}, "mcp", "--connect", f.d.url)
	sent := async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "via proxy"})
	if msg := ok(ctx, t, proxy, "fleet_next", map[string]any{"wait_s": 10}); msg["content"] != "via proxy" {
		t.Fatalf("fleet_next through the proxy = %v", msg)
	}
	ok(ctx, t, proxy, "fleet_reply", map[string]any{"content": "proxied reply"})
	if o := recvWithin(t, sent, 10*time.Second); o["content"] != "proxied reply" {
		t.Fatalf("fleet_send = %v", o)
	}
	// The proxy's identity is its token's: a member, not a lead.
	fails(ctx, t, proxy, "fleet_members", nil, "ERR_NOT_PERMITTED")
}

func TestDemoRunsEveryFlow(t *testing.T) {
	var out syncBuffer
	err := run(context.Background(), []string{"demo"}, strings.NewReader(""), &out, &out, nil)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"got reply from alice", "got question from bob", "got reply from bob: \"built release-2", "carol's report", "acked the ticket"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo transcript lacks %q:\n%s", want, out.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStdioBlockingCallsDoNotStarve writes more blocking calls than
// mcp-go's default stdio worker pool (5) to the server's input, then one
// more call, and checks that the last is answered while the others wait.
func TestStdioBlockingCallsDoNotStarve(t *testing.T) {
	cmd := exec.Command(binary, "mcp", "--dir", t.TempDir(), "--agent", "worker", "--role", "member")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var msgs []string
	msgs = append(msgs,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := 1; i <= 12; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fleet_next","arguments":{"wait_s":30}}}`, i))
	}
	msgs = append(msgs, `{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"get_session","arguments":{}}}`)
	if _, err := io.WriteString(stdin, strings.Join(msgs, "\n")+"\n"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan []int, 1)
	go func() {
		var ids []int
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var resp struct{ ID *int }
			if json.Unmarshal(sc.Bytes(), &resp) == nil && resp.ID != nil {
				ids = append(ids, *resp.ID)
				if *resp.ID == 100 {
					answered <- ids
					return
				}
			}
		}
	}()
	select {
	case ids := <-answered:
		for _, id := range ids {
			if id >= 1 && id <= 12 {
				t.Fatalf("responses up to get_session's: %v; a parked fleet_next returned early", ids)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("get_session got no answer while 12 fleet_next calls were parked: the worker pool starves")
	}
}

// TestHTTPShutdownReleasesBlockedCalls sends SIGTERM to a daemon with a
// lead blocked in fleet_send: the call returns pending with its ticket, the
// daemon exits cleanly, and the ticket is there after a restart.
func TestHTTPShutdownReleasesBlockedCalls(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	sent := async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "job"})
	ok(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	if err := f.d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o := recvWithin(t, sent, 10*time.Second)
	ticket, _ := o["ticket"].(string)
	if o["outcome"] != "pending" || ticket == "" {
		t.Fatalf("blocked send at shutdown = %v; want pending with its ticket", o)
	}
	if err := f.d.cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v", err)
	}
	d2 := startDaemon(t, f.dir)
	lead := connectHTTP(t, d2.url, f.tokens["lead"])
	if p := ok(ctx, t, lead, "fleet_poll", map[string]any{"ticket": ticket}); p["state"] != "working" {
		t.Fatalf("ticket after restart = %v; want the open turn", p)
	}
	m1 := connectHTTP(t, d2.url, f.tokens["m1"])
	ok(ctx, t, m1, "fleet_reply", map[string]any{"content": "after restart"})
	if p := ok(ctx, t, lead, "fleet_poll", map[string]any{"ticket": ticket}); p["content"] != "after restart" {
		t.Fatalf("reply after restart = %v", p)
	}
}
