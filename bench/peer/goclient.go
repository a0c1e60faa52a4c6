package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const goSDKPath = "github.com/modelcontextprotocol/go-sdk"

// goSDKVersion is the version of the Go SDK this program was built with.
func goSDKVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == goSDKPath {
				return d.Version
			}
		}
	}
	return "(version unknown)"
}

// goRunner drives one server with the MCP Go SDK's client.
type goRunner struct {
	spec serverSpec
	cs   *mcp.ClientSession
	seq  int // operations started so far, for [content]
}

func startGo(ctx context.Context, s serverSpec) (runner, error) {
	cmd := exec.Command(s.cmd[0], s.cmd[1:]...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "fleetstate-peer-bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	if s.session {
		if _, err := callText(ctx, cs, "new_session", map[string]any{"name": "bench"}); err != nil {
			cs.Close()
			return nil, err
		}
	}
	return &goRunner{spec: s, cs: cs}, nil
}

func (g *goRunner) Close() error { return g.cs.Close() }

// measure runs write-then-read with inflight workers for d, after one
// uncounted operation per worker.
func (g *goRunner) measure(ctx context.Context, size, inflight int, overwrite bool, d time.Duration) (result, error) {
	for w := range inflight {
		if _, _, err := g.writeRead(ctx, fileName(w, g.seq, overwrite), content(size, w, g.seq), overwrite); err != nil {
			return result{}, err
		}
		g.seq++
	}
	type tally struct {
		ops         int
		write, read []float64
		err         error
	}
	tallies := make([]tally, inflight)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	base := g.seq
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &tallies[w]
			for n := 0; time.Now().Before(deadline); n++ {
				// Worker w's seq-th operation: distinct across workers
				// and measurements.
				wr, rd, err := g.writeRead(ctx, fileName(w, base+n, overwrite), content(size, w, base+n), overwrite)
				if err != nil {
					t.err = err
					return
				}
				t.ops++
				t.write = append(t.write, wr)
				t.read = append(t.read, rd)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var ops int
	var write, read []float64
	for _, t := range tallies {
		if t.err != nil {
			return result{}, t.err
		}
		ops += t.ops
		g.seq = max(g.seq, base+t.ops)
		write = append(write, t.write...)
		read = append(read, t.read...)
	}
	return result{OpsPerSec: float64(ops) / elapsed.Seconds(), Write: quantiles(write), Read: quantiles(read)}, nil
}

// writeRead writes data as the file name, reads it back and checks it; it
// returns each call's latency in milliseconds.
func (g *goRunner) writeRead(ctx context.Context, name, data string, overwrite bool) (write, read float64, err error) {
	ms := func(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
	var got string
	t := time.Now()
	if g.spec.peerTools {
		path := filepath.Join(g.spec.dir, name)
		if _, err := callText(ctx, g.cs, "write_file", map[string]any{"path": path, "content": data}); err != nil {
			return 0, 0, err
		}
		write, t = ms(t), time.Now()
		if got, err = callText(ctx, g.cs, "read_text_file", map[string]any{"path": path}); err != nil {
			return 0, 0, err
		}
	} else {
		text, err := callText(ctx, g.cs, "put", map[string]any{
			"agent_name": "bench", "file_name": name, "content": data, "overwrite": overwrite})
		if err != nil {
			return 0, 0, err
		}
		id, err := jsonField(text, "id")
		if err != nil {
			return 0, 0, err
		}
		write, t = ms(t), time.Now()
		if text, err = callText(ctx, g.cs, "get", map[string]any{"id": id}); err != nil {
			return 0, 0, err
		}
		if got, err = jsonField(text, "content"); err != nil {
			return 0, 0, err
		}
	}
	read = ms(t)
	if got != data {
		return 0, 0, fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(data))
	}
	return write, read, nil
}

// callText calls a tool and returns the text of its first content.
func callText(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if len(res.Content) == 0 {
		return "", fmt.Errorf("%s: no content", name)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("%s: content is %T, not text", name, res.Content[0])
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %s", name, text.Text)
	}
	return text.Text, nil
}

func jsonField(text, key string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return "", err
	}
	v, ok := m[key].(string)
	if !ok {
		return "", fmt.Errorf("result %.100q has no string %q", text, key)
	}
	return v, nil
}

// quantiles returns the median and the 99th percentile of ms.
func quantiles(ms []float64) latency {
	if len(ms) == 0 {
		return latency{}
	}
	slices.Sort(ms)
	q := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	return latency{P50Ms: q(0.5), P99Ms: q(0.99)}
}
