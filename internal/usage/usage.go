// Package usage reads what a coding agent's model calls cost, in tokens,
// from the agent's own transcript: Claude Code's session file (the usage
// of each assistant message) and Codex's rollout file (its token_count
// events). Both CLIs name that file to their hooks as transcript_path, so
// the fleet learns each member's usage without a proxy in front of the
// model.
//
// A [Reader] follows transcripts as they grow: each Read returns what was
// added to a file since the last Read of it, and a file read twice, or
// whose lines repeat a message, is counted once.
package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

// Tokens counts the tokens of model calls. Input is the input not read
// from the cache: as the Messages API counts it (Claude Code), and for
// Codex, whose Responses API counts cached input in the input, the input
// less CacheRead. CacheWrite is zero for Codex unless it reports one.
type Tokens struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_tokens,omitempty"`
	CacheWrite int64 `json:"cache_write_tokens,omitempty"`
}

// Add returns t plus u.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{t.Input + u.Input, t.Output + u.Output, t.CacheRead + u.CacheRead, t.CacheWrite + u.CacheWrite}
}

// Sub returns t minus u.
func (t Tokens) Sub(u Tokens) Tokens {
	return Tokens{t.Input - u.Input, t.Output - u.Output, t.CacheRead - u.CacheRead, t.CacheWrite - u.CacheWrite}
}

// Max returns the higher of t and u, field by field.
func (t Tokens) Max(u Tokens) Tokens {
	return Tokens{max(t.Input, u.Input), max(t.Output, u.Output), max(t.CacheRead, u.CacheRead), max(t.CacheWrite, u.CacheWrite)}
}

// IsZero reports whether t counts nothing.
func (t Tokens) IsZero() bool { return t == Tokens{} }

// ByModel is usage by the model the calls went to; "" for calls whose
// model is not known.
type ByModel map[string]Tokens

// Sum returns the usage of every model.
func (m ByModel) Sum() Tokens {
	var sum Tokens
	for _, t := range m {
		sum = sum.Add(t)
	}
	return sum
}

// Add adds u to m, model by model.
func (m ByModel) Add(u ByModel) {
	for model, t := range u {
		m[model] = m[model].Add(t)
	}
}

// MaxModel bounds a model's name, in bytes; a transcript's longer name
// is cut to it.
const MaxModel = 256

// MaxLine bounds a transcript line the reader decodes; a longer line (a
// file's content pasted into a prompt, say) carries no usage of a kind
// it reads, and is skipped.
const MaxLine = 4 << 20

// ErrNotTranscript is the error of a path that is not a regular file.
var ErrNotTranscript = errors.New("usage: not a transcript file")

// Reader follows transcript files. The zero Reader is ready; it is safe
// for concurrent use.
type Reader struct {
	mu    sync.Mutex
	files map[string]*file
}

// file is what a Reader knows of one transcript.
type file struct {
	offset int64           // of the first byte not read yet: the start of a line
	seen   map[string]bool // Claude Code's message IDs counted
	total  Tokens          // Codex's running total, as its last record said
	model  string          // Codex's model, as its last turn context said
	// Codex's tool calls, by call ID: those asked for since the last
	// usage record, and those of the model call that record counted.
	pending, settled []string
	records          bool // a token_usage_record was read: Codex writes them
	counts           bool // a token_count was read
}

// Read returns the tokens, by model, the transcript at path records
// beyond what earlier Reads of it returned. A line not yet ended is left
// for the next Read. A file that shrank was written anew: it is read
// again from its start, and what it repeats is not counted twice.
func (r *Reader) Read(path string) (ByModel, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files == nil {
		r.files = map[string]*file{}
	}
	f := r.files[path]
	if f == nil {
		f = &file{seen: map[string]bool{}}
		r.files[path] = f
	}
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s", ErrNotTranscript, path)
	}
	if fi.Size() < f.offset {
		f.offset = 0
	}
	if _, err := fd.Seek(f.offset, io.SeekStart); err != nil {
		return nil, err
	}
	return f.read(fd)
}

// Recorded reports whether Read has read the usage of the model call
// that asked for tool call callID, the last it read, in the Codex
// transcript at path. Codex writes a call's usage record (as the call
// ends) about when the hook before its tool starts. It also reports true
// for a transcript with token_count events and no usage record, of a
// Codex that writes none: there is nothing to wait for.
func (r *Reader) Recorded(path, callID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.files[path]
	return f != nil && (f.counts && !f.records || len(f.pending) == 0 && slices.Contains(f.settled, callID))
}

// read reads whole lines from rd, counting their usage, and advances the
// offset past them.
func (f *file) read(rd io.Reader) (ByModel, error) {
	sum := ByModel{}
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 64<<10)
	skipping := false // within a line longer than MaxLine
	for {
		n, err := rd.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			if !skipping {
				if model, t := f.line(buf[:i]); !t.IsZero() {
					sum[model] = sum[model].Add(t)
				}
			}
			skipping = false
			f.offset += int64(i + 1)
			buf = buf[i+1:]
		}
		if len(buf) > MaxLine {
			f.offset += int64(len(buf))
			buf, skipping = buf[:0], true
		}
		if err == io.EOF {
			return sum, nil
		}
		if err != nil {
			return sum, err
		}
	}
}

// codexTotal is a running total of Codex's usage records.
type codexTotal struct {
	Input      int64 `json:"input_tokens"`
	Cached     int64 `json:"cached_input_tokens"`
	CacheWrite int64 `json:"cache_write_input_tokens"`
	Output     int64 `json:"output_tokens"`
}

// line returns the usage one transcript line adds, and the model it
// went to.
func (f *file) line(b []byte) (model string, t Tokens) {
	var l struct {
		Type    string `json:"type"`
		Message *struct {
			ID    string `json:"id"`
			Model string `json:"model"`
			Usage *struct {
				Input      int64 `json:"input_tokens"`
				Output     int64 `json:"output_tokens"`
				CacheRead  int64 `json:"cache_read_input_tokens"`
				CacheWrite int64 `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		} `json:"message"`
		Payload *struct {
			Type   string `json:"type"`
			Model  string `json:"model"`
			CallID string `json:"call_id"`
			Info   *struct {
				Total *codexTotal `json:"total_token_usage"`
			} `json:"info"`
			Thread *codexTotal `json:"thread_token_usage"`
		} `json:"payload"`
	}
	// Most lines are none of the kinds read: a usage, a turn's context, a
	// tool call.
	if !bytes.Contains(b, []byte(`usage"`)) && !bytes.Contains(b, []byte(`"turn_context"`)) && !bytes.Contains(b, []byte(`_call"`)) ||
		json.Unmarshal(b, &l) != nil {
		return "", Tokens{}
	}
	p := l.Payload
	switch {
	case l.Type == "assistant" && l.Message != nil && l.Message.Usage != nil:
		// Claude Code writes a message with several blocks as several
		// lines, each with the message's usage.
		m := l.Message
		if m.ID == "" || f.seen[m.ID] {
			return "", Tokens{}
		}
		u := m.Usage
		if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 {
			return "", Tokens{}
		}
		f.seen[m.ID] = true
		return cut(m.Model), Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
	case p == nil:
	case l.Type == "turn_context":
		f.model = cut(p.Model)
	case l.Type == "response_item" && strings.HasSuffix(p.Type, "_call") && p.CallID != "":
		// A tool call of any kind: function_call, custom_tool_call
		// (apply_patch), local_shell_call.
		f.pending = append(f.pending, p.CallID)
	case l.Type == "token_usage_record" && p.Thread != nil:
		f.settled, f.pending, f.records = f.pending, nil, true // the record of one model call
		return f.codex(*p.Thread)
	case l.Type == "event_msg" && p.Type == "token_count" && p.Info != nil && p.Info.Total != nil:
		f.counts = true
		return f.codex(*p.Info.Total)
	}
	return "", Tokens{}
}

// codex takes a running total of Codex's, which its token_usage_record
// (written as a model call ends, before the tools it asked for run) and
// token_count (written after them) both report: what it adds is the step
// from the last one, and a total seen already adds nothing.
func (f *file) codex(c codexTotal) (model string, t Tokens) {
	total := Tokens{Input: max(c.Input-c.Cached, 0), Output: c.Output, CacheRead: c.Cached, CacheWrite: c.CacheWrite}
	d := total.Sub(f.total)
	if d.Input < 0 || d.Output < 0 || d.CacheRead < 0 || d.CacheWrite < 0 {
		return "", Tokens{} // an earlier total, read again
	}
	f.total = total
	return f.model, d
}

// cut bounds a model's name to MaxModel bytes.
func cut(model string) string {
	if len(model) > MaxModel {
		return model[:MaxModel]
	}
	return model
}
