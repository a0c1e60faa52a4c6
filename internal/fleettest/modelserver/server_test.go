package modelserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest/modelserver"
)

// post sends body as JSON to url and returns the answer's status and body.
func post(t *testing.T, url string, body any, header ...string) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

type event struct {
	name string
	data map[string]any
}

// readSSE parses a stream of server-sent events, each with a data line
// of JSON whose "type" must be the event's name.
func readSSE(t *testing.T, body []byte) []event {
	t.Helper()
	var out []event
	var cur event
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatalf("event %s: data %q: %v", cur.name, line, err)
			}
		case line == "":
			if cur.data["type"] != cur.name {
				t.Fatalf("event %q has data of type %v", cur.name, cur.data["type"])
			}
			out = append(out, cur)
			cur = event{}
		}
	}
	return out
}

func names(events []event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.name)
	}
	return out
}

// wire is an answer as a client assembles it from the wire.
type wire struct {
	Text  string
	Tool  string
	Input string
	Stop  string
}

// Messages API conversations.

func user(texts ...string) map[string]any {
	var content []any
	for _, t := range texts {
		content = append(content, map[string]any{"type": "text", "text": t})
	}
	return map[string]any{"role": "user", "content": content}
}

func toolUse(id, name, input string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "tool_use", "id": id, "name": name, "input": json.RawMessage(input)}}}
}

func toolResult(id, text string, isError bool) map[string]any {
	return map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": id, "is_error": isError,
			"content": []any{map[string]any{"type": "text", "text": text}}}}}
}

func said(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}
}

func tools(names ...string) []any {
	var out []any
	for _, n := range names {
		out = append(out, map[string]any{"name": n, "input_schema": map[string]any{"type": "object"}})
	}
	return out
}

// assembleMessages reads a streamed Messages answer, checking the order
// of its events.
func assembleMessages(t *testing.T, body []byte) (wire, []event) {
	t.Helper()
	events := readSSE(t, body)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta",
		"content_block_stop", "message_delta", "message_stop"}
	if got := names(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v; want %v", got, want)
	}
	var w wire
	if cb := events[1].data["content_block"].(map[string]any); cb["type"] == "tool_use" {
		w.Tool = cb["name"].(string)
	}
	switch d := events[3].data["delta"].(map[string]any); d["type"] {
	case "text_delta":
		w.Text = d["text"].(string)
	case "input_json_delta":
		w.Input = d["partial_json"].(string)
	default:
		t.Fatalf("delta of type %v", d["type"])
	}
	w.Stop = events[5].data["delta"].(map[string]any)["stop_reason"].(string)
	return w, events
}

const script1 = "[[script]]\nbash echo hi > out.txt\nsay done\n[[end]]"

func TestMessages(t *testing.T) {
	reminder := "<system-reminder>context</system-reminder>"
	tests := []struct {
		name     string
		messages []any
		tools    []any
		want     wire
		step     int
	}{
		{
			name:     "no script",
			messages: []any{map[string]any{"role": "user", "content": "hello"}},
			tools:    tools("Bash"),
			want:     wire{Text: "ok", Stop: "end_turn"}, step: -1,
		},
		{
			name:     "first step",
			messages: []any{user(reminder, "Please.\n"+script1)},
			tools:    tools("Bash"),
			want:     wire{Tool: "Bash", Input: `{"command":"echo hi > out.txt","description":"Scripted step 1"}`, Stop: "tool_use"},
			step:     0,
		},
		{
			name:     "after the command",
			messages: []any{user(script1), toolUse("toolu_1", "Bash", `{"command":"echo hi > out.txt"}`), toolResult("toolu_1", "", false)},
			tools:    tools("Bash"),
			want:     wire{Text: "done", Stop: "end_turn"}, step: 1,
		},
		{
			name:     "a deferred tool is searched for",
			messages: []any{user("[[script]]\ntool fleet_reply {\"text\":\"x\"}\n[[end]]")},
			tools:    tools("Bash", "ToolSearch"),
			want:     wire{Tool: "ToolSearch", Input: `{"query":"select:mcp__fleetstate__fleet_reply"}`, Stop: "tool_use"},
			step:     0,
		},
		{
			name: "then called",
			messages: []any{user("[[script]]\ntool fleet_reply {\"text\":\"x\"}\n[[end]]"),
				toolUse("toolu_1", "ToolSearch", `{"query":"select:mcp__fleetstate__fleet_reply"}`), toolResult("toolu_1", "", false)},
			tools: tools("Bash", "ToolSearch", "mcp__fleetstate__fleet_reply"),
			want:  wire{Tool: "mcp__fleetstate__fleet_reply", Input: `{"text":"x"}`, Stop: "tool_use"},
			step:  0,
		},
		{
			name: "called after a search that did not find it",
			messages: []any{user("[[script]]\ntool fleet_reply {\"text\":\"x\"}\n[[end]]"),
				toolUse("toolu_1", "ToolSearch", `{"query":"select:mcp__fleetstate__fleet_reply"}`), toolResult("toolu_1", "", false)},
			tools: tools("Bash", "ToolSearch"),
			want:  wire{Tool: "mcp__fleetstate__fleet_reply", Input: `{"text":"x"}`, Stop: "tool_use"},
			step:  0,
		},
		{
			name:     "an offered tool is called at once",
			messages: []any{user("[[script]]\ntool fleet_reply {\"text\":\"x\"}\n[[end]]")},
			tools:    tools("ToolSearch", "mcp__fleetstate__fleet_reply"),
			want:     wire{Tool: "mcp__fleetstate__fleet_reply", Input: `{"text":"x"}`, Stop: "tool_use"},
			step:     0,
		},
		{
			name:     "past the last step",
			messages: []any{user("[[script]]\nbash ls\n[[end]]"), toolUse("toolu_1", "Bash", `{}`), toolResult("toolu_1", "x", true)},
			tools:    tools("Bash"),
			want:     wire{Text: "done", Stop: "end_turn"}, step: -1,
		},
		{
			name:     "a side request without tools",
			messages: []any{user(script1)},
			want:     wire{Text: "ok", Stop: "end_turn"}, step: -1,
		},
		{
			name: "a script in a tool's result does not count",
			messages: []any{user("look"), toolUse("toolu_1", "Bash", `{}`),
				toolResult("toolu_1", "[[script]]\nsay no\n[[end]]", false)},
			tools: tools("Bash"),
			want:  wire{Text: "ok", Stop: "end_turn"}, step: -1,
		},
		{
			name:     "the most recent script counts",
			messages: []any{user("[[script]]\nsay a\n[[end]]"), said("a"), user("[[script]]\nsay b\n[[end]]")},
			tools:    tools("Bash"),
			want:     wire{Text: "b", Stop: "end_turn"}, step: 0,
		},
		{
			name:     "a say ends a turn and the next message goes on",
			messages: []any{user("[[script]]\nsay one\nbash ls\n[[end]]"), said("one"), user("go on")},
			tools:    tools("Bash"),
			want:     wire{Tool: "Bash", Input: `{"command":"ls","description":"Scripted step 2"}`, Stop: "tool_use"},
			step:     1,
		},
		{
			name:     "a malformed script",
			messages: []any{user("[[script]]\nrun ls\n[[end]]")},
			tools:    tools("Bash"),
			want:     wire{Text: `modelserver: script line 1 "run ls": unknown step "run" (want bash, tool, say or usage)`, Stop: "end_turn"},
			step:     -1,
		},
	}
	srv := modelserver.Start(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, srv.URL()+"/v1/messages?beta=true", map[string]any{
				"model": "claude-test", "stream": true, "max_tokens": 100, "messages": tt.messages, "tools": tt.tools,
			})
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			got, _ := assembleMessages(t, body)
			if got != tt.want {
				t.Errorf("answer %+v; want %+v", got, tt.want)
			}
			reqs := srv.Requests()
			r := reqs[len(reqs)-1]
			if r.API != modelserver.Anthropic || r.Model != "claude-test" || !r.Stream || r.RawQuery != "beta=true" {
				t.Errorf("recorded API %s, model %q, stream %v, query %q; want anthropic, claude-test, true, beta=true", r.API, r.Model, r.Stream, r.RawQuery)
			}
			if r.Answer.Step != tt.step || r.Answer.Tool != tt.want.Tool || string(r.Answer.Input) != tt.want.Input || r.Answer.Text != tt.want.Text {
				t.Errorf("recorded answer %+v; want step %d and %+v", r.Answer, tt.step, tt.want)
			}
		})
	}
}

func TestMessagesRecordsTheConversation(t *testing.T) {
	srv := modelserver.Start(t, nil)
	post(t, srv.URL()+"/v1/messages", map[string]any{
		"model": "m", "stream": true, "tools": tools("Bash", "ToolSearch"),
		"messages": []any{user("first"), toolUse("toolu_1", "Bash", `{}`), toolResult("toolu_1", "out", false),
			toolUse("toolu_2", "Bash", `{}`), toolResult("toolu_2", "bad", true), user("<r>x</r>", "second")},
	}, "X-Api-Key", "sk-secret", "Authorization", "Bearer sk-secret", "Anthropic-Version", "2023-06-01")
	r := srv.Requests()[0]
	want := []modelserver.ToolResult{{CallID: "toolu_1", Name: "Bash", Text: "out"}, {CallID: "toolu_2", Name: "Bash", Text: "bad", IsError: true}}
	if !reflect.DeepEqual(r.ToolResults, want) {
		t.Errorf("ToolResults %+v; want %+v", r.ToolResults, want)
	}
	if r.UserText != "<r>x</r>\nsecond" {
		t.Errorf("UserText %q; want %q", r.UserText, "<r>x</r>\nsecond")
	}
	if want := []string{"Bash", "ToolSearch"}; !reflect.DeepEqual(r.Tools, want) {
		t.Errorf("Tools %v; want %v", r.Tools, want)
	}
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Authorization") != "" || r.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("recorded header %v; want it without credentials, with Anthropic-Version", r.Header)
	}
	if !json.Valid(r.Body) || r.Path != "/v1/messages" || r.Method != http.MethodPost {
		t.Errorf("recorded %s %s with body %q; want POST /v1/messages with its JSON", r.Method, r.Path, r.Body)
	}
}

func TestMessagesNotStreamed(t *testing.T) {
	srv := modelserver.Start(t, nil)
	_, body := post(t, srv.URL()+"/v1/messages", map[string]any{
		"model": "m", "tools": tools("Bash"), "messages": []any{user(script1)},
	})
	var msg struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string         `json:"type"`
			Name  string         `json:"name"`
			Input map[string]any `json:"input"`
		} `json:"content"`
		Usage map[string]int `json:"usage"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.StopReason != "tool_use" || len(msg.Content) != 1 ||
		msg.Content[0].Name != "Bash" || msg.Content[0].Input["command"] != "echo hi > out.txt" {
		t.Errorf("answer %s; want one assistant message calling Bash", body)
	}
	if msg.Usage["input_tokens"] != modelserver.DefaultInputTokens || msg.Usage["output_tokens"] != modelserver.DefaultOutputTokens {
		t.Errorf("usage %v; want the defaults", msg.Usage)
	}
}

func TestUsage(t *testing.T) {
	def := modelserver.Usage{InputTokens: modelserver.DefaultInputTokens, OutputTokens: modelserver.DefaultOutputTokens,
		CacheReadTokens: modelserver.DefaultCacheReadTokens, CacheCreationTokens: modelserver.DefaultCacheCreationTokens}
	mine := modelserver.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 30, CacheCreationTokens: 4}
	tests := []struct {
		name     string
		opts     *modelserver.Options
		messages []any
		want     modelserver.Usage
	}{
		{name: "default", messages: []any{user("hi")}, want: def},
		{name: "option", opts: &modelserver.Options{Usage: mine}, messages: []any{user("hi")}, want: mine},
		{name: "a usage step", messages: []any{user("[[script]]\nusage 7 3\nbash ls\n[[end]]")},
			want: modelserver.Usage{InputTokens: 7, OutputTokens: 3}},
		{name: "for the steps after it only", messages: []any{user("[[script]]\nbash ls\nusage 7 3 2 1\nsay x\n[[end]]")}, want: def},
		{name: "after the step", messages: []any{user("[[script]]\nbash ls\nusage 7 3 2 1\nsay x\n[[end]]"), toolUse("t", "Bash", "{}"), toolResult("t", "", false)},
			want: modelserver.Usage{InputTokens: 7, OutputTokens: 3, CacheReadTokens: 2, CacheCreationTokens: 1}},
		{name: "past the end", messages: []any{user("[[script]]\nusage 7 3 2 1\n[[end]]")},
			want: modelserver.Usage{InputTokens: 7, OutputTokens: 3, CacheReadTokens: 2, CacheCreationTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modelserver.Start(t, tt.opts)
			_, body := post(t, srv.URL()+"/v1/messages", map[string]any{"model": "m", "stream": true, "tools": tools("Bash"), "messages": tt.messages})
			_, events := assembleMessages(t, body)
			want := map[string]any{"input_tokens": float64(tt.want.InputTokens), "output_tokens": float64(tt.want.OutputTokens),
				"cache_read_input_tokens": float64(tt.want.CacheReadTokens), "cache_creation_input_tokens": float64(tt.want.CacheCreationTokens)}
			start := events[0].data["message"].(map[string]any)["usage"]
			delta := events[5].data["usage"]
			if !reflect.DeepEqual(start, want) || !reflect.DeepEqual(delta, want) {
				t.Errorf("message_start usage %v, message_delta usage %v; want %v in both", start, delta, want)
			}
			if got := srv.Requests()[0].Answer.Usage; got != tt.want {
				t.Errorf("recorded usage %+v; want %+v", got, tt.want)
			}

			_, body = post(t, srv.URL()+"/v1/responses", map[string]any{"model": "m", "stream": true, "tools": []any{map[string]any{"type": "function", "name": "exec_command"}},
				"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": tt.messages[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]}}}}})
			events = readSSE(t, body)
			got := events[len(events)-1].data["response"].(map[string]any)["usage"]
			wantOpenAI := map[string]any{"input_tokens": float64(tt.want.InputTokens), "output_tokens": float64(tt.want.OutputTokens),
				"total_tokens":          float64(tt.want.InputTokens + tt.want.OutputTokens),
				"input_tokens_details":  map[string]any{"cached_tokens": float64(tt.want.CacheReadTokens)},
				"output_tokens_details": map[string]any{"reasoning_tokens": float64(0)}}
			if len(tt.messages) == 1 && !reflect.DeepEqual(got, wantOpenAI) {
				t.Errorf("response.completed usage %v; want %v", got, wantOpenAI)
			}
		})
	}
}

// Responses API conversations.

func input(role, text string) map[string]any {
	typ := "input_text"
	if role == "assistant" {
		typ = "output_text"
	}
	return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": typ, "text": text}}}
}

func call(id, name, namespace, args string) map[string]any {
	m := map[string]any{"type": "function_call", "call_id": id, "name": name, "arguments": args}
	if namespace != "" {
		m["namespace"] = namespace
	}
	return m
}

func output(id string, out any) map[string]any {
	return map[string]any{"type": "function_call_output", "call_id": id, "output": out}
}

var codexTools = []any{
	map[string]any{"type": "function", "name": "exec_command"},
	map[string]any{"type": "tool_search", "execution": "client"},
	map[string]any{"type": "namespace", "name": "mcp__fleetstate", "tools": []any{map[string]any{"type": "function", "name": "fleet_reply"}}},
}

// assembleResponses reads a streamed Responses answer, checking the order
// of its events and the sequence numbers.
func assembleResponses(t *testing.T, body []byte) (wire, map[string]any) {
	t.Helper()
	events := readSSE(t, body)
	got := names(events)
	for i, e := range events {
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d %s has sequence_number %v", i, e.name, e.data["sequence_number"])
		}
	}
	head := []string{"response.created", "response.in_progress", "response.output_item.added"}
	tail := []string{"response.output_item.done", "response.completed"}
	if len(got) < 5 || !reflect.DeepEqual(got[:3], head) || !reflect.DeepEqual(got[len(got)-2:], tail) {
		t.Fatalf("events %v; want %v, the deltas, %v", got, head, tail)
	}
	done := events[len(events)-2].data["item"].(map[string]any)
	var w wire
	switch done["type"] {
	case "message":
		w.Text = done["content"].([]any)[0].(map[string]any)["text"].(string)
		if want := []string{"response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done"}; !reflect.DeepEqual(got[3:len(got)-2], want) {
			t.Errorf("deltas %v; want %v", got[3:len(got)-2], want)
		}
	case "function_call":
		w.Tool, w.Input = done["name"].(string), done["arguments"].(string)
		if ns, ok := done["namespace"].(string); ok {
			w.Tool = ns + "." + w.Tool
		}
		if want := []string{"response.function_call_arguments.delta", "response.function_call_arguments.done"}; !reflect.DeepEqual(got[3:len(got)-2], want) {
			t.Errorf("deltas %v; want %v", got[3:len(got)-2], want)
		}
	}
	resp := events[len(events)-1].data["response"].(map[string]any)
	w.Stop = resp["status"].(string)
	return w, resp
}

func TestResponses(t *testing.T) {
	never := map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text",
		"text": "<permissions instructions>\nApproval policy is currently never. Do not provide the `sandbox_permissions` for any reason, commands will be rejected.\n</permissions instructions>"}}}
	tests := []struct {
		name  string
		input []any
		tools []any
		want  wire
		step  int
		text  any // the request's "text", its output format
	}{
		{name: "no script", input: []any{input("user", "<environment_context/>"), input("user", "hello")}, tools: codexTools,
			want: wire{Text: "ok", Stop: "completed"}, step: -1},
		{name: "a command asks for escalation", input: []any{input("user", script1)}, tools: codexTools,
			want: wire{Tool: "exec_command", Input: `{"cmd":"echo hi > out.txt","justification":"The test's script runs this command.","sandbox_permissions":"require_escalated"}`, Stop: "completed"}},
		{name: "unless approval is never", input: []any{never, input("user", script1)}, tools: codexTools,
			want: wire{Tool: "exec_command", Input: `{"cmd":"echo hi > out.txt"}`, Stop: "completed"}},
		{name: "after the command", input: []any{input("user", script1), call("c1", "exec_command", "", "{}"), output("c1", "Process exited with code 0")}, tools: codexTools,
			want: wire{Text: "done", Stop: "completed"}, step: 1},
		{name: "an MCP tool", input: []any{input("user", "[[script]]\ntool fleet_reply {\"text\":\"x\"}\nsay done\n[[end]]")}, tools: codexTools,
			want: wire{Tool: "mcp__fleetstate.fleet_reply", Input: `{"text":"x"}`, Stop: "completed"}},
		{name: "after the MCP tool", input: []any{input("user", "[[script]]\ntool fleet_reply {\"text\":\"x\"}\nsay done\n[[end]]"),
			call("c1", "fleet_reply", "mcp__fleetstate", `{"text":"x"}`), output("c1", []any{map[string]any{"type": "input_text", "text": "replied"}})}, tools: codexTools,
			want: wire{Text: "done", Stop: "completed"}, step: 1},
		{name: "a side request without tools", input: []any{input("user", script1)},
			want: wire{Text: "ok", Stop: "completed"}, step: -1},
		{name: "a say ends a turn and the next message goes on", input: []any{input("user", "[[script]]\nsay one\nbash ls\n[[end]]"), input("assistant", "one"), input("user", "go on")},
			tools: codexTools, want: wire{Tool: "exec_command", Input: `{"cmd":"ls","justification":"The test's script runs this command.","sandbox_permissions":"require_escalated"}`, Stop: "completed"}, step: 1},
	}
	titleSchema := map[string]any{"type": "json_schema", "strict": true, "name": "codex_output_schema", "schema": map[string]any{
		"type": "object", "required": []string{"title"}, "additionalProperties": false,
		"properties": map[string]any{"title": map[string]any{"type": "string", "minLength": 1, "maxLength": 36}}}}
	tests = append(tests, struct {
		name  string
		input []any
		tools []any
		want  wire
		step  int
		text  any
	}{name: "a side request for JSON", input: []any{input("user", "Generate a concise, single-line task title.\n\nUser prompt:\n"+script1)},
		tools: codexTools[:1], text: map[string]any{"format": titleSchema}, want: wire{Text: `{"title":"ok"}`, Stop: "completed"}, step: -1})
	srv := modelserver.Start(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := map[string]any{"model": "gpt-test", "stream": true, "input": tt.input, "tools": tt.tools}
			if tt.text != nil {
				req["text"] = tt.text
			}
			status, body := post(t, srv.URL()+"/v1/responses", req)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			got, _ := assembleResponses(t, body)
			if got != tt.want {
				t.Errorf("answer %+v; want %+v", got, tt.want)
			}
			reqs := srv.Requests()
			r := reqs[len(reqs)-1]
			if r.API != modelserver.OpenAI || r.Model != "gpt-test" || r.Answer.Step != tt.step || string(r.Answer.Input) != tt.want.Input || r.Answer.Text != tt.want.Text {
				t.Errorf("recorded %s %q answer %+v; want openai gpt-test, step %d and %+v", r.API, r.Model, r.Answer, tt.step, tt.want)
			}
		})
	}
}

func TestResponsesRecordsTheConversation(t *testing.T) {
	srv := modelserver.Start(t, nil)
	post(t, srv.URL()+"/v1/responses", map[string]any{"model": "m", "stream": true, "tools": codexTools, "input": []any{
		input("user", "first"), call("c1", "exec_command", "", "{}"), output("c1", "Process exited with code 0"),
		call("c2", "fleet_reply", "mcp__fleetstate", "{}"), output("c2", []any{map[string]any{"type": "input_text", "text": "a"}, map[string]any{"type": "input_text", "text": "b"}}),
		call("c3", "fleet_reply", "mcp__fleetstate", "{}"), output("c3", map[string]any{"content": "no", "success": false}),
		input("assistant", "fine"),
	}})
	r := srv.Requests()[0]
	want := []modelserver.ToolResult{
		{CallID: "c1", Name: "exec_command", Text: "Process exited with code 0"},
		{CallID: "c2", Name: "fleet_reply", Text: "a\nb"},
		{CallID: "c3", Name: "fleet_reply", Text: "no", IsError: true},
	}
	if !reflect.DeepEqual(r.ToolResults, want) {
		t.Errorf("ToolResults %+v; want %+v", r.ToolResults, want)
	}
	if r.UserText != "first" {
		t.Errorf("UserText %q; want %q", r.UserText, "first")
	}
	if want := []string{"exec_command", "tool_search", "mcp__fleetstate.fleet_reply"}; !reflect.DeepEqual(r.Tools, want) {
		t.Errorf("Tools %v; want %v", r.Tools, want)
	}
}

func TestResponsesNotStreamed(t *testing.T) {
	srv := modelserver.Start(t, nil)
	_, body := post(t, srv.URL()+"/v1/responses", map[string]any{"model": "m", "tools": codexTools, "input": []any{input("user", "hi")}})
	var resp struct {
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage map[string]any `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if resp.Status != "completed" || len(resp.Output) != 1 || resp.Output[0].Content[0].Text != "ok" || resp.Usage["input_tokens"] != float64(modelserver.DefaultInputTokens) {
		t.Errorf("answer %s; want a completed response with the text ok and the default usage", body)
	}
}

// TestRetry checks that a request sent again is answered the same, ids
// included, and that the next step gets other ids.
func TestRetry(t *testing.T) {
	srv := modelserver.Start(t, nil)
	req := map[string]any{"model": "m", "stream": true, "tools": tools("Bash"), "messages": []any{user(script1)}}
	_, a := post(t, srv.URL()+"/v1/messages", req)
	_, b := post(t, srv.URL()+"/v1/messages", req)
	if !bytes.Equal(a, b) {
		t.Errorf("a retry was answered\n%s\nthen\n%s", a, b)
	}
	req["messages"] = []any{user("[[script]]\nbash ls\nbash ls\n[[end]]"), toolUse("toolu_x", "Bash", "{}"), toolResult("toolu_x", "", false)}
	_, c := post(t, srv.URL()+"/v1/messages", req)
	_, ea := assembleMessages(t, a)
	_, ec := assembleMessages(t, c)
	ida := ea[1].data["content_block"].(map[string]any)["id"]
	idc := ec[1].data["content_block"].(map[string]any)["id"]
	if ida == idc {
		t.Errorf("two steps' tool calls share the id %v", ida)
	}
}

func TestOtherPaths(t *testing.T) {
	srv := modelserver.Start(t, nil)
	status, body := post(t, srv.URL()+"/v1/messages/count_tokens", map[string]any{"model": "m", "messages": []any{user("hi")}})
	if status != http.StatusOK || string(bytes.TrimSpace(body)) != `{"input_tokens":100}` {
		t.Errorf("count_tokens: %d %s; want 200 {\"input_tokens\":100}", status, body)
	}
	resp, err := http.Get(srv.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/models: %d; want 404", resp.StatusCode)
	}
	status, _ = post(t, srv.URL()+"/v1/messages", "not an object")
	if status != http.StatusBadRequest {
		t.Errorf("a malformed body: %d; want 400", status)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].API != modelserver.Anthropic || reqs[1].API != modelserver.Other || reqs[1].Answer.Status != http.StatusNotFound || reqs[2].Answer.Status != http.StatusBadRequest {
		t.Errorf("recorded %+v; want count_tokens, a 404 and a 400", reqs)
	}
}

func TestWaitRequest(t *testing.T) {
	srv := modelserver.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := srv.WaitRequest(ctx, func(modelserver.Request) bool { return true }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRequest with no request = %v; want %v", err, context.DeadlineExceeded)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan modelserver.Request, 1)
	go func() {
		r, err := srv.WaitRequest(ctx, func(r modelserver.Request) bool { return r.UserText == "second" })
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	post(t, srv.URL()+"/v1/messages", map[string]any{"model": "m", "messages": []any{user("first")}})
	post(t, srv.URL()+"/v1/messages", map[string]any{"model": "m", "messages": []any{user("second")}})
	if r := <-got; r.UserText != "second" {
		t.Errorf("WaitRequest returned the request with %q; want second", r.UserText)
	}
	r, err := srv.WaitRequest(ctx, func(r modelserver.Request) bool { return r.UserText == "first" })
	if err != nil || r.UserText != "first" {
		t.Errorf("WaitRequest for a past request = %q, %v; want first", r.UserText, err)
	}
}
