package mcpadapter

import (
	"context"
	"errors"
	"io"
	"log"

	"github.com/mark3labs/mcp-go/server"
)

// StdioOptions configure [Adapter.ServeStdio]. A nil *StdioOptions means
// the defaults.
type StdioOptions struct {
	// ErrorLog receives the transport's errors. Nil means standard error,
	// as mcp-go's stdio server logs.
	ErrorLog *log.Logger
}

// The tool calls in flight over one stdio connection: mcp-go's stdio
// server runs each on one of stdioWorkers goroutines and queues up to
// stdioQueue more, so that calls that block (a member's fleet_next, a
// lead's fleet_send) never stop the reader; past that it serves a call on
// the reader itself.
const (
	stdioWorkers = 100
	stdioQueue   = 1000
)

// ServeStdio serves srv, a server from [Adapter.NewServer], over in and out
// (one JSON-RPC message a line) with mcp-go's stdio server until in ends or
// ctx is done, with id as the caller of every tool. Tool calls run
// concurrently, each with its own context, which a notifications/cancelled
// for its id cancels; their responses, each written whole, may come in any
// order. When in ends, the calls in flight are cancelled and ServeStdio
// returns once their responses are written.
func (a *Adapter) ServeStdio(ctx context.Context, srv *server.MCPServer, id Identity, in io.Reader, out io.Writer, opts *StdioOptions) error {
	var o StdioOptions
	if opts != nil {
		o = *opts
	}
	if o.ErrorLog == nil {
		o.ErrorLog = log.Default()
	}
	s := server.NewStdioServer(srv)
	server.WithErrorLogger(o.ErrorLog)(s)
	server.WithWorkerPoolSize(stdioWorkers)(s)
	server.WithQueueSize(stdioQueue)(s)
	server.WithStdioContextFunc(func(ctx context.Context) context.Context {
		// The context of every request: the session and the caller.
		return ContextWithIdentity(ctx, id)
	})(s)
	err := s.Listen(ctx, in, out)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
