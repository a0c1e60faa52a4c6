package modelserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/goleak"
)

// mcpLogEnv, set in a test binary's environment, makes the binary an MCP
// server on its standard input and output instead of running the tests;
// the variable names the file it appends each tool call to, one JSON line
// {"tool": NAME, "arguments": {...}} a call.
const mcpLogEnv = "MODELSERVER_TEST_MCP_LOG"

func TestMain(m *testing.M) {
	if log := os.Getenv(mcpLogEnv); log != "" {
		if err := serveMCP(log); err != nil {
			fmt.Fprintln(os.Stderr, "mcp server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// serveMCP serves two tools over stdio, named as fleetstate's are:
// fleet_reply, which answers "replied", and fleet_refuse, which answers
// an error result "refused". Both log their calls to the file log.
func serveMCP(log string) error {
	var mu sync.Mutex
	record := func(name string, args any) error {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		return json.NewEncoder(f).Encode(map[string]any{"tool": name, "arguments": args})
	}
	s := server.NewMCPServer("fleetstate", "1.0.0", server.WithToolCapabilities(false))
	annotated := []mcp.ToolOption{
		mcp.WithReadOnlyHintAnnotation(false), mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false),
	}
	s.AddTool(mcp.NewTool("fleet_reply", append(annotated,
		mcp.WithDescription("Reply to the fleet's lead."),
		mcp.WithString("text", mcp.Required(), mcp.Description("The reply.")))...),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := record("fleet_reply", req.GetRawArguments()); err != nil {
				return nil, err
			}
			return mcp.NewToolResultText("replied"), nil
		})
	s.AddTool(mcp.NewTool("fleet_refuse", append(annotated,
		mcp.WithDescription("Refuse, always, with an error result."),
		mcp.WithString("why", mcp.Description("The reason.")))...),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := record("fleet_refuse", req.GetRawArguments()); err != nil {
				return nil, err
			}
			return mcp.NewToolResultError("refused"), nil
		})
	return server.ServeStdio(s)
}
