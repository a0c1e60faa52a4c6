package mcpadapter

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/mcpwire"
)

// FuzzParseCall: whatever line the fast path takes is valid JSON, a
// tools/call of a known tool, and decodes to the arguments, the id and the
// progress token that mcp-go's decoding and decodeArgs give. Decoding does
// not differ between Go releases: it holds on every release.
func FuzzParseCall(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"a","file_name":"f","content":"x\n\"\u00e9\ud83d\ude00","overwrite":true}}}`,
		`{"method":"tools/call","params":{"arguments":{"id":"fsm::file::s::a::f"},"name":"get","_meta":{"progressToken":7}},"id":"x","jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":-12,"method":"tools/call","params":{"name":"list","arguments":{"session_id":"s"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_session"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"new_session","arguments":{"name":"\u0000"}}}` + "\r\n",
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get","arguments":{"id":1}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
		`[1,2]`, `{"a":[{"b":null}],"c":1e5}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"new_session","arguments":{"name":"x"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"new_session","arguments":{"name":"x"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":5},"io.modelcontextprotocol/logLevel":1},"arguments":{},"name":"list"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"put\",\"arguments\":{\"agent_name\":\"a\",\"file_name\":\"f\",\"content\":\"\xff\"}}}",
	} {
		f.Add([]byte(s))
	}
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		f.Fatal(err)
	}
	a := New(st, nil, &Options{FleetElsewhere: errorf("elsewhere")}) // every tool, fleet ones too
	f.Fuzz(func(t *testing.T, line []byte) {
		if m, ok := parseCall(line, a.byName, true); ok {
			// The _meta of protocol 2026-07-28, read as mcp-go reads it.
			var req mcp.CallToolRequest
			if err := json.Unmarshal(line, &req); err != nil {
				t.Fatalf("mcp-go cannot decode %q: %v", line, err)
			}
			if v := req.Params.Meta.ProtocolVersion(); v != m.Version {
				t.Errorf("protocol version %q; mcp-go reads %q", m.Version, v)
			}
			if caps := req.Params.Meta.ClientCapabilities(); m.Caps != (caps != nil) {
				t.Errorf("client capabilities %v; mcp-go reads %+v", m.Caps, caps)
			}
			want := m.tool.newArgs()
			if err := decodeArgs(req, m.tool.input, want); err != nil || !reflect.DeepEqual(m.Args, want) {
				t.Errorf("arguments %+v; decodeArgs %+v, %v", m.Args, want, err)
			}
		}
		c, ok := parseCall(line, a.byName, false)
		if !ok {
			return
		}
		if !json.Valid(line) {
			t.Fatalf("took invalid JSON %q", line)
		}
		var env struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      any             `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(line, &env); err != nil || env.JSONRPC != "2.0" || env.Method != "tools/call" {
			t.Fatalf("took %q: %v", line, err)
		}
		if id, _ := json.Marshal(env.ID); !bytes.Equal(id, c.ID) {
			t.Errorf("id %s; mcp-go answers with id %s", c.ID, id)
		}
		var req mcp.CallToolRequest
		if err := json.Unmarshal(line, &req); err != nil {
			t.Fatalf("mcp-go cannot decode %q: %v", line, err)
		}
		if req.Params.Name != c.tool.name {
			t.Errorf("tool %s; mcp-go reads %s", c.tool.name, req.Params.Name)
		}
		want := c.tool.newArgs()
		if err := decodeArgs(req, c.tool.input, want); err != nil {
			t.Fatalf("took arguments that decodeArgs refuses: %q: %v", line, err)
		}
		if !reflect.DeepEqual(c.Args, want) {
			t.Errorf("arguments %+v; decodeArgs %+v", c.Args, want)
		}
		var token mcp.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		var got mcp.ProgressToken
		if c.Progress != nil {
			if err := json.Unmarshal(c.Progress, &got); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(got, token) {
			t.Errorf("progress token %#v; mcp-go reads %#v", got, token)
		}
	})
}

// TestAppendCallResult: a response of the fast path is what mcp-go writes
// for the same result, byte for byte on every Go release, invalid UTF-8
// included.
func TestAppendCallResult(t *testing.T) {
	for _, v := range []any{
		map[string]string{"content": "a <b> & \"c\"\n\u2028"},
		map[string]string{"content": "invalid \xff\xfe UTF-8 \xc3"},
		errorBody{Error: fleetstate.CodeFileExists, Message: "fleetstate: x"},
		errorBody{Error: fleetstate.CodeFileExists, Message: "fleetstate: \xff"},
		map[string]any{"files": []fileEntry{{ID: "i", Size: 3}}},
	} {
		for _, isError := range []bool{false, true} {
			data, ok := appendValue(nil, v)
			if !ok {
				t.Fatal(string(data))
			}
			want, err := json.Marshal(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(float64(7)), result(v, isError)))
			if err != nil {
				t.Fatal(err)
			}
			if got := mcpwire.AppendCallResult(nil, []byte("7"), nil, data, isError); !bytes.Equal(got, append(want, '\n')) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		}
	}
}

// TestParseCallManyNames: an object of a million names is read in linear
// time (the names are checked for duplicates through a map). Quadratic
// checking would take hours here: the test binary's timeout catches it; no
// wall-clock bound is asserted.
func TestParseCallManyNames(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"agent_name":"a","file_name":"m","content":"x"`)
	for i := range 1_000_000 {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString(`},"name":"put"}}`)
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	a := New(st, nil, nil)
	if _, ok := parseCall(b.Bytes(), a.byName, false); ok {
		t.Error("took a put with a million unknown arguments")
	}
}
