package usage_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/fleetstate/fleetstate/internal/usage"
)

// The transcripts in testdata were written by the real CLIs (Claude Code
// 2.1.328: claude -p; Codex 0.169.0: codex exec) running a script against
// the scripted model server of internal/fleettest/modelserver, which
// reports 100 input, 20 output, 50 cache-read and 10 cache-write tokens
// for every call: six calls for Claude Code (its tool search among them),
// four for Codex. Only the lines the reader looks at, and the user lines
// around them, were kept; the paths were replaced.
const (
	claudeFile = "testdata/claude-code-2.1.328.jsonl"
	codexFile  = "testdata/codex-0.169.0.jsonl"
)

var (
	claudeTotal = usage.Tokens{Input: 600, Output: 120, CacheRead: 300, CacheWrite: 60}
	// The Responses API has no cache writes, and counts cached input in
	// the input: the reader takes it out.
	codexTotal = usage.Tokens{Input: 200, Output: 80, CacheRead: 200}
)

func TestReadRealTranscripts(t *testing.T) {
	for _, c := range []struct {
		file string
		want usage.Tokens
	}{{claudeFile, claudeTotal}, {codexFile, codexTotal}} {
		var r usage.Reader
		got, err := sum(&r, c.file)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.file, got, err, c.want)
		}
		if again, err := sum(&r, c.file); err != nil || !again.IsZero() {
			t.Errorf("%s read again: %+v, %v; want nothing new", c.file, again, err)
		}
	}
}

// copyTo writes data to a new file in a test folder and returns its path.
func copyTo(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func appendTo(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}

// A transcript read while the CLI writes it counts each call once, in
// whatever pieces the writes came: a line not yet ended waits for its
// end. Checked with rapid on both CLIs' transcripts, cut at random.
func TestReadWhileWritten(t *testing.T) {
	for _, c := range []struct {
		file string
		want usage.Tokens
	}{{claudeFile, claudeTotal}, {codexFile, codexTotal}} {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		rapid.Check(t, func(rt *rapid.T) {
			cuts := rapid.SliceOfN(rapid.IntRange(0, len(data)), 0, 8).Draw(rt, "cuts")
			path := copyTo(t, nil)
			var r usage.Reader
			var total usage.Tokens
			at := 0
			for _, cut := range append(cuts, len(data)) {
				if cut < at {
					continue
				}
				appendTo(t, path, data[at:cut])
				at = cut
				got, err := sum(&r, path)
				if err != nil {
					rt.Fatal(err)
				}
				total = total.Add(got)
			}
			if total != c.want {
				rt.Fatalf("%s in pieces %v: %+v; want %+v", c.file, cuts, total, c.want)
			}
		})
	}
}

// Claude Code writes a message of several blocks as several lines, each
// with the message's usage: it counts once.
func TestMessageOnSeveralLinesCountsOnce(t *testing.T) {
	data, err := os.ReadFile(claudeFile)
	if err != nil {
		t.Fatal(err)
	}
	var dup []byte
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		dup = append(dup, l...)
		if bytes.Contains(l, []byte(`"type":"assistant"`)) {
			dup = append(dup, l...)
		}
	}
	var r usage.Reader
	if got, err := sum(&r, copyTo(t, dup)); err != nil || got != claudeTotal {
		t.Errorf("every assistant line twice: %+v, %v; want %+v", got, err, claudeTotal)
	}
}

// A transcript written anew (it shrank) is read from its start again,
// and counts only what it did not hold before.
func TestRewrittenTranscriptCountsOnlyWhatIsNew(t *testing.T) {
	for _, c := range []struct {
		file string
		want usage.Tokens
	}{{claudeFile, claudeTotal}, {codexFile, codexTotal}} {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(data, []byte("\n"))
		path := copyTo(t, data)
		var r usage.Reader
		if got, _ := sum(&r, path); got != c.want {
			t.Fatalf("%s: %+v; want %+v", c.file, got, c.want)
		}
		// The same transcript without its first line: shorter, nothing new.
		if err := os.WriteFile(path, bytes.Join(lines[1:], nil), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := sum(&r, path); err != nil || !got.IsZero() {
			t.Errorf("%s rewritten: %+v, %v; want nothing new", c.file, got, err)
		}
	}
}

// A line longer than MaxLine is skipped, and the lines after it count.
func TestLongLineIsSkipped(t *testing.T) {
	data, err := os.ReadFile(claudeFile)
	if err != nil {
		t.Fatal(err)
	}
	long := `{"type":"user","message":{"content":"` + strings.Repeat("x", usage.MaxLine+1) + `"}}` + "\n"
	var r usage.Reader
	if got, err := sum(&r, copyTo(t, append([]byte(long), data...))); err != nil || got != claudeTotal {
		t.Errorf("after a long line: %+v, %v; want %+v", got, err, claudeTotal)
	}
}

func TestReadRefusesWhatIsNoFile(t *testing.T) {
	var r usage.Reader
	if _, err := sum(&r, t.TempDir()); !errors.Is(err, usage.ErrNotTranscript) {
		t.Errorf("a folder: %v; want ErrNotTranscript", err)
	}
	if _, err := sum(&r, filepath.Join(t.TempDir(), "none.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no file: %v; want ErrNotExist", err)
	}
}

// FuzzRead: whatever a transcript holds, reading it never fails or
// panics, counts nothing negative, and a second Read adds nothing.
func FuzzRead(f *testing.F) {
	for _, file := range []string{claudeFile, codexFile} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":-5}}}}` + "\n"))
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","usage":{"input_tokens":-5,"output_tokens":3}}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := copyTo(t, data)
		var r usage.Reader
		got, err := sum(&r, path)
		if err != nil {
			t.Fatal(err)
		}
		if got.Input < 0 || got.Output < 0 || got.CacheRead < 0 || got.CacheWrite < 0 {
			t.Errorf("negative usage %+v", got)
		}
		if again, err := sum(&r, path); err != nil || !again.IsZero() {
			t.Errorf("read again: %+v, %v", again, err)
		}
	})
}

// sum reads path with r and returns the usage of every model.
func sum(r *usage.Reader, path string) (usage.Tokens, error) {
	m, err := r.Read(path)
	return m.Sum(), err
}

// Each CLI names the model of its calls: Claude Code in each message,
// Codex in the turn's context; the usage is told by model.
func TestReadByModel(t *testing.T) {
	for _, c := range []struct {
		file, model string
		want        usage.Tokens
	}{{claudeFile, "claude-opus-5-5", claudeTotal}, {codexFile, "gpt-5.5", codexTotal}} {
		var r usage.Reader
		got, err := r.Read(c.file)
		if err != nil || len(got) != 1 || got[c.model] != c.want {
			t.Errorf("%s: %+v, %v; want %+v of %s alone", c.file, got, err, c.want, c.model)
		}
	}
	// A model changed mid-session counts from its turn on.
	data, err := os.ReadFile(codexFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	last := -1
	for i, l := range lines {
		if strings.Contains(l, `"type":"token_usage_record"`) {
			last = i
		}
	}
	ctx := `{"type":"turn_context","payload":{"model":"gpt-mini"}}` + "\n"
	mixed := strings.Join(lines[:last], "") + ctx + strings.Join(lines[last:], "")
	var r usage.Reader
	got, err := r.Read(copyTo(t, []byte(mixed)))
	if err != nil || got.Sum() != codexTotal || got["gpt-mini"] != (usage.Tokens{Input: 50, Output: 20, CacheRead: 50}) {
		t.Errorf("a model changed before the last call: %+v, %v; want its call alone of gpt-mini", got, err)
	}
}

// Codex writes a call's usage record about when the hook before the tool
// it asked for starts; Recorded tells, by the tool call's ID, when the
// call that asked for fleet_reply has its usage read, and the reader then
// counts the turn's calls up to it.
func TestRecordedAfterCodexRecordsTheCall(t *testing.T) {
	data, err := os.ReadFile(codexFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	call, id, shell := -1, "", ""
	for i, l := range lines {
		var v struct {
			Payload struct {
				CallID string `json:"call_id"`
			}
		}
		_ = json.Unmarshal([]byte(l), &v)
		switch {
		case strings.Contains(l, `"name":"exec_command"`):
			shell = v.Payload.CallID
		case strings.Contains(l, `"name":"fleet_reply"`) && call < 0:
			call, id = i, v.Payload.CallID
		}
	}
	if call < 0 || id == "" || shell == "" {
		t.Fatal("no fleet_reply call after a shell command in " + codexFile)
	}
	path := copyTo(t, []byte(strings.Join(lines[:call+1], "")))
	var r usage.Reader
	before, err := sum(&r, path)
	if err != nil || r.Recorded(path, id) {
		t.Fatalf("with the call and not its usage: %+v, %v, recorded %v; want not", before, err, r.Recorded(path, id))
	}
	for i := call + 1; i < len(lines) && !r.Recorded(path, id); i++ {
		appendTo(t, path, []byte(lines[i]))
		if _, err := r.Read(path); err != nil {
			t.Fatal(err)
		}
	}
	if !r.Recorded(path, id) || r.Recorded(path, shell) {
		t.Fatalf("after the call's usage record: recorded fleet_reply's %v, the shell's %v; want true, false", r.Recorded(path, id), r.Recorded(path, shell))
	}
	var again usage.Reader
	upTo, _ := sum(&again, path)
	if want := before.Add(usage.Tokens{Input: 50, Output: 20, CacheRead: 50}); upTo != want {
		t.Errorf("usage up to the reply's call = %+v; want %+v", upTo, want)
	}
}

// A Codex that writes no usage record of its calls (token_count events
// alone) has nothing to wait for.
func TestRecordedWithoutRecords(t *testing.T) {
	data, err := os.ReadFile(codexFile)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(l, `"token_usage_record"`) {
			kept = append(kept, l)
		}
	}
	path := copyTo(t, []byte(strings.Join(kept, "")))
	var r usage.Reader
	if got, err := sum(&r, path); err != nil || got != codexTotal || !r.Recorded(path, "call_unknown") {
		t.Errorf("token_count alone: %+v, %v, recorded %v; want %+v and nothing to wait for", got, err, r.Recorded(path, "call_unknown"), codexTotal)
	}
}

// A call of a tool other than a function (Codex's apply_patch is a
// custom_tool_call) is recorded as well: the hook before it waits for
// nothing more than the call's usage record.
func TestRecordedCustomToolCall(t *testing.T) {
	lines := []string{
		`{"type":"turn_context","payload":{"model":"gpt-5.5"}}`,
		`{"type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch","call_id":"call_patch"}}`,
		`{"type":"token_usage_record","payload":{"thread_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":7}}}`,
		`{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_patch","output":"done"}}`,
	}
	path := copyTo(t, []byte(strings.Join(lines[:2], "\n")+"\n"))
	var r usage.Reader
	if _, err := r.Read(path); err != nil || r.Recorded(path, "call_patch") {
		t.Fatalf("before its record: %v, recorded %v", err, r.Recorded(path, "call_patch"))
	}
	appendTo(t, path, []byte(strings.Join(lines[2:], "\n")+"\n"))
	got, err := r.Read(path)
	if err != nil || !r.Recorded(path, "call_patch") || got["gpt-5.5"] != (usage.Tokens{Input: 60, Output: 7, CacheRead: 40}) {
		t.Fatalf("after its record: %+v, %v, recorded %v", got, err, r.Recorded(path, "call_patch"))
	}
}
