package mcpadapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"slices"
	"sync"

	"github.com/fleetstate/fleetstate/internal/mcpwire"
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
// up to stdioDirect of them on its fast path; past that they go to mcp-go's stdio
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
// It reads each line once to see what it is. A tools/call of one of the
// adapter's tools that srv has, whose request and arguments it understands
// completely (see internal/mcpwire), is served on the fast path: the line is
// decoded once, straight into the tool's typed arguments; the call runs on
// its own goroutine with its own context, which a notifications/cancelled
// for its id cancels; and its result is encoded once into a reused
// buffer, in the bytes mcp-go writes for it. Everything else
// (initialize, lists, ping, notifications, responses to the server's
// requests, and any call it does not understand: malformed, an unknown
// tool, arguments the tool refuses, metadata but a progress token) goes to
// mcp-go's stdio server unchanged, which answers it as it always does.
// Responses are written whole under one lock; those of calls in flight
// together may come in any order, each with its request's id. When in
// ends, the calls in flight are cancelled, and ServeStdio returns once
// their responses are written.
func (a *Adapter) ServeStdio(ctx context.Context, srv *server.MCPServer, id Identity, in io.Reader, out io.Writer, opts *StdioOptions) error {
	var o StdioOptions
	if opts != nil {
		o = *opts
	}
	if o.ErrorLog == nil {
		o.ErrorLog = log.Default()
	}
	c := &stdioConn{wire: a.Wire(srv), out: &lockedWriter{w: out}, log: o.ErrorLog,
		slots: make(chan struct{}, stdioDirect)}

	// mcp-go's server reads what the fast path does not take from a pipe.
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
	c.calls.Close()
	cancel()
	c.calls.Wait()
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
	wire  *Wire
	out   *lockedWriter
	log   *log.Logger
	base  context.Context       // the session's and the caller's, set before read starts
	slots chan struct{}         // one token per fast call in flight
	calls mcpwire.Calls[string] // by their id's JSON text
}

// read reads in line by line, serving the fast path's calls and passing
// every other line to mcp-go through pw, until in ends.
func (c *stdioConn) read(in io.Reader, pw *io.PipeWriter) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		bp := mcpwire.GetBuf()
		line := (*bp)[:0]
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			line = append(line, frag...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if len(line) > 0 {
			// A last line without its newline is passed on as it is:
			// mcp-go drops it, as it always did.
			complete := line[len(line)-1] == '\n'
			if !(complete && c.serve(line, bp)) {
				if bytes.Contains(line, []byte(`"notifications/cancelled"`)) {
					c.cancel(line)
				}
				_, werr := pw.Write(line)
				c.recycle(bp, line)
				if werr != nil {
					return werr
				}
			}
		} else {
			c.recycle(bp, line)
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func (c *stdioConn) recycle(bp *[]byte, line []byte) {
	*bp = line
	mcpwire.PutBuf(bp)
}

// serve starts line on the fast path, if it is a call the fast path
// understands and a slot is free, and reports whether it did. The call
// recycles bp once it has read line.
func (c *stdioConn) serve(line []byte, bp *[]byte) bool {
	if !bytes.Contains(line, []byte(`"tools/call"`)) {
		return false
	}
	req, ok := c.wire.Read(line, false)
	if !ok {
		return false
	}
	var token mcp.ProgressToken
	if req.Progress != nil {
		if err := json.Unmarshal(req.Progress, &token); err != nil {
			return false
		}
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return false // mcp-go's queue takes it
	}
	req.ID = slices.Clone(req.ID)
	ctx, cancel := context.WithCancel(c.base)
	done, ok := c.calls.Start(string(req.ID), cancel)
	if !ok {
		cancel()
		<-c.slots
		return false
	}
	c.recycle(bp, line) // args hold copies of what they need
	go func() {
		defer done()
		defer func() { <-c.slots }()
		resp, release := c.wire.Respond(ctx, req, nil, token)
		defer release()
		if _, err := c.out.Write(resp); err != nil {
			c.log.Printf("Error writing tool response: %v", err)
		}
	}()
	return true
}

// cancel cancels the fast call a notifications/cancelled line names; the
// line goes on to mcp-go all the same, for the calls it serves.
func (c *stdioConn) cancel(line []byte) {
	if key, ok := mcpwire.CancelledRequest(line); ok {
		c.calls.Cancel(key)
	}
}

// lockedWriter writes each Write whole, under its lock: mcp-go writes a
// message in one Write, and so does the fast path.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
