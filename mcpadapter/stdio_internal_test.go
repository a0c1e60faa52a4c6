package mcpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"
)

var (
	uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeText = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`)
)

// FuzzStdioSameAsMCPGo holds ServeStdio's own calls to mcp-go: whatever
// line parseCall takes, respond answers with the bytes mcp-go's stdio
// server writes for it (its HandleMessage's response, encoded, and a
// newline), session IDs and times aside. Two adapters, each on a store of
// its own, see the same lines, so that their stores stay alike; a line
// parseCall does not take goes to mcp-go on both.
func FuzzStdioSameAsMCPGo(f *testing.F) {
	var a [2]*Adapter
	var srv [2]*server.MCPServer
	for i := range a {
		st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
		if err != nil {
			f.Fatal(err)
		}
		a[i] = New(st, nil, nil)
		srv[i] = a[i].NewServer("fuzz", "0")
	}
	ctx := ContextWithIdentity(context.Background(), Identity{})
	call := func(id, name, args string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}` + "\n"
	}
	for _, line := range []string{
		call("1", "new_session", `{"name":"s"}`),
		call("2", "put", `{"agent_name":"a","file_name":"f.txt","content":"x\n\"\u00e9\ud83d\ude00<&>\u2028"}`),
		call("3", "put", `{"agent_name":"a","file_name":"f.txt","content":"again"}`),
		call("4", "put", `{"agent_name":"a","file_name":"f.txt","content":"\xff\xfe","overwrite":true}`),
		call(`"x\u0041"`, "get", `{"id":"fsm::file::s::a::f.txt"}`),
		call("5.5", "list", `{}`),
		call("6", "get", `{"id":null}`),
		call("7", "get", `{"ID":"x"}`),
		call("8", "put", `{"agent_name":"a","file_name":"g","content":5}`),
		call("9", "get_session", `[]`),
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"get_session","_meta":{"progressToken":7}}}` + "\n",
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"get_session","_meta":{"traceparent":"x"}}}` + "\n",
		`{"Method":"tools/call","jsonrpc":"2.0","id":12,"params":{"Name":"get_session"}}` + "\n",
		call("1e400", "get_session", `{}`),
		call("13", "get", `{"id":"x","id":"y"}`),
	} {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		c, ok := a[1].parseCall(line, srv[1])
		want, err := json.Marshal(srv[0].HandleMessage(ctx, line))
		if !ok {
			srv[1].HandleMessage(ctx, line)
			return
		}
		if err != nil {
			t.Fatalf("parseCall took %q, whose answer mcp-go cannot encode: %v", line, err)
		}
		got := a[1].respond(ctx, srv[1], c)
		norm := func(b []byte) []byte {
			return timeText.ReplaceAll(uuidText.ReplaceAll(b, []byte("UUID")), []byte("TIME"))
		}
		if want = append(want, '\n'); !bytes.Equal(norm(got), norm(want)) {
			t.Errorf("line %q\nmcp-go:     %s\nServeStdio: %s", line, want, got)
		}
	})
}
