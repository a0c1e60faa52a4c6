package mcpadapter_test

// Benchmarks of the stdio request path: put then get of one file, through
// [mcpadapter.Adapter.ServeStdio]. The client writes raw request lines and
// reads raw response lines, so that its own cost stays small. They run
// only with -bench; see BENCHMARKS.md.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// stdioServe serves srv over in and out until in ends.
type stdioServe func(ctx context.Context, a *mcpadapter.Adapter, srv *server.MCPServer, in io.Reader, out io.Writer) error

// serveAnon is ServeStdio as the anonymous caller.
func serveAnon(ctx context.Context, a *mcpadapter.Adapter, srv *server.MCPServer, in io.Reader, out io.Writer) error {
	return a.ServeStdio(ctx, srv, mcpadapter.Identity{}, in, out, nil)
}

// lineClient is a JSON-RPC client of raw lines: requests are written whole,
// responses are matched to their callers by id.
type lineClient struct {
	w    io.Writer
	wmu  sync.Mutex
	mu   sync.Mutex
	next int
	wait map[string]chan []byte // by the id's JSON text
	done chan struct{}
}

func newLineClient(w io.Writer, r io.Reader) *lineClient {
	c := &lineClient{w: w, wait: map[string]chan []byte{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		br := bufio.NewReaderSize(r, 1<<16)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var env struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(line, &env) != nil || len(env.ID) == 0 {
				continue // a notification
			}
			c.mu.Lock()
			ch := c.wait[string(env.ID)]
			delete(c.wait, string(env.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- line
			}
		}
	}()
	return c
}

// call sends method with params (raw JSON) and returns the response line.
func (c *lineClient) call(method, params string) ([]byte, error) {
	return c.callLine(func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + "}\n"
	})
}

// callLine sends the request line that line makes for the next id and
// returns the response line.
func (c *lineClient) callLine(line func(id string) string) ([]byte, error) {
	c.mu.Lock()
	c.next++
	id := strconv.Itoa(c.next)
	ch := make(chan []byte, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	if err := c.send(line(id)); err != nil {
		return nil, err
	}
	select {
	case line := <-ch:
		return line, nil
	case <-c.done:
		return nil, io.ErrUnexpectedEOF
	}
}

func (c *lineClient) send(line string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := io.WriteString(c.w, line)
	return err
}

// startStdio serves a fresh adapter (store on a MemMapFs, no rendezvous)
// with serve, as the anonymous caller, and returns an initialized client
// in a new session; the benchmark's cleanup ends it.
func startStdio(tb testing.TB, serve stdioServe) *lineClient {
	tb.Helper()
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		tb.Fatal(err)
	}
	return startStdioOn(tb, st, serve)
}

// startStdioOn is startStdio on the store st.
func startStdioOn(tb testing.TB, st *fleetstate.Store, serve stdioServe) *lineClient {
	tb.Helper()
	a := mcpadapter.New(st, nil, nil)
	srv := a.NewServer("fleetstate", "bench")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(context.Background(), a, srv, inR, outW)
		outW.Close()
	}()
	c := newLineClient(inW, outR)
	tb.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil && err != io.EOF {
			tb.Error(err)
		}
		<-c.done
	})
	if _, err := c.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}`); err != nil {
		tb.Fatal(err)
	}
	if err := c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.call("tools/call", `{"name":"new_session","arguments":{"name":"bench"}}`); err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkStdio measures a put then a get of one file over stdio, one op
// per pair, with inflight clients calling at once (each its own file).
func BenchmarkStdio(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		for _, inflight := range []int{1, 8} {
			b.Run(fmt.Sprintf("size=%dKiB/inflight=%d", size>>10, inflight), func(b *testing.B) {
				c := startStdio(b, serveAnon)
				content := strings.Repeat("x", size)
				b.SetBytes(int64(2 * size))
				runWorkers(b, inflight, func(w, n int) error {
					return putGet(c, fmt.Sprintf("f%d.txt", w), content, n)
				})
			})
		}
	}
}

// runWorkers runs work in inflight goroutines, worker w doing n of the
// b.N operations, with the timer running only meanwhile; an error fails
// the benchmark.
func runWorkers(b *testing.B, inflight int, work func(w, n int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, inflight)
	b.ResetTimer()
	for w := range inflight {
		n := b.N / inflight
		if w == 0 {
			n += b.N % inflight
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(w, n); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// putGet puts content under name and gets it back n times.
func putGet(c *lineClient, name, content string, n int) error {
	for range n {
		line, err := c.call("tools/call", `{"name":"put","arguments":{"agent_name":"bench","file_name":"`+name+`","content":"`+content+`","overwrite":true}}`)
		if err != nil {
			return err
		}
		var put struct {
			Result struct {
				IsError           bool `json:"isError"`
				StructuredContent struct {
					ID string `json:"id"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &put); err != nil || put.Result.IsError || put.Result.StructuredContent.ID == "" {
			return fmt.Errorf("put: %v: %.200s", err, line)
		}
		line, err = c.call("tools/call", `{"name":"get","arguments":{"id":"`+put.Result.StructuredContent.ID+`"}}`)
		if err != nil {
			return err
		}
		if len(line) < 2*len(content) || strings.Contains(string(line[:min(len(line), 200)]), `"isError":true`) {
			return fmt.Errorf("get: %.200s", line)
		}
	}
	return nil
}
