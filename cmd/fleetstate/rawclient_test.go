package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawProc is a fleetstate process spoken to over its standard input and
// output in raw JSON-RPC, one message a line, as an MCP client that
// launches a stdio server does. Unlike an SDK client it can be killed in
// the middle of a call, stop reading, or send anything at all.
type rawProc struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser

	mu      sync.Mutex
	nextID  int
	waiters map[int]chan rpcReply // guarded by mu
	exited  chan struct{}
	stderr  strings.Builder // guarded by mu
}

// rpcReply is a JSON-RPC response, or the error of the process going away.
type rpcReply struct {
	Result *struct {
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	gone bool // the process exited before answering
}

// startRaw starts the fleetstate binary with args and env, initializes an
// MCP session with it, and returns it. The test's cleanup kills it.
func startRaw(t *testing.T, env []string, args ...string) *rawProc {
	t.Helper()
	p := startRawNoInit(t, env, args...)
	r := p.request("initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"},
	})
	if got := p.wait(r, 30*time.Second); got.Result == nil && got.Error == nil {
		t.Fatalf("initialize: no answer; stderr: %s", p.errText())
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

func startRawNoInit(t *testing.T, env []string, args ...string) *rawProc {
	t.Helper()
	return startRawProc(t, env, true, args...)
}

// startRawProc starts the binary; with read false, nothing ever reads its
// standard output, as with a client that is stuck.
func startRawProc(t *testing.T, env []string, read bool, args ...string) *rawProc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &rawProc{t: t, cmd: cmd, in: in, waiters: map[int]chan rpcReply{}, exited: make(chan struct{})}
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.stderr.Len() < 1<<16 {
			p.stderr.Write(b)
		}
		return len(b), nil
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill(syscall.SIGKILL) })
	if read {
		go p.read(out)
	}
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *rawProc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var msg struct {
			ID *int `json:"id"`
			rpcReply
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil {
			continue // a notification, or a reply without an id
		}
		p.mu.Lock()
		ch := p.waiters[*msg.ID]
		delete(p.waiters, *msg.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- msg.rpcReply
		}
	}
	p.mu.Lock()
	for id, ch := range p.waiters {
		ch <- rpcReply{gone: true}
		delete(p.waiters, id)
	}
	p.mu.Unlock()
	close(p.exited)
}

func (p *rawProc) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// send writes one line. Errors are the process's going away, which the
// waiters see.
func (p *rawProc) send(line string) { _, _ = io.WriteString(p.in, line+"\n") }

// request sends a request and returns the channel of its reply.
func (p *rawProc) request(method string, params any) <-chan rpcReply {
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	ch := make(chan rpcReply, 1)
	p.waiters[id] = ch
	p.mu.Unlock()
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(string(data))
	return ch
}

// call calls a tool; the reply arrives on the channel.
func (p *rawProc) call(tool string, args map[string]any) <-chan rpcReply {
	return p.request("tools/call", map[string]any{"name": tool, "arguments": args})
}

func (p *rawProc) wait(ch <-chan rpcReply, d time.Duration) rpcReply {
	p.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		p.t.Fatalf("no reply within %v; stderr: %s", d, p.errText())
		return rpcReply{}
	}
}

// ok waits for a successful tool result and returns its structured content.
func (p *rawProc) ok(ch <-chan rpcReply) map[string]any {
	p.t.Helper()
	r := p.wait(ch, 30*time.Second)
	if r.Result == nil || r.Result.IsError {
		p.t.Fatalf("tool call failed: %+v %+v; stderr: %s", r.Result, r.Error, p.errText())
	}
	return r.Result.StructuredContent
}

// kill signals the process and waits for it to exit.
func (p *rawProc) kill(sig syscall.Signal) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Wait()
}

// closeInput ends the process's standard input, as a client that exits
// does, and waits for it to exit.
func (p *rawProc) closeInput(d time.Duration) error {
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		p.kill(syscall.SIGKILL)
		return fmt.Errorf("the process did not exit within %v of its input closing", d)
	}
}

// tryCall calls a tool and reports a failure of the call itself (the
// daemon gone) as an error rather than failing the test: the fault tests
// expect calls to break.
func tryCall(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, false, err
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, false, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, false, err
	}
	return out, res.IsError, nil
}

// connectQuiet is connectHTTP for a daemon that may die: it reports a
// failure to connect rather than failing the test.
func connectQuiet(url, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "faults", Version: "1"}, nil)
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: fleettest.BearerClient(token), MaxRetries: -1,
	}, nil)
}
