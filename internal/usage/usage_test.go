package usage_test

import (
	"bytes"
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
	// the input.
	codexTotal = usage.Tokens{Input: 400, Output: 80, CacheRead: 200}
)

func TestReadRealTranscripts(t *testing.T) {
	for _, c := range []struct {
		file string
		want usage.Tokens
	}{{claudeFile, claudeTotal}, {codexFile, codexTotal}} {
		var r usage.Reader
		got, err := r.Read(c.file)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.file, got, err, c.want)
		}
		if again, err := r.Read(c.file); err != nil || !again.IsZero() {
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
			var sum usage.Tokens
			at := 0
			for _, cut := range append(cuts, len(data)) {
				if cut < at {
					continue
				}
				appendTo(t, path, data[at:cut])
				at = cut
				got, err := r.Read(path)
				if err != nil {
					rt.Fatal(err)
				}
				sum = sum.Add(got)
			}
			if sum != c.want {
				rt.Fatalf("%s in pieces %v: %+v; want %+v", c.file, cuts, sum, c.want)
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
	if got, err := r.Read(copyTo(t, dup)); err != nil || got != claudeTotal {
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
		if got, _ := r.Read(path); got != c.want {
			t.Fatalf("%s: %+v; want %+v", c.file, got, c.want)
		}
		// The same transcript without its first line: shorter, nothing new.
		if err := os.WriteFile(path, bytes.Join(lines[1:], nil), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Read(path); err != nil || !got.IsZero() {
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
	if got, err := r.Read(copyTo(t, append([]byte(long), data...))); err != nil || got != claudeTotal {
		t.Errorf("after a long line: %+v, %v; want %+v", got, err, claudeTotal)
	}
}

func TestReadRefusesWhatIsNoFile(t *testing.T) {
	var r usage.Reader
	if _, err := r.Read(t.TempDir()); !errors.Is(err, usage.ErrNotTranscript) {
		t.Errorf("a folder: %v; want ErrNotTranscript", err)
	}
	if _, err := r.Read(filepath.Join(t.TempDir(), "none.jsonl")); !errors.Is(err, os.ErrNotExist) {
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
		got, err := r.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if got.Input < 0 || got.Output < 0 || got.CacheRead < 0 || got.CacheWrite < 0 {
			t.Errorf("negative usage %+v", got)
		}
		if again, err := r.Read(path); err != nil || !again.IsZero() {
			t.Errorf("read again: %+v, %v", again, err)
		}
	})
}
