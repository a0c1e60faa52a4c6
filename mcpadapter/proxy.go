package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Proxy is an MCP server whose tools forward every call to a fleetstate
// daemon over streamable HTTP, for MCP clients that speak only stdio. The
// caller's identity is the daemon's token, not anything the client says.
type Proxy struct {
	c        *client.Client
	srv      *server.MCPServer
	progress time.Duration
}

// NewProxy connects to the daemon at url with token and mirrors its tools.
//
// The proxy holds a listening stream open to the daemon for as long as it
// runs: when the proxy's process ends, however it ends, the stream closes
// and the daemon knows that the agent behind it is gone. Closing the proxy
// also ends its session.
func NewProxy(ctx context.Context, url, token, version string) (*Proxy, error) {
	// The token goes on every request, the session's closing DELETE too.
	listening := make(chan struct{})
	hc := &http.Client{Transport: &bearerTransport{token: token, listening: listening}}
	c, err := client.NewStreamableHttpClient(url,
		transport.WithHTTPBasicClient(hc),
		transport.WithContinuousListening())
	if err != nil {
		return nil, fmt.Errorf("mcpadapter: proxy: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("mcpadapter: proxy: connect: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "fleetstate-proxy", Version: version}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, fmt.Errorf("mcpadapter: proxy: initialize: %w", err)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("mcpadapter: proxy: list tools: %w", err)
	}
	// Serve once the daemon holds the stream, so that it knows of the
	// proxy before the proxy's client can make it do anything. A daemon
	// that offers no stream costs a short wait, no failure.
	select {
	case <-listening:
	case <-time.After(proxyListenWait):
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
	p := &Proxy{c: c, progress: DefaultProgressInterval}
	p.srv = server.NewMCPServer("fleetstate", version, server.WithToolCapabilities(false), server.WithRecovery(),
		server.WithInstructions(instructions))
	for _, t := range tools.Tools {
		p.srv.AddTool(t, p.forward)
	}
	return p, nil
}

// Server returns the MCP server to serve, for example over stdio.
func (p *Proxy) Server() *server.MCPServer { return p.srv }

// Close disconnects from the daemon.
func (p *Proxy) Close() error { return p.c.Close() }

func (p *Proxy) forward(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fwd := mcp.CallToolRequest{}
	fwd.Params.Name = req.Params.Name
	if len(req.Params.RawArguments) > 0 {
		fwd.Params.Arguments = json.RawMessage(req.Params.RawArguments)
	} else {
		fwd.Params.Arguments = req.Params.Arguments
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	stop := startProgress(ctx, server.ServerFromContext(ctx), token, p.progress)
	defer stop()
	res, err := p.c.CallTool(ctx, fwd)
	if err != nil {
		return errorResult(&fleetstate.Error{Code: fleetstate.CodeInternal, Op: "proxy",
			Err: fmt.Errorf("the daemon did not answer: %v", err)}), nil
	}
	return res, nil
}

// proxyListenWait bounds how long NewProxy waits for its listening stream.
const proxyListenWait = 5 * time.Second

// bearerTransport adds the daemon token to every request, and closes
// listening when a listening stream is first established.
type bearerTransport struct {
	token     string
	listening chan struct{}
	once      sync.Once
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		b.once.Do(func() { close(b.listening) })
	}
	return resp, err
}
