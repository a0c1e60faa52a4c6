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

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"
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
		case <-time.After(waitLimit):
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

func serveStdio(ctx context.Context, a *mcpadapter.Adapter, srv *server.MCPServer, id mcpadapter.Identity, in io.Reader, out io.Writer) error {
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
	s := startRaw(t, serveStdio, anon)
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
	s := startRaw(t, serveStdio, scout)
	s.send(`{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"fleet_next","arguments":{"wait_s":600}}}`)
	if got := s.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); !strings.Contains(got, `"id":2`) {
		t.Fatalf("ping while fleet_next blocks: %s", got)
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
	s := startRaw(t, serveStdio, anon)
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
}

// TestStdioEOFWithCallInFlight: the input ending cancels the calls in
// flight, as mcp-go's server does, and ServeStdio returns.
func TestStdioEOFWithCallInFlight(t *testing.T) {
	s := startRaw(t, serveStdio, scout)
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
