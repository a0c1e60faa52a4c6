package fleettest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hostile input, shared by the tests that send it to a stdio server (the
// binary's) and to the daemon over HTTP: a state directory with files
// beside it that must never change and links planted to reach them, the
// store calls built to escape it, and the malformed messages a broken or
// hostile client may send.

// TreeHash hashes every name, mode, link target and content below root,
// the state directory excepted.
func TreeHash(t testing.TB, root, except string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == except {
			return filepath.SkipDir
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", p, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(h, "-> %s\n", target)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// HostileWorld is a state directory with, beside it, files that must never
// change, and symbolic links planted inside it that point at them.
type HostileWorld struct {
	Root, State, Outside, Session string
}

// NewHostileWorld makes the world in a new temporary directory: the state
// directory (not created) and the files beside it.
func NewHostileWorld(t testing.TB) *HostileWorld {
	t.Helper()
	w := &HostileWorld{Root: t.TempDir()}
	w.State = filepath.Join(w.Root, "state")
	w.Outside = filepath.Join(w.Root, "outside")
	for _, f := range []string{"secret.txt", "dir/inner.txt"} {
		p := filepath.Join(w.Outside, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("do not touch "+f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// Plant makes the links an attacker with a shell beside the agents could
// plant in the state directory: a session, an agent, a folder and a file
// that lead outside, and the rendezvous's own folder.
func (w *HostileWorld) Plant(t testing.TB) {
	t.Helper()
	for link, target := range map[string]string{
		filepath.Join(w.State, "00000000-0000-4000-8000-000000000000"): w.Outside, // a whole session
		filepath.Join(w.State, w.Session, "linked-agent"):              w.Outside, // an agent
		filepath.Join(w.State, w.Session, "scout", "linked-dir"):       filepath.Join(w.Outside, "dir"),
		filepath.Join(w.State, w.Session, "scout", "linked-file"):      filepath.Join(w.Outside, "secret.txt"),
	} {
		if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
}

// HostileCall is a tool call that must fail with the error Code.
type HostileCall struct {
	Tool string
	Args map[string]any
	Code string
}

// HostileStoreCalls are store calls built to escape the state directory or
// to break its rules; each must fail with the code given.
func HostileStoreCalls(session string) []HostileCall {
	long := strings.Repeat("a", 1<<20) // eight thousand times the longest name
	return []HostileCall{
		{"put", map[string]any{"agent_name": "scout", "file_name": "../../outside/secret.txt", "content": "x", "overwrite": true}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "/etc/passwd", "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": `..\..\x`, "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "a/../../../x", "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "x\x00y", "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "..", "file_name": "x", "content": "x"}, "ERR_INVALID_AGENT_NAME"},
		{"put", map[string]any{"agent_name": "../outside", "file_name": "x", "content": "x"}, "ERR_INVALID_AGENT_NAME"},
		{"put", map[string]any{"agent_name": long, "file_name": "x", "content": "x"}, "ERR_INVALID_AGENT_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": long, "content": "x"}, "ERR_INVALID_FILE_NAME"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "big", "content": strings.Repeat("b", 16<<20+1)}, "ERR_CONTENT_TOO_LARGE"},
		{"put", map[string]any{"agent_name": "linked-agent", "file_name": "secret.txt", "content": "x", "overwrite": true}, "ERR_PATH_ESCAPE"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "linked-dir/inner.txt", "content": "x", "overwrite": true}, "ERR_PATH_ESCAPE"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "linked-dir/new.txt", "content": "x"}, "ERR_PATH_ESCAPE"},
		{"put", map[string]any{"agent_name": "scout", "file_name": "linked-file", "content": "x", "overwrite": true}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::linked-agent::secret.txt"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::scout::linked-dir/inner.txt"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::scout::linked-file"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::00000000-0000-4000-8000-000000000000::dir::inner.txt"}, "ERR_PATH_ESCAPE"},
		{"get", map[string]any{"id": "fsm::file::" + session + "::scout::../../../outside/secret.txt"}, "ERR_CAN_ONLY_RETRIEVE_FILES"},
		{"get", map[string]any{"id": "fsm::file::../outside::dir::inner.txt"}, "ERR_CAN_ONLY_RETRIEVE_FILES"},
		{"list", map[string]any{"session_id": "../outside"}, "ERR_SESSION_NOT_VALID"},
		{"list", map[string]any{"session_id": "00000000-0000-4000-8000-000000000000"}, "ERR_PATH_ESCAPE"},
		{"list", map[string]any{"agent_name": "linked-agent"}, "ERR_PATH_ESCAPE"},
		{"list", map[string]any{"agent_name": "../.."}, "ERR_INVALID_AGENT_NAME"},
		{"new_session", map[string]any{"name": "a\nb"}, "ERR_INVALID_SESSION_NAME"},
		{"new_session", map[string]any{"name": long}, "ERR_INVALID_SESSION_NAME"},
	}
}

// Malformed is a JSON-RPC message, one line, and what it is.
type Malformed struct {
	Name string
	Line string
}

// MalformedMessages are JSON-RPC messages a broken or hostile client may
// send, one line each.
func MalformedMessages() []Malformed {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	deepArgs := `{"jsonrpc":"2.0","id":9001,"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"a","file_name":"b","content":` + deep + `}}}`
	return []Malformed{
		{"not JSON", `this is not json`},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put"`},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"ping"}`},
		{"no method", `{"jsonrpc":"2.0","id":4}`},
		{"method a number", `{"jsonrpc":"2.0","id":5,"method":7}`},
		{"id an object", `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`},
		{"unknown method", `{"jsonrpc":"2.0","id":6,"method":"fleet/steal"}`},
		{"params an array", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2,3]}`},
		{"no tool name", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}`},
		{"unknown tool", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"rm -rf /","arguments":{}}}`},
		{"arguments a string", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"put","arguments":"x"}}`},
		{"a huge number", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"fleet_next","arguments":{"wait_s":1e999}}}`},
		{"nested array", `{"jsonrpc":"2.0","id":12,"method":"ping","params":` + deep + `}`},
		{"nested arguments", deepArgs},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\",\"params\":{\"name\":\"put\",\"arguments\":{\"agent_name\":\"\xff\xfe\",\"file_name\":\"\xc0\xaf\",\"content\":\"\xed\xa0\x80\"}}}"},
		{"a stray response", `{"jsonrpc":"2.0","id":77,"result":{}}`},
		{"a notification tools/call", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"clean_sessions","arguments":{}}}`},
		{"control characters", "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":{\"name\":\"put\",\"arguments\":{\"agent_name\":\"a\\u001b[2J\",\"file_name\":\"b\",\"content\":\"c\"}}}"},
		// The last of duplicate keys wins (encoding/json); over HTTP the
		// Mcp-Name header must agree with it, so the two cannot disagree.
		{"duplicate keys", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"clean_sessions","name":"get_session","arguments":{}}}`},
	}
}

// MillionArgs is the JSON of a put's arguments with a million arguments
// besides its own (12 MB), built directly: encoding a map that size would
// sort a million keys.
func MillionArgs() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"agent_name":"scout","file_name":"m","content":"x"`)
	for i := range 1_000_000 {
		fmt.Fprintf(&b, `,"k%d":0`, i)
	}
	b.WriteString("}")
	return b.Bytes()
}

// HostileReply is what a hostile test needs of a tool call's answer:
// whether a result came, whether it was an error, its structured content,
// and, for a failure message, the reply as it was.
type HostileReply struct {
	Answered   bool           // a result came (not a JSON-RPC error, not silence)
	IsError    bool           // the result is a tool error
	Structured map[string]any // its structured content
	Raw        string         // the whole reply, for failure messages
}

// RunHostileStore makes every call of [HostileStoreCalls] through call and
// fails t unless each answers its code with a short message that names no
// host path, a listing shows no file reached through a link, and nothing
// outside the state directory changed.
func RunHostileStore(t *testing.T, w *HostileWorld, call func(tool string, args any) HostileReply) {
	t.Helper()
	before := TreeHash(t, w.Root, w.State)
	for _, c := range HostileStoreCalls(w.Session) {
		start := time.Now()
		r := call(c.Tool, c.Args)
		if d := time.Since(start); d > time.Second {
			t.Logf("%s took %v", c.Tool, d.Round(time.Millisecond))
		}
		if !r.Answered || !r.IsError || r.Structured["error"] != c.Code {
			t.Errorf("%s(%.80v): %s; want %s", c.Tool, c.Args, r.Raw, c.Code)
			continue
		}
		msg, _ := r.Structured["message"].(string)
		if len(msg) > 1024 || strings.Contains(msg, w.Root) {
			t.Errorf("%s: message of %d bytes %.100q: long, or names a host path", c.Tool, len(msg), msg)
		}
	}
	// A listing skips the links; the files the links reach stay as they were.
	if r := call("list", map[string]any{"agent_name": "scout"}); !r.Answered || r.IsError {
		t.Errorf("list: %s", r.Raw)
	} else {
		files, _ := r.Structured["files"].([]any)
		for _, f := range files {
			if name, _ := f.(map[string]any)["file_name"].(string); strings.HasPrefix(name, "linked") {
				t.Errorf("list shows %s, reached through a link", name)
			}
		}
	}
	if after := TreeHash(t, w.Root, w.State); after != before {
		t.Fatal("something outside the state directory changed")
	}
}
