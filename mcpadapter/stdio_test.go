package mcpadapter_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// rawStdio is a server on pipes driven one line at a time.
type rawStdio struct {
	t  *testing.T
	a  *mcpadapter.Adapter
	w  io.Writer
	r  *bufio.Reader
	rv *fleetstate.Rendezvous
}

// startRaw serves a fresh adapter with serve as id. With a member id, the
// adapter has a rendezvous with that member.
func startRaw(t *testing.T, serve func(ctx context.Context, a *mcpadapter.Adapter, srv *server.MCPServer, id mcpadapter.Identity, in io.Reader, out io.Writer) error, id mcpadapter.Identity) *rawStdio {
	t.Helper()
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	var rv *fleetstate.Rendezvous
	if !id.Anonymous() {
		if rv, err = fleetstate.NewRendezvous(st, nil); err != nil {
			t.Fatal(err)
		}
		if id.Role == mcpadapter.RoleMember {
			if err := rv.AddMember(id.Agent, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := mcpadapter.New(st, rv, &mcpadapter.Options{MarkReady: true})
	srv := a.NewServer("fleetstate", "test")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(context.Background(), a, srv, id, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // responses of calls cut short
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(adaptertest.WaitLimit):
			t.Errorf("serve did not return after its input ended")
		}
		if rv != nil {
			rv.Close()
		}
	})
	s := &rawStdio{t: t, a: a, w: inW, r: bufio.NewReaderSize(outR, 1<<20), rv: rv}
	s.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func serveOld(ctx context.Context, a *mcpadapter.Adapter, srv *server.MCPServer, id mcpadapter.Identity, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(srv)
	server.WithStdioContextFunc(func(ctx context.Context) context.Context { return mcpadapter.ContextWithIdentity(ctx, id) })(s)
	err := s.Listen(ctx, in, out)
	if err == io.EOF {
		err = nil
	}
	return err
}

func serveNew(ctx context.Context, a *mcpadapter.Adapter, srv *server.MCPServer, id mcpadapter.Identity, in io.Reader, out io.Writer) error {
	return a.ServeStdio(ctx, srv, id, in, out, nil)
}

func (s *rawStdio) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.w, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// next returns the next line the server writes.
func (s *rawStdio) next() string {
	s.t.Helper()
	line, err := s.r.ReadString('\n')
	if err != nil {
		s.t.Fatalf("reading a response: %v", err)
	}
	return line
}

// roundTrip sends line and returns the next response line.
func (s *rawStdio) roundTrip(line string) string {
	s.t.Helper()
	s.send(line)
	return s.next()
}

// TestStdioSameAsMCPGo sends the same lines to mcp-go's stdio server and to
// ServeStdio and requires the same responses, byte for byte (session IDs
// aside): the calls the fast path takes answer what mcp-go answered, and
// what it does not understand (malformed lines, unknown tools, arguments
// the tool refuses, ids it cannot echo, other metadata) goes to mcp-go.
func TestStdioSameAsMCPGo(t *testing.T) {
	old := startRaw(t, serveOld, anon)
	neu := startRaw(t, serveNew, anon)
	sids := map[*rawStdio]string{}
	for _, s := range []*rawStdio{old, neu} {
		var r struct {
			Result struct {
				StructuredContent struct{ ID string } `json:"structuredContent"`
			} `json:"result"`
		}
		line := s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"new_session","arguments":{"name":"s"}}}`)
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Result.StructuredContent.ID == "" {
			t.Fatalf("new_session: %v: %s", err, line)
		}
		sids[s] = r.Result.StructuredContent.ID
	}
	call := func(id, name, args string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
	}
	for _, c := range []struct {
		name string
		line string
		fast bool // the fast path serves it
	}{
		{"put", call("2", "put", `{"agent_name":"a","file_name":"f.txt","content":"hello"}`), true},
		{"put exists", call("3", "put", `{"agent_name":"a","file_name":"f.txt","content":"again"}`), true},
		{"put overwrite", call("4", "put", `{"agent_name":"a","file_name":"f.txt","content":"<b>&\"\\\n\t\u0001\u2028é😀\ud83d\ude00","overwrite":true}`), true},
		{"get", call("5", "get", `{"id":"fsm::file::SID::a::f.txt"}`), true},
		{"get string id", call(`"req-6"`, "get", `{"id":"fsm::file::SID::a::f.txt"}`), true},
		{"get missing", call("7", "get", `{"id":"fsm::file::SID::a::nope.txt"}`), true},
		{"get bad id", call("8", "get", `{"id":"not an id"}`), true},
		{"list", call("9", "list", `{}`), true},
		{"get_session no arguments", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"get_session"}}`, true},
		{"name after arguments", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"arguments":{"id":"fsm::file::SID::a::f.txt"},"name":"get"}}`, true},
		{"white space", "  {\"jsonrpc\" : \"2.0\" ,\"method\":\"tools/call\", \"params\" : { \"name\" : \"get\" , \"arguments\" : { \"id\" : \"fsm::file::SID::a::f.txt\" } } , \"id\" : 12 }  ", true},
		{"progress token", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"get_session","arguments":{},"_meta":{"progressToken":"p"}}}`, true},
		{"unknown tool", call("20", "nope", `{}`), false},
		{"unknown argument", call("21", "get", `{"id":"x","extra":1}`), false},
		{"wrong type", call("22", "put", `{"agent_name":"a","file_name":"g.txt","content":5}`), false},
		{"null argument", call("23", "get", `{"id":null}`), false},
		{"missing argument", call("24", "put", `{"agent_name":"a","file_name":"g.txt"}`), false},
		{"arguments not an object", call("25", "get", `"x"`), false},
		{"case of a name", call("26", "get", `{"ID":"fsm::file::SID::a::f.txt"}`), false},
		{"lone surrogate", call("27", "put", `{"agent_name":"a","file_name":"h.txt","content":"\ud800"}`), false},
		{"invalid UTF-8", call("34", "put", "{\"agent_name\":\"a\",\"file_name\":\"i.txt\",\"content\":\"\xff\xfe<\"}"), false},
		{"get it back", call("35", "get", `{"id":"fsm::file::SID::a::i.txt"}`), true},
		{"duplicate argument", call("28", "get", `{"id":"x","id":"fsm::file::SID::a::f.txt"}`), false},
		{"fractional id", call("29.5", "get_session", `{}`), false},
		{"large id", call("12345678901234567890", "get_session", `{}`), false},
		{"escaped string id", call(`"a\u0041<"`, "get_session", `{}`), false},
		{"boolean id", call("true", "get_session", `{}`), false},
		{"a task", `{"jsonrpc":"2.0","id":36,"method":"tools/call","params":{"name":"get_session","task":{"ttl":1000}}}`, false},
		{"a trailing value", call("37", "get_session", `{}`) + ` {}`, false},
		{"name in capitals", `{"jsonrpc":"2.0","id":39,"method":"tools/call","params":{"Name":"get_session"}}`, false},
		{"method in capitals", `{"jsonrpc":"2.0","id":40,"Method":"tools/call","params":{"name":"get_session"}}`, false},
		{"malformed", `{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"get"`, false},
		{"not JSON", `hello`, false},
		{"wrong version", `{"jsonrpc":"1.0","id":31,"method":"tools/call","params":{"name":"get_session"}}`, false},
		{"other metadata", `{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"get_session","_meta":{"traceparent":"x"}}}`, false},
		{"ping", `{"jsonrpc":"2.0","id":33,"method":"ping"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got [2]string
			before := neu.a.DirectCalls()
			for i, s := range []*rawStdio{old, neu} {
				got[i] = adaptertest.SessionUUID.ReplaceAllString(s.roundTrip(strings.ReplaceAll(c.line, "SID", sids[s])), "SID")
				got[i] = adaptertest.RFC3339.ReplaceAllString(got[i], "TIME")
			}
			if got[0] != got[1] {
				t.Errorf("mcp-go:     %s\nServeStdio: %s", got[0], got[1])
			}
			if fast := neu.a.DirectCalls() > before; fast != c.fast {
				t.Errorf("fast path %v; want %v", fast, c.fast)
			}
		})
	}
}

// toolResult is the part of a tools/call response the tests read.
type toolResult struct {
	ID     json.RawMessage `json:"id"`
	Result struct {
		IsError           bool              `json:"isError"`
		StructuredContent map[string]string `json:"structuredContent"`
	} `json:"result"`
}

// TestStdioConcurrent has many calls in flight at once over one stdio
// connection, with pings among them, and checks that each response carries
// its own request's id and result.
func TestStdioConcurrent(t *testing.T) {
	s := startRaw(t, serveNew, anon)
	s.roundTrip(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"new_session","arguments":{"name":"s"}}}`)
	const n = 200
	want := map[string]string{} // id to the file name its put names
	var sb strings.Builder
	for i := range n {
		id := fmt.Sprint(1000 + i)
		want[id] = fmt.Sprintf("f%d.txt", i)
		fmt.Fprintf(&sb, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"a","file_name":%q,"content":%q}}}`+"\n", id, want[id], strings.Repeat(want[id], 100))
		if i%10 == 0 {
			fmt.Fprintf(&sb, `{"jsonrpc":"2.0","id":"ping-%d","method":"ping"}`+"\n", i)
			want[fmt.Sprintf(`"ping-%d"`, i)] = ""
		}
	}
	go io.WriteString(s.w, sb.String()) // all at once, before reading any response
	ids := map[string]string{}
	for range len(want) {
		var r toolResult
		line := s.next()
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		name, ok := want[string(r.ID)]
		if !ok {
			t.Fatalf("response to an unknown or repeated id %s", r.ID)
		}
		delete(want, string(r.ID))
		if name == "" {
			continue // a ping
		}
		if r.Result.IsError || !strings.HasSuffix(r.Result.StructuredContent["id"], "::"+name) {
			t.Errorf("id %s: %s; want the id of %s", r.ID, line, name)
		}
		ids[name] = r.Result.StructuredContent["id"]
	}
	// Past the calls ServeStdio serves at once, calls go to mcp-go's
	// workers: both paths may answer here.
	if n := s.a.DirectCalls(); n == 0 {
		t.Errorf("no call served by ServeStdio itself")
	}
	// And back, in parallel, each get with the content of its file.
	sb.Reset()
	byID := map[string]string{}
	i := 0
	for name, fid := range ids {
		id := fmt.Sprint(5000 + i)
		i++
		byID[id] = name
		fmt.Fprintf(&sb, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"get","arguments":{"id":%q}}}`+"\n", id, fid)
	}
	go io.WriteString(s.w, sb.String())
	for range len(byID) {
		var r toolResult
		line := s.next()
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		name := byID[string(r.ID)]
		delete(byID, string(r.ID))
		if got := r.Result.StructuredContent["content"]; got != strings.Repeat(name, 100) {
			t.Errorf("id %s: content %.40q…; want that of %s", r.ID, got, name)
		}
	}
}

// TestStdioCancel cancels a call that blocks (a member's fleet_next)
// with notifications/cancelled; a ping answers while it blocks.
func TestStdioCancel(t *testing.T) {
	s := startRaw(t, serveNew, scout)
	s.send(`{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"fleet_next","arguments":{"wait_s":600}}}`)
	if got := s.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); !strings.Contains(got, `"id":2`) {
		t.Fatalf("ping while fleet_next blocks: %s", got)
	}
	// ServeStdio counts the call in the goroutine that serves it, which
	// may start after the ping is answered.
	if !fleettest.Until(10*time.Second, time.Millisecond, func() bool { return s.a.DirectCalls() == 1 }) {
		t.Fatalf("ServeStdio did not serve fleet_next itself: %d calls served directly", s.a.DirectCalls())
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"next","reason":"test"}}`)
	var r toolResult
	line := s.next()
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if string(r.ID) != `"next"` || !r.Result.IsError || r.Result.StructuredContent["error"] != string(fleetstate.CodeCancelled) {
		t.Errorf("after the cancel: %s; want the cancelled error of id next", line)
	}
}

// TestStdioLargeContent puts and gets content of the store's limit, with
// characters that JSON escapes, over stdio.
func TestStdioLargeContent(t *testing.T) {
	s := startRaw(t, serveNew, anon)
	s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"new_session","arguments":{"name":"s"}}}`)
	unit := "line \"quoted\" <tag> & é\n"
	content := strings.Repeat(unit, fleetstate.DefaultMaxContentSize/len(unit))
	content += strings.Repeat("x", fleetstate.DefaultMaxContentSize-len(content))
	args, _ := json.Marshal(map[string]any{"agent_name": "a", "file_name": "big.txt", "content": content})
	var put toolResult
	line := s.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"put","arguments":` + string(args) + `}}`)
	if err := json.Unmarshal([]byte(line), &put); err != nil || put.Result.IsError {
		t.Fatalf("put: %v: %.300s", err, line)
	}
	var get toolResult
	line = s.roundTrip(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get","arguments":{"id":"` + put.Result.StructuredContent["id"] + `"}}}`)
	if err := json.Unmarshal([]byte(line), &get); err != nil || get.Result.IsError {
		t.Fatalf("get: %v: %.300s", err, line)
	}
	if get.Result.StructuredContent["content"] != content {
		t.Errorf("got %d bytes back; want the %d put", len(get.Result.StructuredContent["content"]), len(content))
	}
	// One byte more is the store's error, as before.
	args, _ = json.Marshal(map[string]any{"agent_name": "a", "file_name": "big2.txt", "content": content + "x"})
	line = s.roundTrip(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"put","arguments":` + string(args) + `}}`)
	if err := json.Unmarshal([]byte(line), &put); err != nil || !put.Result.IsError {
		t.Errorf("put past the limit: %v: %.300s", err, line)
	}
	if s.a.DirectCalls() != 4 {
		t.Errorf("ServeStdio served %d calls itself; want 4", s.a.DirectCalls())
	}
}

// TestStdioEOFWithCallInFlight: the input ending cancels the calls in
// flight, as mcp-go's server does, and ServeStdio returns.
func TestStdioEOFWithCallInFlight(t *testing.T) {
	s := startRaw(t, serveNew, scout)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fleet_next","arguments":{"wait_s":600}}}`)
	s.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	s.w.(io.Closer).Close()
	var r toolResult
	line := s.next()
	if err := json.Unmarshal([]byte(line), &r); err != nil || string(r.ID) != "1" || r.Result.StructuredContent["error"] != string(fleetstate.CodeCancelled) {
		t.Errorf("after the input ended: %v: %s; want the cancelled error of id 1", err, line)
	}
	// The cleanup requires ServeStdio to return.
}

// TestStdioOnlyToolsOfTheServer: ServeStdio serves only the adapter's
// tools that the server still has; a call of one deleted from it goes to
// mcp-go, which does not know it.
func TestStdioOnlyToolsOfTheServer(t *testing.T) {
	without := func(ctx context.Context, a *mcpadapter.Adapter, srv *server.MCPServer, id mcpadapter.Identity, in io.Reader, out io.Writer) error {
		srv.DeleteTools("get_session")
		return a.ServeStdio(ctx, srv, id, in, out, nil)
	}
	s := startRaw(t, without, anon)
	resp := s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_session","arguments":{}}}`)
	if n := s.a.DirectCalls(); n != 0 || !strings.Contains(resp, "not found") {
		t.Errorf("%d calls served by ServeStdio; answer %s; want mcp-go's tool not found", n, resp)
	}
}
