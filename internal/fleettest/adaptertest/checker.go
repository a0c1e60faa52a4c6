package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The callers of the tests. Identities reach the tool handlers through the
// context of each call, as a transport would put them there; over HTTP
// they do not cross the wire, the token does.
var (
	Lead  = mcpadapter.Identity{Agent: "lead", Role: mcpadapter.RoleLead}
	Lead2 = mcpadapter.Identity{Agent: "lead2", Role: mcpadapter.RoleLead}
	Scout = mcpadapter.Identity{Agent: "scout", Role: mcpadapter.RoleMember}
	Miner = mcpadapter.Identity{Agent: "miner", Role: mcpadapter.RoleMember}
	Anon  = mcpadapter.Identity{}
)

// WaitLimit bounds every wait of a test on another goroutine, so that a
// broken flow fails instead of hanging. It is never a synchronisation sleep.
const WaitLimit = 20 * time.Second

// ValidArgs are arguments each fleet tool accepts, so that a refusal can
// only come from the caller's role.
var ValidArgs = map[string]map[string]any{
	"fleet_send":    {"to": "scout", "content": "x", "wait": false},
	"fleet_next":    {"wait_s": 0},
	"fleet_ask":     {"question": "q", "default": "d"},
	"fleet_reply":   {"content": "r"},
	"fleet_poll":    {},
	"fleet_ack":     {"ticket": "ticket-x"},
	"fleet_members": {},
	"fleet_approve": {"id": "perm-x", "behavior": "allow"},
}

// SessionUUID and RFC3339 match a session ID and a time in an answer, the
// parts of it that differ between two servers given the same requests.
var (
	SessionUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	RFC3339     = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`)
)

// Checker calls the tools of an initialized MCP client, in process or over
// HTTP, and checks what every result must be: its shape, and its
// structured content under the output schema that tools/list gave.
type Checker struct {
	// T receives the failures; a test may point it at a subtest's.
	T testing.TB
	// Dir is the state directory, which no error message may name.
	Dir    string
	Client *client.Client
	// Tools is tools/list as it came over the wire, by name.
	Tools map[string]map[string]any
	// Outputs are the compiled output schemas, by tool.
	Outputs map[string]*jsonschema.Schema
}

// NewChecker returns a Checker of c, an initialized client of a server
// whose state directory is dir. It reads tools/list and compiles every
// output schema.
func NewChecker(t testing.TB, dir string, c *client.Client) *Checker {
	t.Helper()
	tools := listTools(t, c)
	outputs := map[string]*jsonschema.Schema{}
	for name, tl := range tools {
		outputs[name] = CompileSchema(t, name+"-output", tl["outputSchema"])
	}
	return &Checker{T: t, Dir: dir, Client: c, Tools: tools, Outputs: outputs}
}

// listTools returns tools/list as raw JSON objects: the client's decoded
// mcp.Tool drops schema keywords such as anyOf.
func listTools(t testing.TB, c *client.Client) map[string]map[string]any {
	t.Helper()
	req := transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(1 << 40)), Method: string(mcp.MethodToolsList),
	}
	if v := c.ProtocolVersion(); mcp.IsModernProtocol(v) {
		// The stateless protocol wants its metadata on every request.
		req.Params = map[string]any{"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion:    v,
			mcp.MetaKeyClientInfo:         mcp.Implementation{Name: "mcpadapter-test", Version: "0"},
			mcp.MetaKeyClientCapabilities: mcp.ClientCapabilities{},
		}}
		req.Header = http.Header{}
		for k, v := range mcp.StandardHeaders(v, mcp.MethodToolsList, nil) {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.GetTransport().SendRequest(context.Background(), req)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if resp.Error != nil {
		t.Fatalf("tools/list: JSON-RPC error %+v", resp.Error)
	}
	var body struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(resp.Result, &body); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := map[string]map[string]any{}
	for _, tl := range body.Tools {
		name, _ := tl["name"].(string)
		if _, dup := out[name]; dup {
			t.Fatalf("tools/list names %q twice", name)
		}
		out[name] = tl
	}
	return out
}

// CompileSchema compiles a JSON schema, named name in failures.
func CompileSchema(t testing.TB, name string, schema any) *jsonschema.Schema {
	t.Helper()
	if schema == nil {
		t.Fatalf("%s: no schema", name)
	}
	data, err := json.Marshal(schema)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: compile: %v", name, err)
	}
	return s
}

// Validate returns nil if v is valid under s.
func Validate(s *jsonschema.Schema, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// Reply is what one tools/call gave: a result or a transport (JSON-RPC)
// error. It is safe to produce on any goroutine and checked on the test's.
type Reply struct {
	Tool string
	Res  *mcp.CallToolResult
	Err  error
}

// Do calls a tool as id. It does not touch T, so it may run on any
// goroutine.
func (c *Checker) Do(ctx context.Context, id mcpadapter.Identity, tool string, args any, meta *mcp.Meta) Reply {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	req.Params.Meta = meta
	res, err := c.Client.CallTool(mcpadapter.ContextWithIdentity(ctx, id), req)
	return Reply{Tool: tool, Res: res, Err: err}
}

// Async calls a tool on its own goroutine; the reply arrives on the
// returned channel.
func (c *Checker) Async(ctx context.Context, id mcpadapter.Identity, tool string, args any, meta *mcp.Meta) <-chan Reply {
	ch := make(chan Reply, 1)
	go func() { ch <- c.Do(ctx, id, tool, args, meta) }()
	return ch
}

// Recv waits for a reply of an async call.
func (c *Checker) Recv(ch <-chan Reply) Reply {
	c.T.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(WaitLimit):
		c.T.Fatalf("no reply within %v", WaitLimit)
		return Reply{}
	}
}

// PendingCall reports whether an async call is still blocked. A reply that
// did arrive is put back.
func PendingCall(ch chan Reply) bool {
	select {
	case r := <-ch:
		ch <- r
		return false
	default:
		return true
	}
}

// Body checks what every result has in common, success or failure: no
// JSON-RPC error, one text content holding the same JSON as the structured
// content, and structured content valid under the tool's output schema.
func (c *Checker) Body(r Reply) map[string]any {
	c.T.Helper()
	if r.Err != nil {
		c.T.Fatalf("%s: JSON-RPC error %v; want a tool result", r.Tool, r.Err)
	}
	if r.Res == nil {
		c.T.Fatalf("%s: nil result", r.Tool)
	}
	sc, ok := r.Res.StructuredContent.(map[string]any)
	if !ok {
		c.T.Fatalf("%s: structured content %T (%v); want an object", r.Tool, r.Res.StructuredContent, r.Res.StructuredContent)
	}
	if len(r.Res.Content) != 1 {
		c.T.Fatalf("%s: %d contents; want 1 text content", r.Tool, len(r.Res.Content))
	}
	text, ok := mcp.AsTextContent(r.Res.Content[0])
	if !ok {
		c.T.Fatalf("%s: content %T; want text", r.Tool, r.Res.Content[0])
	}
	var fromText any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		c.T.Fatalf("%s: text content is not JSON: %v: %q", r.Tool, err, text.Text)
	}
	if !reflect.DeepEqual(fromText, any(sc)) {
		c.T.Errorf("%s: text content %s; want the structured content %v", r.Tool, text.Text, sc)
	}
	if s := c.Outputs[r.Tool]; s != nil {
		if err := Validate(s, sc); err != nil {
			c.T.Errorf("%s: structured content %v breaks the output schema: %v", r.Tool, sc, err)
		}
	} else {
		c.T.Errorf("%s: no output schema in tools/list", r.Tool)
	}
	return sc
}

// OkOf checks that r is a success and returns its structured content.
func (c *Checker) OkOf(r Reply) map[string]any {
	c.T.Helper()
	sc := c.Body(r)
	if r.Res.IsError {
		c.T.Fatalf("%s: isError with %v; want success", r.Tool, sc)
	}
	if _, has := sc["error"]; has {
		c.T.Errorf("%s: success carries error %v", r.Tool, sc["error"])
	}
	return sc
}

var codeRE = regexp.MustCompile(`^ERR_[A-Z_]+$`)

// ErrOf checks that r is an error result {error: code, message} and returns
// the message.
func (c *Checker) ErrOf(r Reply, code fleetstate.Code) string {
	c.T.Helper()
	sc := c.Body(r)
	if !r.Res.IsError {
		c.T.Fatalf("%s: success %v; want isError with %s", r.Tool, sc, code)
	}
	WantKeys(c.T, r.Tool+" error", sc, "error", "message")
	got, _ := sc["error"].(string)
	if !codeRE.MatchString(got) {
		c.T.Errorf("%s: error %q is not an error code", r.Tool, got)
	}
	if got != string(code) {
		c.T.Errorf("%s: error %s (%v); want %s", r.Tool, got, sc["message"], code)
	}
	msg, _ := sc["message"].(string)
	if msg == "" {
		c.T.Errorf("%s: empty message", r.Tool)
	}
	if strings.Contains(msg, c.Dir) {
		c.T.Errorf("%s: message %q names the state directory %s", r.Tool, msg, c.Dir)
	}
	return msg
}

// Ok calls a tool as id, checks that it succeeds and returns its
// structured content.
func (c *Checker) Ok(id mcpadapter.Identity, tool string, args any) map[string]any {
	c.T.Helper()
	return c.OkOf(c.Do(context.Background(), id, tool, args, nil))
}

// Fail calls a tool as id, checks that it fails with code and returns the
// message.
func (c *Checker) Fail(id mcpadapter.Identity, tool string, args any, code fleetstate.Code) string {
	c.T.Helper()
	return c.ErrOf(c.Do(context.Background(), id, tool, args, nil), code)
}

// WantKeys checks that m has exactly the keys given.
func WantKeys(t testing.TB, what string, m map[string]any, keys ...string) {
	t.Helper()
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	want := slices.Clone(keys)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: keys %v; want %v (in %v)", what, got, want, m)
	}
}

// OutcomeKeys are the fields an outcome may have.
var OutcomeKeys = []string{"outcome", "turn_id", "ticket", "from", "content", "partial", "reason", "state"}

// WantOutcome checks that m is an outcome of kind with exactly the keys
// given besides "outcome", and returns it.
func WantOutcome(t testing.TB, m map[string]any, kind string, keys ...string) map[string]any {
	t.Helper()
	if m["outcome"] != kind {
		t.Errorf("outcome %v; want %s (in %v)", m["outcome"], kind, m)
	}
	for _, k := range keys {
		if !slices.Contains(OutcomeKeys, k) {
			t.Fatalf("test bug: %q is not an outcome field", k)
		}
	}
	// An ended turn's outcome always names the ticket that holds it (until
	// the lead's next call when a call returned it).
	// (Cleaned sessions take their tickets with them.)
	if (kind == "reply" || kind == "turn_done" || kind == "failed") && m["reason"] != "session_cleaned" && !slices.Contains(keys, "ticket") {
		keys = append(slices.Clone(keys), "ticket")
	}
	WantKeys(t, "outcome "+kind, m, append([]string{"outcome"}, keys...)...)
	return m
}

// Str returns m[k] if it is a string, and "" otherwise.
func Str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// WaitArgs are the arguments of a fleet_next that waits s seconds.
func WaitArgs(s float64) map[string]any { return map[string]any{"wait_s": s} }
