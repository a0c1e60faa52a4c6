package proxy_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/daemon/proxy"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// fleetDaemon is one daemon of a fleet served by several: its own state
// directory, the fleet's token file, and HTTP that can die as a process
// does (every connection cut, the port closed). It serves two tools beside
// the adapter's whose calls block on the daemon until released, one
// read-only and one not, so that a test knows a call is in flight.
type fleetDaemon struct {
	name    string
	url     string
	store   *fleetstate.Store
	rv      *fleetstate.Rendezvous
	ts      *httptest.Server
	mux     *switchHandler
	entered chan string   // the tool of each call of a blocking tool that reached this daemon
	release chan struct{} // closed to let blocked calls return
	writes  atomic.Int32  // calls of slow_write that reached this daemon
}

// switchHandler serves the handler it holds now, so that a test can swap
// in a new daemon under the same URL, as a restart on the same port does.
type switchHandler struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// fleetAgents are the agents of the test fleet.
var fleetAgents = map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "m1": mcpadapter.RoleMember}

// startFleet starts n daemons of one fleet: the first issues the tokens,
// the others get a copy of its token file, so that every token works on
// every daemon.
func startFleet(t *testing.T, n int) ([]*fleetDaemon, map[string]string) {
	t.Helper()
	st, tokens := adaptertest.OpenStore(t)
	tok := adaptertest.AddTokens(t, tokens, fleetAgents)
	file, err := os.ReadFile(auth.TokenPath(st))
	if err != nil {
		t.Fatal(err)
	}
	ds := make([]*fleetDaemon, n)
	for i := range ds {
		ds[i] = startFleetDaemon(t, string(rune('A'+i)), file, nil, nil)
	}
	return ds, tok
}

// startFleetDaemon starts a daemon with the token file tokenFile, on ln
// (nil: a new loopback port), with extra tools beside the adapter's.
func startFleetDaemon(t *testing.T, name string, tokenFile []byte, ln net.Listener, extra []server.ServerTool) *fleetDaemon {
	t.Helper()
	st, tokens := adaptertest.OpenStore(t)
	path := auth.TokenPath(st)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, tokenFile, 0o600); err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, &fleetstate.RendezvousOptions{AddOnReady: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range tokens.Agents(mcpadapter.RoleMember) {
		if err := rv.AddMember(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	d := &fleetDaemon{name: name, store: st, rv: rv, entered: make(chan string, 16), release: make(chan struct{})}
	conns := mcphttp.NewConnections(rv)
	a := mcpadapter.New(st, rv, &mcpadapter.Options{RolesConfigured: func() bool { return tokens.Len() > 0 }, MarkReady: true, Connections: conns})
	srv := a.NewServer("fleetstate", "test")
	block := func(tool string) server.ToolHandlerFunc {
		return func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if tool == "slow_write" {
				d.writes.Add(1)
			}
			d.entered <- tool
			select {
			case <-d.release:
			case <-ctx.Done():
			}
			return mcp.NewToolResultStructuredOnly(map[string]any{"daemon": d.name}), nil
		}
	}
	srv.AddTools(
		server.ServerTool{Tool: mcp.NewTool("slow_read", mcp.WithReadOnlyHintAnnotation(true)), Handler: block("slow_read")},
		server.ServerTool{Tool: mcp.NewTool("slow_write", mcp.WithReadOnlyHintAnnotation(false)), Handler: block("slow_write")},
	)
	srv.AddTools(extra...)
	h := mcphttp.New(a, srv, mcphttp.Options{Tokens: tokens, Connections: conns})
	d.mux = &switchHandler{h: h}
	d.ts = httptest.NewUnstartedServer(d.mux)
	if ln != nil {
		d.ts.Listener.Close()
		d.ts.Listener = ln
	}
	d.ts.Start()
	d.url = d.ts.URL + "/mcp"
	t.Cleanup(func() {
		rv.Close()
		h.Close()
		d.kill()
		d.ts.Close()
	})
	return d
}

// kill makes the daemon die as its process would: the port closes and
// every connection is cut.
func (d *fleetDaemon) kill() {
	d.ts.Listener.Close()
	d.ts.CloseClientConnections()
}

// fastProxy are bounds short enough for tests, with CallWait long: a test
// that sees ERR_UNAVAILABLE sees it because a round of attempts failed,
// never because a bound passed.
var fastProxy = proxy.Options{Version: "test", ConnectTimeout: 10 * time.Second, ListenWait: 10 * time.Second,
	CallWait: time.Hour, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}

// proxyClient starts a failover proxy of urls with token and an MCP
// client of it, initialized once.
func proxyClient(t *testing.T, urls []string, token string, o proxy.Options) (*proxy.Proxy, *client.Client) {
	t.Helper()
	ctx := context.Background()
	p, err := proxy.NewFailover(ctx, urls, token, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := client.NewInProcessClient(p.Server())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The handshake of stdio clients, whose sessions get notifications
	// without subscribing.
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return p, c
}

// callTool calls tool through c and returns its structured content and
// whether it is an error result. A failure of the call itself fails the
// test: through the proxy, every outcome is a tool result.
func callTool(t *testing.T, c *client.Client, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, raw, err)
	}
	return out, res.IsError
}

// asyncCall calls tool in the background; the channel gets its result.
func asyncCall(t *testing.T, c *client.Client, tool string, args map[string]any) <-chan map[string]any {
	ch := make(chan map[string]any, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = tool
		req.Params.Arguments = args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			ch <- map[string]any{"call_error": err.Error()}
			return
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		if res.IsError {
			out["is_error"] = true
		}
		ch <- out
	}()
	return ch
}

func recvResult(t *testing.T, ch <-chan map[string]any, what string) map[string]any {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// enteredOn waits until a call of tool has reached d.
func enteredOn(t *testing.T, d *fleetDaemon, tool string) {
	t.Helper()
	select {
	case got := <-d.entered:
		if got != tool {
			t.Fatalf("daemon %s: %s entered; want %s", d.name, got, tool)
		}
	case <-time.After(time.Minute):
		t.Fatalf("daemon %s: %s never arrived", d.name, tool)
	}
}

func ready(rv *fleetstate.Rendezvous, member string) bool {
	for _, m := range rv.Members() {
		if m.Name == member {
			return m.Ready
		}
	}
	return false
}

// TestProxyFailsOver: when the proxy's daemon dies mid-session, the
// agent's next calls succeed on the next daemon over the same MCP session;
// a read-only call in flight is sent again there and succeeds; a mutating
// one answers ERR_UNAVAILABLE and is not sent again; the member's
// listening stream moves to the new daemon by itself.
func TestProxyFailsOver(t *testing.T) {
	ds, tok := startFleet(t, 2)
	a, b := ds[0], ds[1]
	_, lead := proxyClient(t, []string{a.url, b.url}, tok["lead"], fastProxy)
	_, member := proxyClient(t, []string{a.url, b.url}, tok["m1"], fastProxy)
	if !fleettest.Until(time.Minute, 5*time.Millisecond, func() bool { return ready(a.rv, "m1") }) {
		t.Fatal("m1 is not ready on A through its proxy")
	}
	if out, isErr := callTool(t, lead, "new_session", map[string]any{"name": "one"}); isErr {
		t.Fatalf("new_session on A: %v", out)
	}

	// Three calls in flight on A: a read, a write and a blocking send.
	read := asyncCall(t, lead, "slow_read", nil)
	enteredOn(t, a, "slow_read")
	write := asyncCall(t, lead, "slow_write", nil)
	enteredOn(t, a, "slow_write")
	send := asyncCall(t, lead, "fleet_send", map[string]any{"to": "m1", "content": "lost with A"})
	if !fleettest.Until(time.Minute, 5*time.Millisecond, func() bool {
		for _, m := range a.rv.Members() {
			if m.Name == "m1" && m.Queued == 1 {
				return true
			}
		}
		return false
	}) {
		t.Fatal("the send never reached A")
	}

	a.kill()

	// B's slow_read returns at once: the retried read succeeds there.
	close(b.release)
	if got := recvResult(t, read, "slow_read"); got["daemon"] != "B" || got["is_error"] != nil {
		t.Errorf("slow_read in flight when A died = %v; want B's answer", got)
	}
	for _, c := range []struct {
		name string
		ch   <-chan map[string]any
		hint string
	}{{"slow_write", write, "may or may not"}, {"fleet_send", send, "fleet_poll"}} {
		got := recvResult(t, c.ch, c.name)
		if got["error"] != string(fleetstate.CodeUnavailable) || !strings.Contains(got["message"].(string), c.hint) {
			t.Errorf("%s in flight when A died = %v; want %s mentioning %q", c.name, got, fleetstate.CodeUnavailable, c.hint)
		}
	}
	if n := b.writes.Load(); n != 0 {
		t.Errorf("slow_write reached B %d times; a mutating call lost mid-call must not be sent again", n)
	}

	// The agents go on, without initializing again, on B.
	if out, isErr := callTool(t, lead, "new_session", map[string]any{"name": "two"}); isErr {
		t.Fatalf("new_session after the failover: %v", out)
	}
	put, isErr := callTool(t, lead, "put", map[string]any{"agent_name": "lead", "file_name": "f.txt", "content": "on B"})
	if isErr {
		t.Fatalf("put after the failover: %v", put)
	}
	if got, isErr := callTool(t, lead, "get", map[string]any{"id": put["id"]}); isErr || got["content"] != "on B" {
		t.Errorf("get after the failover = %v (isError %v)", got, isErr)
	}
	if s, err := b.store.CurrentSession(); err != nil || s.Name != "two" {
		t.Errorf("B's current session = %v, %v; want the session made through the proxy", s, err)
	}
	// m1's proxy holds its listening stream on B without m1 calling.
	if !fleettest.Until(time.Minute, 5*time.Millisecond, func() bool { return ready(b.rv, "m1") }) {
		t.Error("m1 is not ready on B: its proxy did not listen there")
	}
	sent := asyncCall(t, lead, "fleet_send", map[string]any{"to": "m1", "content": "on B"})
	if got, isErr := callTool(t, member, "fleet_next", map[string]any{"wait_s": 30}); isErr || got["content"] != "on B" {
		t.Fatalf("fleet_next on B = %v (isError %v)", got, isErr)
	}
	if _, isErr := callTool(t, member, "fleet_reply", map[string]any{"content": "done"}); isErr {
		t.Fatal("fleet_reply on B failed")
	}
	if got := recvResult(t, sent, "fleet_send"); got["content"] != "done" {
		t.Errorf("fleet_send on B = %v; want the reply", got)
	}
}

// TestProxyAllDown: with every daemon down, a call answers ERR_UNAVAILABLE
// once a round of attempts has failed (CallWait is an hour), and the proxy
// connects again as soon as a daemon is back.
func TestProxyAllDown(t *testing.T) {
	ds, tok := startFleet(t, 2)
	addr := ds[1].ts.Listener.Addr().String()
	_, lead := proxyClient(t, []string{ds[0].url, ds[1].url}, tok["lead"], fastProxy)
	if _, isErr := callTool(t, lead, "fleet_members", nil); isErr {
		t.Fatal("fleet_members failed")
	}
	ds[0].kill()
	ds[1].kill()
	for range 3 {
		got, isErr := callTool(t, lead, "fleet_members", nil)
		if !isErr || got["error"] != string(fleetstate.CodeUnavailable) {
			t.Fatalf("fleet_members with every daemon down = %v; want %s", got, fleetstate.CodeUnavailable)
		}
	}
	// B comes back on its port.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("B's port was taken meanwhile: %v", err)
	}
	file, err := os.ReadFile(auth.TokenPath(ds[1].store))
	if err != nil {
		t.Fatal(err)
	}
	startFleetDaemon(t, "B2", file, ln, nil)
	if !fleettest.Until(time.Minute, 5*time.Millisecond, func() bool {
		_, isErr := callTool(t, lead, "fleet_members", nil)
		return !isErr
	}) {
		t.Fatal("the proxy did not connect to the daemon back on B's port")
	}
}

// TestProxyRestartedDaemon: a proxy of one URL whose daemon restarted
// (the session unknown: HTTP 404) connects again to the same URL, sends
// again the call the old session refused, which never ran, and tells its
// client when the tools changed.
func TestProxyRestartedDaemon(t *testing.T) {
	ds, tok := startFleet(t, 1)
	d := ds[0]
	_, lead := proxyClient(t, []string{d.url}, tok["lead"], fastProxy)
	changed := make(chan struct{}, 1)
	lead.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	if _, isErr := callTool(t, lead, "new_session", map[string]any{"name": "one"}); isErr {
		t.Fatal("new_session failed")
	}
	// A new daemon that keeps its sessions in memory takes over the URL;
	// the old one's listening stream stays open, so the proxy learns of
	// the restart from the 404.
	file, err := os.ReadFile(auth.TokenPath(d.store))
	if err != nil {
		t.Fatal(err)
	}
	extra := server.ServerTool{Tool: mcp.NewTool("new_tool", mcp.WithReadOnlyHintAnnotation(true)),
		Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructuredOnly(map[string]any{"new": true}), nil
		}}
	d2 := startFleetDaemon(t, "A2", file, nil, []server.ServerTool{extra})
	d2.mux.mu.Lock()
	h2 := &knownSessions{h: d2.mux.h, issued: map[string]bool{}}
	d2.mux.mu.Unlock()
	d.mux.mu.Lock()
	d.mux.h = h2
	d.mux.mu.Unlock()

	if out, isErr := callTool(t, lead, "new_session", map[string]any{"name": "two"}); isErr {
		t.Fatalf("new_session after the restart = %v; a call the daemon refused unseen must be sent again", out)
	}
	if s, err := d2.store.CurrentSession(); err != nil || s.Name != "two" {
		t.Errorf("the restarted daemon's current session = %v, %v", s, err)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no notifications/tools/list_changed after the tools changed")
	}
	if got, isErr := callTool(t, lead, "new_tool", nil); isErr || got["new"] != true {
		t.Errorf("new_tool = %v (isError %v)", got, isErr)
	}
}

// knownSessions answers 404 to a request of an MCP session that h did not
// start, as a daemon that keeps its sessions in memory does after a
// restart.
type knownSessions struct {
	h      http.Handler
	mu     sync.Mutex
	issued map[string]bool // guarded by mu
}

func (k *knownSessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		k.mu.Lock()
		known := k.issued[sid]
		k.mu.Unlock()
		if !known {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	k.h.ServeHTTP(&sessionRecorder{ResponseWriter: w, k: k}, r)
}

// sessionRecorder records the session IDs that a response starts.
type sessionRecorder struct {
	http.ResponseWriter
	k *knownSessions
}

func (s *sessionRecorder) WriteHeader(code int) {
	if sid := s.Header().Get("Mcp-Session-Id"); sid != "" {
		s.k.mu.Lock()
		s.k.issued[sid] = true
		s.k.mu.Unlock()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionRecorder) Write(p []byte) (int, error) {
	if sid := s.Header().Get("Mcp-Session-Id"); sid != "" {
		s.k.mu.Lock()
		s.k.issued[sid] = true
		s.k.mu.Unlock()
	}
	return s.ResponseWriter.Write(p)
}

func (s *sessionRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
