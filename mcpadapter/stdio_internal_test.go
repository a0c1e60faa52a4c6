package mcpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	iofs "io/fs"
	"regexp"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
)

var (
	uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeText = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`)
)

// FuzzStdioSameAsMCPGo holds the fast paths' Wire to mcp-go: whatever
// line Wire.Read takes, Wire.Respond answers with what mcp-go's stdio server
// writes for it (its HandleMessage's response, encoded, and a newline),
// byte for byte, session IDs and times aside, on every Go release: a
// result with invalid UTF-8, which encoding/json writes differently by
// release, included (see appendValue). Two adapters, each on a store of its own, see
// the same lines, so that their stores stay alike; a line Read does
// not take goes to mcp-go on both. Each store starts with a session and a
// file of invalid UTF-8, which a get returns as it is.
func FuzzStdioSameAsMCPGo(f *testing.F) {
	var a [2]*Adapter
	var srv [2]*server.MCPServer
	// The second store starts as a copy of the first's files.
	fs := [2]afero.Fs{afero.NewMemMapFs(), afero.NewMemMapFs()}
	st0, err := fleetstate.Open(fs[0], "/state", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		f.Fatal(err)
	}
	s0, err := st0.NewSession("s0")
	if err != nil {
		f.Fatal(err)
	}
	sid := s0.ID
	if _, err := st0.Put("a", "bad.txt", []byte("x\xff\xfe<\xc3\u2028"), false); err != nil {
		f.Fatal(err)
	}
	err = afero.Walk(fs[0], "/", func(path string, info iofs.FileInfo, err error) error {
		switch {
		case err != nil:
			return err
		case info.IsDir():
			return fs[1].MkdirAll(path, info.Mode().Perm())
		}
		data, err := afero.ReadFile(fs[0], path)
		if err != nil {
			return err
		}
		return afero.WriteFile(fs[1], path, data, info.Mode().Perm())
	})
	if err != nil {
		f.Fatal(err)
	}
	for i := range a {
		st := st0
		if i == 1 {
			if st, err = fleetstate.Open(fs[1], "/state", &fleetstate.Options{NoGitIgnore: true}); err != nil {
				f.Fatal(err)
			}
		}
		a[i] = New(st, nil, nil)
		srv[i] = a[i].NewServer("fuzz", "0")
	}
	wire := a[1].Wire(srv[1])
	ctx := ContextWithIdentity(context.Background(), Identity{})
	call := func(id, name, args string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}` + "\n"
	}
	for _, line := range []string{
		call("0", "get", `{"id":"fsm::file::`+sid+`::a::bad.txt"}`),
		call("1", "new_session", `{"name":"s"}`),
		call("2", "put", `{"agent_name":"a","file_name":"f.txt","content":"x\n\"\u00e9\ud83d\ude00<&>\u2028"}`),
		call("3", "put", `{"agent_name":"a","file_name":"f.txt","content":"again"}`),
		call("4", "put", `{"agent_name":"a","file_name":"f.txt","content":"\xff\xfe","overwrite":true}`),
		call(`"x\u0041"`, "get", `{"id":"fsm::file::s::a::f.txt"}`),
		call(`"x-1"`, "get", `{"id":"fsm::file::s::a::f.txt"}`),
		call("5.5", "list", `{}`),
		call("-12", "list", `{"session_id":"`+sid+`"}`),
		call("6", "get", `{"id":null}`),
		call("7", "get", `{"ID":"x"}`),
		call("8", "put", `{"agent_name":"a","file_name":"g","content":5}`),
		call("9", "get_session", `[]`),
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"get_session","_meta":{"progressToken":7}}}` + "\n",
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"get_session","_meta":{"traceparent":"x"}}}` + "\n",
		`{"Method":"tools/call","jsonrpc":"2.0","id":12,"params":{"Name":"get_session"}}` + "\n",
		`{"method":"tools/call","params":{"arguments":{"id":"fsm::file::s::a::f.txt"},"name":"get"},"id":"y","jsonrpc":"2.0"}` + "\r\n",
		call("1e400", "get_session", `{}`),
		call("13", "get", `{"id":"x","id":"y"}`),
	} {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		c, ok := wire.Read(line, false)
		want, err := json.Marshal(srv[0].HandleMessage(ctx, line))
		if !ok {
			srv[1].HandleMessage(ctx, line)
			return
		}
		if err != nil {
			t.Fatalf("parseCall took %q, whose answer mcp-go cannot encode: %v", line, err)
		}
		var token any
		if c.Progress != nil {
			if err := json.Unmarshal(c.Progress, &token); err != nil {
				t.Fatal(err)
			}
		}
		resp, release := wire.Respond(ctx, c, nil, token)
		got := bytes.Clone(resp)
		release()
		norm := func(b []byte) []byte {
			return timeText.ReplaceAll(uuidText.ReplaceAll(b, []byte("UUID")), []byte("TIME"))
		}
		if want = append(want, '\n'); !bytes.Equal(norm(got), norm(want)) {
			t.Errorf("line %q\nmcp-go:     %s\nServeStdio: %s", line, want, got)
		}
	})
}
