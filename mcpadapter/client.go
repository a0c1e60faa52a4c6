package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fleetstate/fleetstate"
)

// Client is an MCP connection to a fleetstate daemon over streamable HTTP,
// for Go programs that act as a lead or a member. It is safe for
// concurrent use.
type Client struct {
	mcp *client.Client
}

// Dial connects to the daemon's MCP endpoint url as the agent whose token
// is given; name is the client's name in the MCP handshake.
func Dial(ctx context.Context, url, token, name string) (*Client, error) {
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		return nil, fmt.Errorf("mcpadapter: dial %s: %w", url, err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("mcpadapter: dial %s: %w", url, err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, fmt.Errorf("mcpadapter: initialize with %s: %w", url, err)
	}
	return &Client{mcp: c}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.mcp.Close() }

// Call calls a tool and decodes its structured content into out (which
// may be nil). A tool error is returned as a [*ToolError], which
// errors.Is(err, fleetstate.ErrFileExists) and [fleetstate.CodeOf]
// understand; a failure of the connection is returned as is.
func (c *Client) Call(ctx context.Context, tool string, args map[string]any, out any) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.mcp.CallTool(ctx, req)
	if err != nil {
		return err
	}
	raw := res.RawStructuredContent
	if len(raw) == 0 {
		if raw, err = json.Marshal(res.StructuredContent); err != nil {
			return err
		}
	}
	if res.IsError {
		var body errorBody
		if err := json.Unmarshal(raw, &body); err != nil || body.Error == "" {
			return &ToolError{Tool: tool, Code: fleetstate.CodeInternal, Message: fmt.Sprintf("malformed error result %s", raw)}
		}
		return &ToolError{Tool: tool, Code: body.Error, Message: body.Message}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// ToolError is a tool's error result as a client receives it: the code
// and the server's message.
type ToolError struct {
	Tool    string
	Code    fleetstate.Code
	Message string
}

func (e *ToolError) Error() string { return e.Tool + ": " + string(e.Code) + ": " + e.Message }

// Unwrap returns a [*fleetstate.Error] with the code, so that errors.Is
// with the package's sentinels and [fleetstate.CodeOf] work.
func (e *ToolError) Unwrap() error { return &fleetstate.Error{Code: e.Code, Op: e.Tool} }
