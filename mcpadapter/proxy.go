package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"
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
func NewProxy(ctx context.Context, url, token, version string) (*Proxy, error) {
	c, err := client.NewStreamableHttpClient(url,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
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
	stop := startProgress(ctx, req, p.progress)
	defer stop()
	res, err := p.c.CallTool(ctx, fwd)
	if err != nil {
		return errorResult(&fleetstate.Error{Code: fleetstate.CodeInternal, Op: "proxy",
			Err: fmt.Errorf("the daemon did not answer: %v", err)}), nil
	}
	return res, nil
}
