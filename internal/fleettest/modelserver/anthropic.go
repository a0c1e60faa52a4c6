package modelserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// toolSearch is the name of Claude Code's tool that loads deferred tools.
const toolSearch = "ToolSearch"

type messagesRequest struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// blocks returns the content blocks of a message's content, which is a
// string (one text block) or an array of blocks.
func blocks(content json.RawMessage) []block {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	json.Unmarshal(content, &bs)
	return bs
}

// blocksText joins the text of the text blocks of content.
func blocksText(content json.RawMessage) string {
	var parts []string
	for _, b := range blocks(content) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return joinText(parts)
}

// readMessages fills r's parsed view from a Messages request and returns
// the request's conversation.
func readMessages(r *Request, req *messagesRequest) conversation {
	r.API, r.Model, r.Stream = Anthropic, req.Model, req.Stream
	c := conversation{tools: map[string]bool{}}
	for _, t := range req.Tools {
		c.offer(r, t.Name)
	}
	names := map[string]string{} // tool_use id to tool name
	scriptAt := -1
	for i, m := range req.Messages {
		for _, b := range blocks(m.Content) {
			switch b.Type {
			case "tool_use":
				names[b.ID] = b.Name
			case "tool_result":
				r.ToolResults = append(r.ToolResults, ToolResult{
					CallID: b.ToolUseID, Name: names[b.ToolUseID], Text: blocksText(b.Content), IsError: b.IsError,
				})
			}
		}
		if m.Role != "user" {
			continue
		}
		if text := blocksText(m.Content); text != "" {
			if c.user(r, text) {
				scriptAt = i
			}
		}
	}
	if scriptAt >= 0 {
		for _, m := range req.Messages[scriptAt+1:] {
			if m.Role != "assistant" {
				continue
			}
			calls, texts := 0, 0
			for _, b := range blocks(m.Content) {
				switch {
				case b.Type == "tool_use" && b.Name == toolSearch:
					c.searched = true
				case b.Type == "tool_use":
					calls++
					c.searched = false
				case b.Type == "text" && b.Text != "":
					texts++
				}
			}
			if calls > 0 {
				c.done += calls
			} else if texts > 0 {
				c.done++
			}
		}
	}
	c.key = digestJSON(req.Messages)
	return c
}

// anthropicUsage is u in the Messages API's shape.
func anthropicUsage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"output_tokens":               u.OutputTokens,
		"cache_read_input_tokens":     u.CacheReadTokens,
		"cache_creation_input_tokens": u.CacheCreationTokens,
	}
}

// anthropicContent is the one content block of an answer, and its stop
// reason.
func (s *Server) anthropicContent(c conversation, a action, ans *Answer) (map[string]any, string) {
	id := "toolu_" + c.key
	switch a.kind {
	case StepBash:
		ans.Tool = "Bash"
		ans.Input = mustJSON(map[string]string{
			"command":     a.command,
			"description": "Scripted step " + strconv.Itoa(a.step+1),
		})
	case StepTool:
		name := "mcp__" + s.mcp + "__" + a.tool
		if !c.tools[name] && c.tools[toolSearch] && !c.searched {
			ans.Tool = toolSearch
			ans.Input = mustJSON(map[string]string{"query": "select:" + name})
		} else {
			ans.Tool, ans.Input = name, a.args
		}
	default:
		ans.Text = a.text
		return map[string]any{"type": "text", "text": a.text}, "end_turn"
	}
	var input map[string]any
	json.Unmarshal(ans.Input, &input)
	return map[string]any{"type": "tool_use", "id": id, "name": ans.Tool, "input": input}, "tool_use"
}

func (s *Server) serveMessages(w http.ResponseWriter, r *Request) {
	var req messagesRequest
	if !s.decode(w, r, Anthropic, &req) {
		return
	}
	c := readMessages(r, &req)
	a := s.plan(c)
	if len(req.Tools) == 0 {
		a = action{step: -1, kind: StepSay, text: NoScriptText, usage: s.usage}
	}
	r.Answer.Step, r.Answer.Usage, r.Answer.Status = a.step, a.usage, http.StatusOK
	content, stop := s.anthropicContent(c, a, &r.Answer)
	s.record(*r)

	msgID := "msg_" + c.key
	usage := anthropicUsage(a.usage)
	if !req.Stream {
		writeJSON(w, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{content}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	e := sse{w}
	e.start()
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
	if content["type"] == "text" {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		e.event("ping", map[string]any{"type": "ping"})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": r.Answer.Text}})
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": content["id"], "name": content["name"], "input": map[string]any{}}})
		e.event("ping", map[string]any{"type": "ping"})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(r.Answer.Input)}})
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// serveCountTokens answers a token count: the default input tokens,
// whatever the request.
func (s *Server) serveCountTokens(w http.ResponseWriter, r *Request) {
	var req messagesRequest
	if json.Unmarshal(r.Body, &req) == nil {
		readMessages(r, &req)
	}
	r.API, r.Answer.Status = Anthropic, http.StatusOK
	s.record(*r)
	writeJSON(w, map[string]any{"input_tokens": s.usage.InputTokens})
}

// mustJSON marshals v, which this package builds from JSON-safe values.
// It leaves <, > and & as they are, as the CLIs' own JSON does.
func mustJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
