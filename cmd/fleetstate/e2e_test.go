package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
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
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: fleettest.BearerClient(token), MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
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

// call calls a tool and returns its structured content and whether it is
// an error result.
func call(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, data, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks; want the JSON text once", name, len(res.Content))
	}
	if text, ok := res.Content[0].(*mcp.TextContent); !ok || !jsonEqual(text.Text, data) {
		t.Fatalf("%s: text content %v differs from the structured content %s", name, res.Content[0], data)
	}
	return out, res.IsError
}

func jsonEqual(a string, b []byte) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func ok(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	out, isErr := call(ctx, t, cs, name, args)
	if isErr {
		t.Fatalf("%s(%v) failed: %v", name, args, out)
	}
	return out
}

func fails(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, code string) {
	t.Helper()
	out, isErr := call(ctx, t, cs, name, args)
	if !isErr || out["error"] != code || out["message"] == "" {
		t.Fatalf("%s(%v) = %v (isError %v); want error %s with a message", name, args, out, isErr, code)
	}
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

// async runs a tool call in a goroutine.
func async(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) <-chan map[string]any {
	ch := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			ch <- map[string]any{"call_error": err.Error()}
			return
		}
		data, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		_ = json.Unmarshal(data, &out)
		ch <- out
	}()
	return ch
}

func recvWithin(t *testing.T, ch <-chan map[string]any, d time.Duration) map[string]any {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no result within %v", d)
		return nil
	}
}

func TestHTTPDelegationClarificationDetached(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()

	// Delegation: blocking send, answered by the member's reply.
	sent := async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "count files"})
	msg := ok(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	if msg["content"] != "count files" || msg["from"] != "lead" {
		t.Fatalf("fleet_next = %v", msg)
	}
	ok(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "12 files"})
	if o := recvWithin(t, sent, 10*time.Second); o["outcome"] != "reply" || o["content"] != "12 files" || o["from"] != "m1" {
		t.Fatalf("fleet_send = %v", o)
	}

	// Clarification by turn ID.
	sent = async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "build it"})
	ok(ctx, t, f.m2, "fleet_next", map[string]any{"wait_s": 10})
	asked := async(ctx, t, f.m2, "fleet_ask", map[string]any{"question": "which branch?", "default": "main"})
	q := recvWithin(t, sent, 10*time.Second)
	if q["outcome"] != "question" || q["content"] != "which branch?" || q["turn_id"] == nil {
		t.Fatalf("fleet_send = %v; want the question", q)
	}
	answered := async(ctx, t, f.lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "release-2"})
	if a := recvWithin(t, asked, 10*time.Second); a["answer"] != "release-2" || a["timed_out"] != false {
		t.Fatalf("fleet_ask = %v", a)
	}
	fails(ctx, t, f.lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "again"}, "ERR_NO_PENDING_QUESTION")
	ok(ctx, t, f.m2, "fleet_reply", map[string]any{"content": "built release-2"})
	if o := recvWithin(t, answered, 10*time.Second); o["outcome"] != "reply" || o["content"] != "built release-2" {
		t.Fatalf("answer's outcome = %v", o)
	}

	// Detached: a ticket at once, the reply held until acked.
	o := ok(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "long job", "wait": false})
	ticket, _ := o["ticket"].(string)
	if o["outcome"] != "pending" || ticket == "" {
		t.Fatalf("detached send = %v", o)
	}
	ok(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	ok(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "long job done"})
	p := ok(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": ticket, "wait_s": 10})
	if p["outcome"] != "reply" || p["content"] != "long job done" || p["state"] != "done" {
		t.Fatalf("fleet_poll = %v", p)
	}
	// The outcomes the blocking calls returned are held too, for a lead
	// whose responses were lost, and marked returned.
	all := ok(ctx, t, f.lead, "fleet_poll", nil)
	held := 0
	for _, tk := range all["tickets"].([]any) {
		if o := tk.(map[string]any); o["returned"] != true {
			held++
		}
	}
	if ts, _ := all["tickets"].([]any); held != 1 || len(ts) != 3 {
		t.Fatalf("fleet_poll all = %v; want the held ticket and the two returned outcomes", all)
	}
	ok(ctx, t, f.lead, "fleet_ack", map[string]any{"ticket": ticket})
	fails(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": ticket}, "ERR_UNKNOWN_TICKET")

	// Authority over the wire.
	fails(ctx, t, f.m1, "fleet_send", map[string]any{"to": "m2", "content": "x"}, "ERR_NOT_PERMITTED")
	fails(ctx, t, f.m1, "clean_sessions", nil, "ERR_NOT_PERMITTED")
	fails(ctx, t, f.lead, "fleet_reply", map[string]any{"content": "x"}, "ERR_NOT_PERMITTED")
	fails(ctx, t, f.lead, "fleet_send", map[string]any{"to": "stranger", "content": "x"}, "ERR_UNKNOWN_MEMBER")

	// Cleaning the sessions drops fleet state, never the tokens.
	ok(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "dropped", "wait": false})
	ok(ctx, t, f.lead, "clean_sessions", nil)
	if all := ok(ctx, t, f.lead, "fleet_poll", nil); len(all["tickets"].([]any)) != 0 {
		t.Fatalf("tickets after clean_sessions: %v", all)
	}
	lead2 := connectHTTP(t, f.d.url, f.tokens["lead"])
	if m := ok(ctx, t, lead2, "fleet_members", nil); len(m["members"].([]any)) != 2 {
		t.Fatalf("fleet_members after clean_sessions = %v", m)
	}
}

func TestHTTPCancelledSendLosesNothing(t *testing.T) {
	f := newFleet(t)
	ctx, cancel := context.WithCancel(context.Background())
	sent := async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "job"})
	ok(context.Background(), t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	start := time.Now()
	cancel()
	recvWithin(t, sent, 5*time.Second)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the cancelled call took %v to return", d)
	}
	bg := context.Background()
	// The daemon learns of the cancellation when it sees the lead's
	// connection close, and cannot order that against the member's call on
	// another connection: wait until it has (the ticket shows, as
	// fleet_poll lists no ticket a call is blocked on).
	if !fleettest.Until(10*time.Second, 10*time.Millisecond, func() bool {
		ts, _ := ok(bg, t, f.lead, "fleet_poll", nil)["tickets"].([]any)
		return len(ts) == 1
	}) {
		t.Fatal("the daemon never noticed the cancelled send")
	}
	ok(bg, t, f.m1, "fleet_reply", map[string]any{"content": "kept"})
	all := ok(bg, t, f.lead, "fleet_poll", map[string]any{"wait_s": 5})
	ts, _ := all["tickets"].([]any)
	if len(ts) != 1 || ts[0].(map[string]any)["content"] != "kept" {
		t.Fatalf("after cancel, fleet_poll = %v; want the reply on a ticket", all)
	}
}

func TestHTTPSendBoundReturnsPending(t *testing.T) {
	f := newFleet(t, "--send-timeout", "1s")
	ctx := context.Background()
	sent := async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "slow job"})
	ok(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	o := recvWithin(t, sent, 10*time.Second)
	// Working, as m1 took the message within the bound; queued only if
	// m1's fleet_next reached the daemon more than 1 s after the send,
	// on a slow machine.
	if o["outcome"] != "pending" || o["ticket"] == nil || (o["state"] != "working" && o["state"] != "queued") {
		t.Fatalf("bounded send = %v; want pending with a ticket", o)
	}
	if p := ok(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["state"] != "working" {
		t.Fatalf("fleet_poll once m1 has the message = %v; want working", p)
	}
	ok(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "late"})
	if p := ok(ctx, t, f.lead, "fleet_poll", map[string]any{"ticket": o["ticket"]}); p["content"] != "late" {
		t.Fatalf("fleet_poll = %v; want the late reply", p)
	}
}

func TestHTTPMemberNeverMounts(t *testing.T) {
	dir := t.TempDir()
	lead := addToken(t, dir, "lead", "lead")
	addToken(t, dir, "ghost", "member")
	d := startDaemon(t, dir, "--ready-timeout", "500ms")
	cs := connectHTTP(t, d.url, lead)
	o := ok(context.Background(), t, cs, "fleet_send", map[string]any{"to": "ghost", "content": "hello"})
	if o["outcome"] != "failed" || o["reason"] != "member_not_ready" {
		t.Fatalf("send to a member that never mounted = %v", o)
	}
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

func TestHTTPRefusesMissingAndWrongTokens(t *testing.T) {
	dir := t.TempDir()
	addToken(t, dir, "lead", "lead")
	d := startDaemon(t, dir)
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for name, auth := range map[string]string{"missing": "", "wrong": "Bearer fst_wrong", "not bearer": "Basic abc"} {
		req, _ := http.NewRequest("POST", d.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s token: status %d; want 401", name, resp.StatusCode)
		}
	}
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
