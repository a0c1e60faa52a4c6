package mcpadapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// StdioOptions configure [Adapter.ServeStdio]. A nil *StdioOptions means
// the defaults.
type StdioOptions struct {
	// ErrorLog receives the transport's errors. Nil means standard error,
	// as mcp-go's stdio server logs.
	ErrorLog *log.Logger
}

// The tool calls in flight over one stdio connection. ServeStdio serves
// up to stdioDirect of them itself; past that they go to mcp-go's stdio
// server, which runs each on one of stdioWorkers goroutines and queues up
// to stdioQueue more. Calls that block (a member's fleet_next, a lead's
// fleet_send) thus never stop the reader.
const (
	stdioDirect  = 64
	stdioWorkers = 100
	stdioQueue   = 1000
)

// ServeStdio serves srv, a server from [Adapter.NewServer], over in and out
// (one JSON-RPC message a line) until in ends or ctx is done, with id as
// the caller of every tool.
//
// A plain tools/call of one of the adapter's tools (no _meta but a
// progress token, nothing mcp-go's request type does not have) is decoded
// once, with encoding/json into mcp-go's own types, run on its own
// goroutine with its own context, which a notifications/cancelled for its
// id cancels, and answered with mcp-go's response type encoded once: the
// bytes mcp-go writes for it. Everything else goes to mcp-go's stdio
// server unchanged, which answers it as it always does (and decodes a
// call's line about ten times over). Responses are written whole under
// one lock; those of calls
// in flight together may come in any order, each with its request's id.
// When in ends, the calls in flight are cancelled, and ServeStdio returns
// once their responses are written.
func (a *Adapter) ServeStdio(ctx context.Context, srv *server.MCPServer, id Identity, in io.Reader, out io.Writer, opts *StdioOptions) error {
	var o StdioOptions
	if opts != nil {
		o = *opts
	}
	if o.ErrorLog == nil {
		o.ErrorLog = log.Default()
	}
	c := &stdioConn{a: a, srv: srv, out: &lockedWriter{w: out}, log: o.ErrorLog,
		slots: make(chan struct{}, stdioDirect)}

	// mcp-go's server reads what ServeStdio does not serve from a pipe.
	pr, pw := io.Pipe()
	base := make(chan context.Context, 1)
	s := server.NewStdioServer(srv)
	server.WithErrorLogger(o.ErrorLog)(s)
	server.WithWorkerPoolSize(stdioWorkers)(s)
	server.WithQueueSize(stdioQueue)(s)
	server.WithStdioContextFunc(func(ctx context.Context) context.Context {
		// The context of every request: the session and the caller.
		ctx = ContextWithIdentity(ctx, id)
		base <- ctx
		return ctx
	})(s)
	listened := make(chan error, 1)
	go func() {
		err := s.Listen(ctx, pr, c.out)
		pr.CloseWithError(errStdioEnded) // the reader's writes to mcp-go fail from now on
		listened <- err
	}()
	select {
	case c.base = <-base:
	case err := <-listened:
		return stdioErr(err)
	}
	var cancel context.CancelFunc
	c.base, cancel = context.WithCancel(c.base)
	defer cancel()

	read := make(chan error, 1)
	go func() { read <- c.read(in, pw) }()
	var err error
	select {
	case err = <-read:
		pw.Close() // mcp-go reads to the end, then stops
		err = errors.Join(err, <-listened)
	case err = <-listened:
		// ctx is done (or mcp-go failed): the reader may be blocked on in
		// for ever, as mcp-go's own is; it starts nothing more.
	}
	// As mcp-go does with its own calls when the input ends: cancel the
	// calls in flight, and wait for their responses to be written.
	c.calls.close()
	cancel()
	c.calls.wait()
	return stdioErr(err)
}

var errStdioEnded = errors.New("mcpadapter: stdio server ended")

// stdioErr is what ServeStdio returns for err: nil when the input ended
// or ctx was done.
func stdioErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, errStdioEnded) {
		return nil
	}
	return err
}

// stdioConn is one stdio connection of ServeStdio.
type stdioConn struct {
	a     *Adapter
	srv   *server.MCPServer
	out   *lockedWriter
	log   *log.Logger
	base  context.Context // the session's and the caller's, set before read starts
	slots chan struct{}   // one token per call ServeStdio serves itself
	calls directCalls
}

// read reads in line by line, serving the calls it takes and passing every
// other line to mcp-go through pw, until in ends.
func (c *stdioConn) read(in io.Reader, pw *io.PipeWriter) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		// A last line without its newline is passed on as it is: mcp-go
		// drops it.
		if len(line) > 0 && !(line[len(line)-1] == '\n' && c.serve(line)) {
			if bytes.Contains(line, []byte(`"notifications/cancelled"`)) {
				c.cancel(line)
			}
			if _, werr := pw.Write(line); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// serve starts line, if it is a call ServeStdio takes (see
// [Adapter.parseCall]) and a slot is free, and reports whether it did.
func (c *stdioConn) serve(line []byte) bool {
	if !bytes.Contains(line, []byte(`"tools/call"`)) {
		return false
	}
	call, ok := c.a.parseCall(line, c.srv)
	if !ok {
		return false
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return false // mcp-go's queue takes it
	}
	ctx, cancel := context.WithCancel(c.base)
	done, ok := c.calls.start(call.id, cancel)
	if !ok {
		cancel()
		<-c.slots
		return false
	}
	go func() {
		defer done()
		defer func() { <-c.slots }()
		if _, err := c.out.Write(c.a.respond(ctx, c.srv, call)); err != nil {
			c.log.Printf("Error writing tool response: %v", err)
		}
	}()
	return true
}

// cancel cancels the call a notifications/cancelled line names, if
// ServeStdio serves it; the line goes on to mcp-go all the same, for the
// calls it serves.
func (c *stdioConn) cancel(line []byte) {
	var n struct {
		Method string `json:"method"`
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) == nil && n.Method == string(mcp.MethodNotificationCancelled) {
		c.calls.cancel(n.Params.RequestID)
	}
}

// stdioCall is a tools/call that ServeStdio serves itself.
type stdioCall struct {
	id   any // a float64 or a string, as mcp-go decodes it
	tool *tool
	req  mcp.CallToolRequest
}

// parseCall decodes line as a tools/call of one of a's tools that srv
// has, and reports whether it is one whose answer mcp-go would make from
// the request alone: a JSON-RPC 2.0 request whose id is a number or a
// string, with params of a name, arguments and a _meta holding at most a
// progress token. Anything else, malformed or with members those types do
// not have (a task, protocol metadata, a trailing value), is not taken, so
// that mcp-go answers it. The line is decoded as mcp-go decodes it, with
// encoding/json, into the same types; only once.
func (a *Adapter) parseCall(line []byte, srv *server.MCPServer) (stdioCall, bool) {
	var m struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Method  string `json:"method"`
		Params  struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      *mcp.Meta       `json:"_meta"`
		} `json:"params"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if dec.Decode(&m) != nil || !jsonSpace(line[dec.InputOffset():]) ||
		m.JSONRPC != mcp.JSONRPC_VERSION || m.Method != string(mcp.MethodToolsCall) {
		return stdioCall{}, false
	}
	switch m.ID.(type) {
	case float64, string:
	default:
		return stdioCall{}, false
	}
	if meta := m.Params.Meta; meta != nil && len(meta.AdditionalFields) > 0 {
		return stdioCall{}, false
	}
	t := a.tool(m.Params.Name)
	if t == nil || srv.GetTool(t.name) == nil {
		return stdioCall{}, false
	}
	call := stdioCall{id: m.ID, tool: t}
	call.req.Method = string(mcp.MethodToolsCall)
	call.req.Params.Name = m.Params.Name
	call.req.Params.Meta = m.Params.Meta
	if raw := m.Params.Arguments; len(raw) > 0 {
		// As mcp.CallToolParams decodes them.
		if json.Unmarshal(raw, &call.req.Params.Arguments) != nil {
			return stdioCall{}, false
		}
		call.req.Params.RawArguments = raw
	}
	return call, true
}

// jsonSpace reports whether b is JSON white space only.
func jsonSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// tool returns a's tool of that name, or nil.
func (a *Adapter) tool(name string) *tool {
	for i := range a.tools {
		if a.tools[i].name == name {
			return &a.tools[i]
		}
	}
	return nil
}

// respond runs call and returns its response line as mcp-go's stdio server
// writes it: its response type, encoded once, and a newline. A panic of
// the tool is answered as mcp-go's WithRecovery answers it.
func (a *Adapter) respond(ctx context.Context, srv *server.MCPServer, call stdioCall) []byte {
	id := mcp.NewRequestId(call.id)
	var msg mcp.JSONRPCMessage
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg = mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR,
					fmt.Sprintf("panic recovered in %s tool handler: %v", call.tool.name, r), nil)}
			}
		}()
		a.direct.Add(1)
		msg = mcp.NewJSONRPCResultResponse(id, a.callTool(ctx, call.tool, call.req, srv))
	}()
	data, err := json.Marshal(msg)
	if err != nil {
		// What mcp-go's stdio server does with a response it cannot
		// encode: it logs the error and writes nothing; a result of the
		// adapter's always encodes.
		data, _ = json.Marshal(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: id,
			Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, "mcpadapter: encode response: "+err.Error(), nil)})
	}
	return append(data, '\n')
}

// directCalls are the calls in flight that ServeStdio serves itself, by
// their request's id, so that a notifications/cancelled can cancel one.
// The zero value is ready; it is safe for concurrent use.
type directCalls struct {
	mu     sync.Mutex
	closed bool                        // guarded by mu; no call starts once set
	calls  map[any]*context.CancelFunc // guarded by mu
	wg     sync.WaitGroup              // the calls; Add under mu while !closed
}

// start counts a call under key, which cancel cancels, unless the calls
// are closed; the call then runs done when it ends.
func (f *directCalls) start(key any, cancel context.CancelFunc) (done func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, false
	}
	if f.calls == nil {
		f.calls = map[any]*context.CancelFunc{}
	}
	entry := &cancel
	f.calls[key] = entry
	f.wg.Add(1)
	return func() {
		f.mu.Lock()
		// A later call may have reused the key.
		if f.calls[key] == entry {
			delete(f.calls, key)
		}
		f.mu.Unlock()
		cancel()
		f.wg.Done()
	}, true
}

// cancel cancels the call under key, if there is one. key is a request
// id as encoding/json decodes it: only a float64 or a string can match.
func (f *directCalls) cancel(key any) {
	switch key.(type) {
	case float64, string:
	default:
		return // not comparable, perhaps
	}
	f.mu.Lock()
	cancel := f.calls[key]
	delete(f.calls, key)
	f.mu.Unlock()
	if cancel != nil {
		(*cancel)()
	}
}

// close stops new calls and cancels those in flight; wait then waits for
// them to end.
func (f *directCalls) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cancel := range f.calls {
		(*cancel)()
	}
}

func (f *directCalls) wait() { f.wg.Wait() }

// lockedWriter writes each Write whole, under its lock: mcp-go writes a
// message in one Write, and so does ServeStdio.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
