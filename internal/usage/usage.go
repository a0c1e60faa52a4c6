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
	"sync"
)

// Tokens counts the tokens of model calls. For Claude Code, Input is the
// input not read from or written to the cache, as the Messages API counts
// it; for Codex, Input is the whole input, cached part included, as the
// Responses API counts it, and CacheWrite is zero unless it reports one.
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
	total  Tokens          // Codex's running total, as its last token_count said
}

// Read returns the tokens the transcript at path records beyond what
// earlier Reads of it returned. A line not yet ended is left for the next
// Read. A file that shrank was written anew: it is read again from its
// start, and what it repeats is not counted twice.
func (r *Reader) Read(path string) (Tokens, error) {
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
		return Tokens{}, err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return Tokens{}, err
	}
	if !fi.Mode().IsRegular() {
		return Tokens{}, fmt.Errorf("%w: %s", ErrNotTranscript, path)
	}
	if fi.Size() < f.offset {
		f.offset = 0
	}
	if _, err := fd.Seek(f.offset, io.SeekStart); err != nil {
		return Tokens{}, err
	}
	return f.read(fd)
}

// read reads whole lines from rd, counting their usage, and advances the
// offset past them.
func (f *file) read(rd io.Reader) (Tokens, error) {
	var sum Tokens
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
				sum = sum.Add(f.line(buf[:i]))
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

// line returns the usage one transcript line adds.
func (f *file) line(b []byte) Tokens {
	var l struct {
		Type    string `json:"type"`
		Message *struct {
			ID    string `json:"id"`
			Usage *struct {
				Input      int64 `json:"input_tokens"`
				Output     int64 `json:"output_tokens"`
				CacheRead  int64 `json:"cache_read_input_tokens"`
				CacheWrite int64 `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		} `json:"message"`
		Payload *struct {
			Type string `json:"type"`
			Info *struct {
				Total *struct {
					Input      int64 `json:"input_tokens"`
					Cached     int64 `json:"cached_input_tokens"`
					CacheWrite int64 `json:"cache_write_input_tokens"`
					Output     int64 `json:"output_tokens"`
				} `json:"total_token_usage"`
			} `json:"info"`
		} `json:"payload"`
	}
	if !bytes.Contains(b, []byte(`usage"`)) || json.Unmarshal(b, &l) != nil {
		return Tokens{} // both kinds name a usage: most lines are not read
	}
	switch {
	case l.Type == "assistant" && l.Message != nil && l.Message.Usage != nil:
		// Claude Code writes a message with several blocks as several
		// lines, each with the message's usage.
		m := l.Message
		if m.ID == "" || f.seen[m.ID] {
			return Tokens{}
		}
		u := m.Usage
		if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 {
			return Tokens{}
		}
		f.seen[m.ID] = true
		return Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
	case l.Type == "event_msg" && l.Payload != nil && l.Payload.Type == "token_count" && l.Payload.Info != nil && l.Payload.Info.Total != nil:
		// Codex reports a running total: what it adds is the step from
		// the last one, and a total seen already adds nothing.
		t := l.Payload.Info.Total
		total := Tokens{Input: t.Input, Output: t.Output, CacheRead: t.Cached, CacheWrite: t.CacheWrite}
		d := total.Sub(f.total)
		if d.Input < 0 || d.Output < 0 || d.CacheRead < 0 || d.CacheWrite < 0 {
			return Tokens{} // an earlier total, read again
		}
		f.total = total
		return d
	}
	return Tokens{}
}
