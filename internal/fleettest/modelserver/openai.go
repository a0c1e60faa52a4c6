package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// The shell tool Codex offers, and the permission a call of it asks for
// to run outside the sandbox (which raises an approval).
const (
	execCommand       = "exec_command"
	requireEscalated  = "require_escalated"
	scriptedRationale = "The test's script runs this command."
)

// neverApprove is how Codex's developer instructions say that its
// approval policy is never; it then rejects a command that carries
// sandbox_permissions rather than run it.
const neverApprove = "Approval policy is currently never."

type responsesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Input  []item `json:"input"`
	Tools  []tool `json:"tools"`
	Text   struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

type tool struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Tools []tool `json:"tools"`
}

type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	CallID    string          `json:"call_id"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// itemText joins the text parts of a message's content or of a call's
// output: a string, an array of parts with "text", or an object with a
// "content" of either kind. It reports a "success": false of such an
// object.
func itemText(raw json.RawMessage) (text string, failed bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var ts []string
		for _, p := range parts {
			ts = append(ts, p.Text)
		}
		return joinText(ts), false
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
		Success *bool           `json:"success"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
		t, _ := itemText(obj.Content)
		return t, obj.Success != nil && !*obj.Success
	}
	return "", false
}

// readResponses fills r's parsed view from a Responses request and
// returns the request's conversation.
func readResponses(r *Request, req *responsesRequest) conversation {
	r.API, r.Model, r.Stream = OpenAI, req.Model, req.Stream
	c := conversation{tools: map[string]bool{}}
	for _, t := range req.Tools {
		if len(t.Tools) > 0 {
			for _, sub := range t.Tools {
				c.offer(r, t.Name+"."+sub.Name)
			}
			continue
		}
		name := t.Name
		if name == "" {
			name = t.Type // tool_search, web_search
		}
		c.offer(r, name)
	}
	names := map[string]string{} // call_id to tool name
	scriptAt := -1
	for i, it := range req.Input {
		if it.Role == "developer" {
			if text, _ := itemText(it.Content); strings.Contains(text, neverApprove) {
				c.neverApprove = true
			}
		}
		switch it.Type {
		case "function_call", "custom_tool_call":
			names[it.CallID] = it.Name
		case "function_call_output", "custom_tool_call_output":
			text, failed := itemText(it.Output)
			r.ToolResults = append(r.ToolResults, ToolResult{CallID: it.CallID, Name: names[it.CallID], Text: text, IsError: failed})
		case "message", "":
			if it.Role != "user" {
				continue
			}
			text, _ := itemText(it.Content)
			if text == "" {
				continue
			}
			if c.user(r, text) {
				scriptAt = i
			}
		}
	}
	if scriptAt >= 0 {
		for _, it := range req.Input[scriptAt+1:] {
			switch {
			case it.Type == "function_call" || it.Type == "custom_tool_call":
				c.done++
			case (it.Type == "message" || it.Type == "") && it.Role == "assistant":
				if text, _ := itemText(it.Content); text != "" {
					c.done++
				}
			}
		}
	}
	c.key = digestJSON(req.Input)
	return c
}

// openaiUsage is u in the Responses API's shape.
func openaiUsage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}
}

func (s *Server) serveResponses(w http.ResponseWriter, r *Request) {
	var req responsesRequest
	if !s.decode(w, r, OpenAI, &req) {
		return
	}
	c := readResponses(r, &req)
	a := s.plan(c)
	switch {
	case req.Text.Format.Type == "json_schema":
		// A side request that wants JSON, such as Codex's title of a new
		// thread: it quotes the user's prompt, script and all, and offers
		// a tool or two, but a tool call is no answer to it.
		a = action{step: -1, kind: StepSay, text: schemaAnswer(req.Text.Format.Schema), usage: s.usage}
	case len(req.Tools) == 0:
		a = action{step: -1, kind: StepSay, text: NoScriptText, usage: s.usage}
	}
	r.Answer.Step, r.Answer.Usage, r.Answer.Status = a.step, a.usage, http.StatusOK

	var done map[string]any // the output item once complete
	switch a.kind {
	case StepBash:
		r.Answer.Tool = execCommand
		args := map[string]string{"cmd": a.command, "sandbox_permissions": requireEscalated, "justification": scriptedRationale}
		if c.neverApprove {
			args = map[string]string{"cmd": a.command}
		}
		r.Answer.Input = mustJSON(args)
		done = map[string]any{"type": "function_call", "id": "fc_" + c.key, "call_id": "call_" + c.key,
			"name": execCommand, "arguments": string(r.Answer.Input), "status": "completed"}
	case StepTool:
		r.Answer.Tool, r.Answer.Input = a.tool, a.args
		done = map[string]any{"type": "function_call", "id": "fc_" + c.key, "call_id": "call_" + c.key,
			"name": a.tool, "namespace": "mcp__" + s.mcp, "arguments": string(a.args), "status": "completed"}
	default:
		r.Answer.Text = a.text
		done = map[string]any{"type": "message", "id": "msg_" + c.key, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}}}
	}
	s.record(*r)

	respID := "resp_" + c.key
	created := time.Now().Unix()
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": created, "status": status,
			"model": req.Model, "output": output, "usage": usage}
	}
	if !req.Stream {
		writeJSON(w, response("completed", []any{done}, openaiUsage(a.usage)))
		return
	}
	e := sse{w}
	e.start()
	seq := 0
	event := func(name string, data map[string]any) {
		data["type"], data["sequence_number"] = name, seq
		seq++
		e.event(name, data)
	}
	event("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	event("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	itemID := done["id"]
	if done["type"] == "message" {
		event("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}})
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		event("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
		event("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": a.text})
		event("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": a.text})
		part = map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}
		event("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
	} else {
		added := map[string]any{}
		for k, v := range done {
			added[k] = v
		}
		added["arguments"], added["status"] = "", "in_progress"
		event("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		event("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": done["arguments"]})
		event("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": 0, "arguments": done["arguments"]})
	}
	event("response.output_item.done", map[string]any{"output_index": 0, "item": done})
	event("response.completed", map[string]any{"response": response("completed", []any{done}, openaiUsage(a.usage))})
}

// schemaAnswer returns a JSON object that satisfies schema, as far as a
// side request's schema goes: each required property of a simple type,
// a string being [NoScriptText]. Codex's title schema asks for
// {"title": string}.
func schemaAnswer(schema json.RawMessage) string {
	var sch struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	json.Unmarshal(schema, &sch)
	out := map[string]any{}
	for _, name := range sch.Required {
		switch sch.Properties[name].Type {
		case "string":
			out[name] = NoScriptText
		case "number", "integer":
			out[name] = 0
		case "boolean":
			out[name] = false
		case "array":
			out[name] = []any{}
		case "null":
			out[name] = nil
		default:
			out[name] = map[string]any{}
		}
	}
	return string(mustJSON(out))
}
