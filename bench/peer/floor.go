package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// serveFloor is the least an MCP server over stdio can do for the
// benchmark's work: it answers put and get from memory, in fleetstate's
// result shape (the result as structured content and again as JSON text),
// one request at a time, with encoding/json and nothing else. The same
// client driving it shows what the client and the pipe cost by
// themselves: no server can be faster than this floor on this client.
func serveFloor(r io.Reader, w io.Writer) error {
	in := bufio.NewReaderSize(r, 1<<20)
	var mu sync.Mutex
	files := map[string]string{}
	for {
		line, err := in.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string         `json:"protocolVersion"`
				Name            string         `json:"name"`
				Arguments       map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			return err
		}
		if req.ID == nil {
			continue // a notification
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{
				"protocolVersion": req.Params.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "floor", "version": "1"},
			}
		case "tools/list":
			obj := map[string]any{"type": "object"}
			result = map[string]any{"tools": []any{
				map[string]any{"name": "put", "inputSchema": obj},
				map[string]any{"name": "get", "inputSchema": obj},
			}}
		case "tools/call":
			var v map[string]string
			mu.Lock()
			switch a := req.Params.Arguments; req.Params.Name {
			case "put":
				name, _ := a["file_name"].(string)
				files[name], _ = a["content"].(string)
				v = map[string]string{"id": name}
			case "get":
				id, _ := a["id"].(string)
				v = map[string]string{"content": files[id]}
			}
			mu.Unlock()
			data, err := json.Marshal(v)
			if err != nil {
				return err
			}
			result = map[string]any{
				"content":           []any{map[string]any{"type": "text", "text": string(data)}},
				"structuredContent": json.RawMessage(data),
			}
		default:
			result = map[string]any{}
		}
		resp, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		if err != nil {
			return err
		}
		// One write per message, newline included, as mcp-go's stdio
		// server does: a reader never waits for a line's last byte.
		if _, err := w.Write(append(resp, '\n')); err != nil {
			return err
		}
	}
}
