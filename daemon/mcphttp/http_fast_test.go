package mcphttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// rawHTTP is a daemon driven with raw HTTP requests.
type rawHTTP struct {
	t *testing.T
	d *adaptertest.Daemon
}

func startFastHTTP(t *testing.T, opts mcphttp.Options) *rawHTTP {
	t.Helper()
	opts.MaxRequestBytes = 1 << 20
	d := adaptertest.Start(t, adaptertest.Options{
		Agents: map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember},
		HTTP:   opts,
	})
	return &rawHTTP{t: t, d: d}
}

// httpAnswer is what the tests compare of a response.
type httpAnswer struct {
	Status                                  int
	ContentType, ContentLength, Chunked, ID string
	Body                                    string
}

// post sends body with header (values "" are left out) and the agent's
// token, and returns the answer.
func (s *rawHTTP) post(ctx context.Context, agent, body string, header map[string]string) httpAnswer {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.d.URL, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.d.Token[agent])
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := s.d.HTTP.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	a := httpAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"),
		ContentLength: resp.Header.Get("Content-Length"), Chunked: strings.Join(resp.TransferEncoding, ","),
		ID: resp.Header.Get("Mcp-Session-Id"), Body: string(b)}
	if adaptertest.RFC3339.MatchString(a.Body) {
		a.ContentLength = "TIME's" // a time's length varies with its fraction of a second
	}
	a.Body = adaptertest.RFC3339.ReplaceAllString(adaptertest.SessionUUID.ReplaceAllString(a.Body, "SID"), "TIME")
	return a
}

// TestHTTPSameAsMCPGo sends the same requests to a handler with the fast
// path and to one without, and requires the same answers: status, content
// type, framing, session header and body, byte for byte (session IDs and
// times aside). The calls the fast path takes answer what mcp-go
// answered, and what it does not take goes to mcp-go as it was sent. It
// holds on every Go release supported: a content of invalid UTF-8, which
// encoding/json writes otherwise on Go 1.26 than on 1.27, is answered
// with mcp-go's bytes on both.
func TestHTTPSameAsMCPGo(t *testing.T) {
	old := startFastHTTP(t, mcphttp.Options{NoFastPath: true})
	neu := startFastHTTP(t, mcphttp.Options{})
	call := func(id, name, args string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + modernMeta + `,"name":"` + name + `","arguments":` + args + `}}`
	}
	with := func(tool string, kv ...string) map[string]string {
		h := modernHeader(tool)
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	big := call("40", "put", `{"agent_name":"a","file_name":"big.txt","content":"`+strings.Repeat("x", 3000)+`"}`)
	huge := call("41", "put", `{"agent_name":"a","file_name":"huge.txt","content":"`+strings.Repeat("x", 2<<20)+`"}`)
	for _, c := range []struct {
		name   string
		agent  string
		body   string
		header map[string]string
		fast   bool // the fast path answers it
	}{
		{"new_session", "lead", call("1", "new_session", `{"name":"s"}`), modernHeader("new_session"), true},
		{"put", "lead", call("2", "put", `{"agent_name":"a","file_name":"f.txt","content":"hello"}`), modernHeader("put"), true},
		{"put exists", "lead", call("3", "put", `{"agent_name":"a","file_name":"f.txt","content":"again"}`), modernHeader("put"), true},
		{"put overwrite", "lead", call("4", "put", `{"agent_name":"a","file_name":"f.txt","content":"<b>&\"\\\n\t\u0001\u2028é😀\ud83d\ude00","overwrite":true}`), modernHeader("put"), true},
		{"get", "lead", call("5", "get", `{"id":"fsm::file::SID::a::f.txt"}`), modernHeader("get"), true},
		{"get string id", "lead", call(`"req-6"`, "get", `{"id":"fsm::file::SID::a::f.txt"}`), modernHeader("get"), true},
		{"get missing", "lead", call("7", "get", `{"id":"fsm::file::SID::a::nope.txt"}`), modernHeader("get"), true},
		{"get bad id", "lead", call("8", "get", `{"id":"not an id"}`), modernHeader("get"), true},
		{"list", "lead", call("9", "list", `{}`), modernHeader("list"), true},
		{"a long answer, chunked", "lead", big, modernHeader("put"), true},
		{"get the long one", "lead", call("42", "get", `{"id":"fsm::file::SID::a::big.txt"}`), modernHeader("get"), true},
		{"get_session no arguments", "lead", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{` + modernMeta + `,"name":"get_session"}}`, modernHeader("get_session"), true},
		{"arguments first, as mcp-go sends", "lead", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{` + modernMeta + `,"arguments":{"id":"fsm::file::SID::a::f.txt"},"name":"get"}}`, modernHeader("get"), true},
		{"client info and log level", "lead", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"},"io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"sampling":{}}},"name":"get_session"}}`, modernHeader("get_session"), true},
		{"content type with charset", "lead", call("13", "get_session", `{}`), with("get_session", "Content-Type", "application/json; charset=utf-8"), true},
		{"session header ignored", "lead", call("14", "get_session", `{}`), with("get_session", "Mcp-Session-Id", "mcp-session-nope"), true},
		{"member-only tool by the lead", "lead", call("15", "fleet_next", `{"wait_s":1}`), modernHeader("fleet_next"), true},
		{"lead-only tool by a member", "scout", call("16", "fleet_send", `{"to":"scout","content":"x"}`), modernHeader("fleet_send"), true},
		{"member's next, nothing waiting", "scout", call("17", "fleet_next", `{"wait_s":0}`), modernHeader("fleet_next"), true},

		{"progress token", "lead", `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"get_session"}}`, modernHeader("get_session"), false},
		{"capabilities of the wrong type", "lead", `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":5}},"name":"get_session"}}`, modernHeader("get_session"), false},
		{"a number out of range in _meta", "lead", `{"jsonrpc":"2.0","id":44,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"n":1e400},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"get_session"}}`, modernHeader("get_session"), false},
		{"a number out of range in capabilities", "lead", `{"jsonrpc":"2.0","id":45,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"experimental":{"n":-1e999}}},"name":"get_session"}}`, modernHeader("get_session"), false},
		{"no capabilities", "lead", `{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"get_session"}}`, modernHeader("get_session"), false},
		{"no _meta", "lead", `{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"get_session"}}`, modernHeader("get_session"), false},
		{"header version differs", "lead", call("24", "get_session", `{}`), with("get_session", "Mcp-Protocol-Version", "2025-11-25"), false},
		{"no version header", "lead", call("25", "get_session", `{}`), with("get_session", "Mcp-Protocol-Version", ""), false},
		{"no Mcp-Name", "lead", call("26", "get_session", `{}`), with("get_session", "Mcp-Name", ""), false},
		{"Mcp-Name differs", "lead", call("27", "get_session", `{}`), with("get", "Mcp-Name", "get"), false},
		{"Mcp-Name in base64", "lead", call("28", "get_session", `{}`), with("get_session", "Mcp-Name", "=?base64?Z2V0X3Nlc3Npb24=?="), false},
		{"Mcp-Method differs", "lead", call("29", "get_session", `{}`), with("get_session", "Mcp-Method", "tools/list"), false},
		{"Last-Event-ID", "lead", call("30", "get_session", `{}`), with("get_session", "Last-Event-ID", "1"), false},
		{"not JSON content", "lead", call("31", "get_session", `{}`), with("get_session", "Content-Type", "text/plain"), false},
		{"unknown tool", "lead", call("32", "nope", `{}`), modernHeader("nope"), false},
		{"unknown argument", "lead", call("33", "get", `{"id":"x","extra":1}`), modernHeader("get"), false},
		{"wrong type", "lead", call("34", "put", `{"agent_name":"a","file_name":"g.txt","content":5}`), modernHeader("put"), false},
		{"lone surrogate", "lead", call("35", "put", `{"agent_name":"a","file_name":"h.txt","content":"\ud800"}`), modernHeader("put"), false},
		{"duplicate argument", "lead", call("36", "get", `{"id":"x","id":"fsm::file::SID::a::f.txt"}`), modernHeader("get"), false},
		{"invalid UTF-8", "lead", call("46", "put", "{\"agent_name\":\"a\",\"file_name\":\"i.txt\",\"content\":\"\xff\xfe<\"}"), modernHeader("put"), false},
		{"get it back", "lead", call("47", "get", `{"id":"fsm::file::SID::a::i.txt"}`), modernHeader("get"), true},
		{"fractional id", "lead", call("48.5", "get_session", `{}`), modernHeader("get_session"), false},
		{"large id", "lead", call("12345678901234567890", "get_session", `{}`), modernHeader("get_session"), false},
		{"escaped string id", "lead", call(`"a\u0041<"`, "get_session", `{}`), modernHeader("get_session"), false},
		{"a task", "lead", `{"jsonrpc":"2.0","id":49,"method":"tools/call","params":{` + modernMeta + `,"name":"get_session","task":{"ttl":1000}}}`, modernHeader("get_session"), false},
		{"a trailing value", "lead", call("50", "get_session", `{}`) + ` {}`, modernHeader("get_session"), false},
		{"other metadata", "lead", `{"jsonrpc":"2.0","id":37,"method":"tools/call","params":{"_meta":{"traceparent":"x","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"get_session"}}`, modernHeader("get_session"), false},
		{"malformed", "lead", `{"jsonrpc":"2.0","id":38,"method":"tools/call","params":{` + modernMeta, modernHeader("get_session"), false},
		{"body too large", "lead", huge, modernHeader("put"), false},
		{"tools/list", "lead", `{"jsonrpc":"2.0","id":39,"method":"tools/list","params":{` + modernMeta + `}}`, with("", "Mcp-Method", "tools/list", "Mcp-Name", ""), false},
		{"bare cancel", "lead", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, with("", "Mcp-Method", "notifications/cancelled", "Mcp-Name", ""), false},
		{"legacy call without a session", "lead", `{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"get_session"}}`, map[string]string{"Content-Type": "application/json"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sids := map[*rawHTTP]string{}
			var got [2]httpAnswer
			before := neu.d.Adapter.DirectCalls()
			for i, s := range []*rawHTTP{old, neu} {
				if cur, err := s.d.Store.CurrentSession(); err == nil {
					sids[s] = cur.ID // none before new_session
				}
				got[i] = s.post(context.Background(), c.agent, strings.ReplaceAll(c.body, "SID", sids[s]), c.header)
			}
			if testing.Verbose() {
				t.Logf("%+v", got[1])
			}
			if got[0] != got[1] {
				t.Errorf("mcp-go:    %+v\nfast path: %+v", got[0], got[1])
			}
			if fast := neu.d.Adapter.DirectCalls() > before; fast != c.fast {
				t.Errorf("fast path %v; want %v", fast, c.fast)
			}
		})
	}
}

// TestHTTPFastCancel: a fast call ends with ERR_CANCELLED when its caller
// sends notifications/cancelled for it, as mcp-go's does, and only its
// caller's notification cancels it; a call whose client goes away ends
// too.
func TestHTTPFastCancel(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			s := startFastHTTP(t, mcphttp.Options{NoFastPath: !fast})
			next := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + modernMeta + `,"name":"fleet_next","arguments":{"wait_s":30}}}`
			cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + modernMeta + `,"requestId":7}}`
			done := make(chan httpAnswer, 1)
			go func() { done <- s.post(context.Background(), "scout", next, modernHeader("fleet_next")) }()
			deadline := time.Now().Add(adaptertest.WaitLimit)
			for fast && s.d.Handler.FastCalls().InFlight() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			cancelHeader := map[string]string{"Content-Type": "application/json", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "notifications/cancelled"}
			if fast {
				// Another caller's notification for the same id leaves it be.
				if a := s.post(context.Background(), "lead", cancel, cancelHeader); a.Status != http.StatusAccepted {
					t.Fatalf("the lead's cancel: %+v", a)
				}
				select {
				case a := <-done:
					t.Fatalf("the lead's notification ended the scout's call: %+v", a)
				case <-time.After(50 * time.Millisecond):
				}
			}
			// mcp-go's calls are not counted: until the call has started,
			// its cancellation cancels nothing, and is sent again.
			var a httpAnswer
		wait:
			for {
				if a := s.post(context.Background(), "scout", cancel, cancelHeader); a.Status != http.StatusAccepted {
					t.Fatalf("cancel: %+v", a)
				}
				select {
				case a = <-done:
					break wait
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("the call did not end on its notifications/cancelled")
				}
			}
			var r struct {
				Result struct {
					IsError           bool              `json:"isError"`
					StructuredContent map[string]string `json:"structuredContent"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(a.Body), &r); err != nil || !r.Result.IsError || r.Result.StructuredContent["error"] != "ERR_CANCELLED" {
				t.Errorf("cancelled call answered %+v (%v); want ERR_CANCELLED", a, err)
			}

			// A client that goes away ends its call.
			ctx, stop := context.WithCancel(context.Background())
			gone := make(chan struct{})
			go func() {
				defer close(gone)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.d.URL, strings.NewReader(next))
				req.Header.Set("Authorization", "Bearer "+s.d.Token["scout"])
				for k, v := range modernHeader("fleet_next") {
					req.Header.Set(k, v)
				}
				if resp, err := s.d.HTTP.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			for fast && s.d.Handler.FastCalls().InFlight() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if fast && s.d.Handler.FastCalls().InFlight() == 0 {
				t.Fatal("the scout's fleet_next never started on the fast path")
			}
			stop()
			<-gone
			for s.d.Handler.FastCalls().InFlight() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := s.d.Handler.FastCalls().InFlight(); n != 0 {
				t.Errorf("%d fast calls in flight after their client went away", n)
			}
		})
	}
}

// TestHTTPFastWithMCPGoClient: mcp-go's own client, which speaks
// 2026-07-28, has its calls served on the fast path, and reads their
// results.
func TestHTTPFastWithMCPGoClient(t *testing.T) {
	s := startFastHTTP(t, mcphttp.Options{})
	c, _, err := adaptertest.Dial(context.Background(), s.d.URL, fleettest.BearerClient(s.d.Token["lead"]), adaptertest.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := s.d.Adapter.DirectCalls()
	if _, err := benchCall(context.Background(), c, "new_session", map[string]any{"name": "s"}); err != nil {
		t.Fatal(err)
	}
	out, err := benchCall(context.Background(), c, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := benchCall(context.Background(), c, "get", map[string]any{"id": out["id"]})
	if err != nil || got["content"] != "hi" {
		t.Errorf("get: %v, %v; want content hi", got, err)
	}
	if n := s.d.Adapter.DirectCalls() - before; n != 3 {
		t.Errorf("%d calls on the fast path; want 3", n)
	}
}

// TestHTTPFastWithOfficialSDK: the official Go SDK, which speaks
// 2026-07-28 with client capabilities that are not empty, has its calls
// served on the fast path too.
func TestHTTPFastWithOfficialSDK(t *testing.T) {
	s := startFastHTTP(t, mcphttp.Options{})
	c := sdk.NewClient(&sdk.Implementation{Name: "sdk", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.d.URL, HTTPClient: fleettest.BearerClient(s.d.Token["lead"])}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	before := s.d.Adapter.DirectCalls()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "new_session", Arguments: map[string]any{"name": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("new_session: %v, %v", res, err)
	}
	if out, _ := res.StructuredContent.(map[string]any); out["id"] == nil {
		t.Errorf("new_session: %v; want an id", res.StructuredContent)
	}
	if n := s.d.Adapter.DirectCalls() - before; n != 1 {
		t.Errorf("%d calls on the fast path; want 1", n)
	}
}

// TestHTTPFastOnlyToolsOfTheServer: an adapter tool that the server does
// not have is left to mcp-go, which does not know it.
func TestHTTPFastOnlyToolsOfTheServer(t *testing.T) {
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	a := mcpadapter.New(st, nil, nil)
	srv := a.NewServer("fleetstate", "test")
	srv.DeleteTools("get_session")
	h := mcphttp.New(a, srv, mcphttp.Options{Anonymous: true})
	defer h.Close()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"get_session"}}`))
	for k, v := range modernHeader("get_session") {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if n := a.DirectCalls(); n != 0 || !strings.Contains(rec.Body.String(), "not found") {
		t.Errorf("%d fast calls; answer %d %s; want mcp-go's tool not found", n, rec.Code, rec.Body.String())
	}
}
