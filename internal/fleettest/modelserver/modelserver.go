// Package modelserver is the part of the test kit that stands in for a
// model API at its wire: an HTTP server on 127.0.0.1 that speaks the
// Anthropic Messages API to Claude Code and the OpenAI Responses API to
// Codex, and answers from a script written in the conversation, so that a
// test steers a real coding agent step by step.
//
// # Endpoints
//
// One [Server] serves both APIs. [Server.URL] is the base URL Claude Code
// takes as ANTHROPIC_BASE_URL; Codex takes URL+"/v1" as its provider's
// base_url, with wire_api "responses".
//
//   - POST /v1/messages (with or without ?beta=true): a streamed answer
//     (message_start, content_block_start, ping, content_block_delta,
//     content_block_stop, message_delta, message_stop), or one JSON
//     message where the request does not ask for a stream.
//   - POST /v1/messages/count_tokens: {"input_tokens": N}.
//   - POST /v1/responses: a streamed answer (response.created,
//     response.in_progress, response.output_item.added, the deltas,
//     response.output_item.done, response.completed), or one JSON
//     response where the request does not ask for a stream.
//   - Anything else: 404 with an error body in the Anthropic shape.
//
// Every request, whatever its path, is recorded as a [Request]:
// [Server.Requests] returns them and [Server.WaitRequest] waits for one.
//
// # Scripts
//
// A script is the text between a line [[script]] and the next line
// [[end]] in the most recent user message that holds one: the prompt
// typed into the agent, or a brief pasted into it. Only text the user
// wrote counts, never a tool's result. Lines are split at real line
// breaks, so a script inside a JSON string of a step (where a line break
// is written \n) stays part of that step. Blank lines and lines that
// start with # are skipped. Each other line is one step:
//
//	bash COMMAND      run COMMAND with the agent's shell tool
//	tool NAME {json}  call the MCP tool NAME with the JSON object
//	say TEXT          answer TEXT and end the turn
//	usage IN OUT [CACHE_READ [CACHE_CREATION]]
//	                  the usage the answers to the following steps report
//
// For Claude Code, bash is a Bash tool_use {"command", "description"},
// and tool NAME a tool_use of mcp__SERVER__NAME, where SERVER is
// [Options.MCPServer]. Claude Code defers MCP tools: while the request
// does not offer the tool, the server first calls ToolSearch with
// {"query": "select:mcp__SERVER__NAME"}, and calls the tool on the next
// request, which carries it. For Codex, bash is a call of exec_command
// {"cmd", "sandbox_permissions": "require_escalated", "justification"},
// which asks for the user's approval; where the request's developer
// instructions say the approval policy is never (codex exec with the
// sandbox bypassed), Codex rejects such a call, so it is {"cmd"} alone.
// tool NAME is a function call NAME in the namespace mcp__SERVER, made at
// once: Codex defers MCP tools behind its tool_search, so they are not in
// the request's tools, but it runs such a call all the same.
//
// Which step answers a request follows from the request alone: the
// number of actions already answered after the script's message, that is
// the tool calls in the history (the tool search not counted) and the
// assistant messages of text alone. A request sent again (a retry) is
// thus answered the same, with the same ids. A say ends the turn; the
// next user message without a script of its own goes on with the step
// after it. Past the last step the answer is [EndText]. A request whose
// conversation holds no script, and one that offers no tools, is
// answered [NoScriptText]; one that asks for JSON of a schema (Codex's
// title of a new thread, which quotes the prompt, script and all) with
// an object of the schema's required properties; a script with a
// malformed line with the error's text.
//
// # Usage
//
// Every answer reports token usage: [Options.Usage], by default
// [DefaultInputTokens], [DefaultOutputTokens], [DefaultCacheReadTokens]
// and [DefaultCacheCreationTokens], until a usage step sets other counts
// for the steps after it. Anthropic answers report all four counts, the
// same in message_start and in message_delta; OpenAI answers report
// input_tokens, output_tokens, input_tokens_details.cached_tokens (the
// cache read) and their total. A test can so compute the exact totals an
// agent's transcript must hold.
package modelserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The usage each answer reports where neither [Options.Usage] nor a usage
// step of the script says otherwise.
const (
	DefaultInputTokens         = 100
	DefaultOutputTokens        = 20
	DefaultCacheReadTokens     = 50
	DefaultCacheCreationTokens = 10
)

// DefaultMCPServer is the MCP server name that tool steps call where
// [Options.MCPServer] is empty: the name fleetstate registers itself under.
const DefaultMCPServer = "fleetstate"

// maxBody bounds the body of a request the server reads. Claude Code's
// first request, with its system prompt and tools, is about 100 KB.
const maxBody = 32 << 20

// Usage is the token usage an answer reports.
type Usage struct {
	InputTokens         int
	OutputTokens        int
	CacheReadTokens     int
	CacheCreationTokens int
}

// Options configures a [Server]. A nil *Options means the zero Options.
type Options struct {
	// Usage is what each answer reports where no usage step of the
	// script says otherwise. The zero Usage means the Default* constants.
	Usage Usage
	// MCPServer is the name under which the agents know the MCP server
	// whose tools the tool steps call; "" means [DefaultMCPServer].
	MCPServer string
}

// API tells which protocol a request spoke.
type API string

// The APIs the server tells apart.
const (
	Anthropic API = "anthropic"
	OpenAI    API = "openai"
	// Other is any request the server does not answer as a model API.
	Other API = "other"
)

// Request is one request the server received, with the answer it gave.
type Request struct {
	Time   time.Time
	Method string
	// Path is the URL's path, RawQuery its query (such as "beta=true").
	Path     string
	RawQuery string
	// Header is the request's header without the credentials
	// (Authorization, X-Api-Key, Cookie).
	Header http.Header
	// Body is the request's body as received.
	Body []byte

	API    API
	Model  string
	Stream bool
	// Tools are the names of the tools the request offers: a tool
	// without a name by its type (Codex's tool_search, web_search), a
	// function of a Codex namespace as NAMESPACE.NAME.
	Tools []string
	// ToolResults are the results of tool calls the conversation holds,
	// oldest first.
	ToolResults []ToolResult
	// UserText is the text of the most recent user message that holds
	// text, its parts joined by line breaks.
	UserText string

	// Answer is what the server answered.
	Answer Answer
}

// ToolResult is the result of a tool call, as a request carries it back.
type ToolResult struct {
	// CallID is the id of the call (Anthropic tool_use_id, OpenAI
	// call_id); Name the name of the called tool, where the conversation
	// holds the call.
	CallID string
	Name   string
	// Text is the result's text, its parts joined by line breaks.
	Text string
	// IsError reports a result marked as an error (Anthropic is_error;
	// Codex's MCP results with "success": false).
	IsError bool
}

// Answer is what the server answered a request.
type Answer struct {
	// Step is the index of the answered action among the script's
	// actions (usage steps not counted), or -1 where the answer is no
	// step of a script.
	Step int
	// Text is the answer's text, where it is text.
	Text string
	// Tool is the name of the called tool as the agent knows it (Bash,
	// ToolSearch, mcp__fleetstate__fleet_reply, exec_command,
	// fleet_reply), where the answer is a tool call; Input its JSON
	// arguments.
	Tool  string
	Input json.RawMessage
	// Usage is the usage the answer reported.
	Usage Usage
	// Status is the HTTP status of the answer.
	Status int
}

// Server is a scripted model server on 127.0.0.1. Its methods are safe
// for concurrent use.
type Server struct {
	srv   *httptest.Server
	usage Usage
	mcp   string

	mu      sync.Mutex
	reqs    []Request     // guarded by mu
	changed chan struct{} // guarded by mu; closed and replaced on each new request
}

// Start starts a server on a free port of 127.0.0.1; tb's cleanup closes
// it, after waiting for the requests in flight.
func Start(tb testing.TB, opts *Options) *Server {
	tb.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Usage == (Usage{}) {
		o.Usage = Usage{DefaultInputTokens, DefaultOutputTokens, DefaultCacheReadTokens, DefaultCacheCreationTokens}
	}
	if o.MCPServer == "" {
		o.MCPServer = DefaultMCPServer
	}
	s := &Server{usage: o.Usage, mcp: o.MCPServer, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	tb.Cleanup(s.srv.Close)
	return s
}

// URL returns the server's base URL, http://127.0.0.1:PORT, without a
// trailing slash.
func (s *Server) URL() string { return s.srv.URL }

// Requests returns a copy of the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// WaitRequest returns the first request, received so far or later, for
// which match returns true. It returns ctx.Err() if ctx ends first.
func (s *Server) WaitRequest(ctx context.Context, match func(Request) bool) (Request, error) {
	seen := 0
	for {
		s.mu.Lock()
		reqs, changed := s.reqs[seen:], s.changed
		s.mu.Unlock()
		for _, r := range reqs {
			if match(r) {
				return r, nil
			}
		}
		seen += len(reqs)
		select {
		case <-changed:
		case <-ctx.Done():
			return Request{}, ctx.Err()
		}
	}
}

// record appends r to the requests and wakes the waiters.
func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	close(s.changed)
	s.changed = make(chan struct{})
}

// secretHeaders are left out of a recorded request's header.
var secretHeaders = []string{"Authorization", "X-Api-Key", "Cookie"}

func (s *Server) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, hr.Body, maxBody))
	h := hr.Header.Clone()
	for _, k := range secretHeaders {
		h.Del(k)
	}
	r := Request{
		Time: time.Now(), Method: hr.Method, Path: hr.URL.Path, RawQuery: hr.URL.RawQuery,
		Header: h, Body: body, API: Other, Answer: Answer{Step: -1},
	}
	if err != nil {
		r.Answer.Status = http.StatusRequestEntityTooLarge
		s.record(r)
		writeError(w, r.Answer.Status, "request_too_large", err.Error())
		return
	}
	path := strings.TrimSuffix(hr.URL.Path, "/")
	switch {
	case hr.Method == http.MethodPost && path == "/v1/messages":
		s.serveMessages(w, &r)
	case hr.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		s.serveCountTokens(w, &r)
	case hr.Method == http.MethodPost && path == "/v1/responses":
		s.serveResponses(w, &r)
	default:
		r.Answer.Status = http.StatusNotFound
		s.record(r)
		writeError(w, http.StatusNotFound, "not_found_error", "modelserver: no such endpoint: "+hr.Method+" "+hr.URL.Path)
	}
}

// decode unmarshals r's body, a request of api, into req. When it cannot,
// it records r as a bad request, answers it so and returns false.
func (s *Server) decode(w http.ResponseWriter, r *Request, api API, req any) bool {
	err := json.Unmarshal(r.Body, req)
	if err != nil {
		r.API, r.Answer.Status = api, http.StatusBadRequest
		s.record(*r)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "modelserver: "+err.Error())
	}
	return err == nil
}

// writeError answers an error in the Anthropic shape, which Codex reads
// too: {"type":"error","error":{"type":..., "message":...}}.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": msg},
	})
}

// writeJSON answers v as JSON with status 200.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
}

// start sends the header of an event stream.
func (e sse) start() {
	e.w.Header().Set("Content-Type", "text/event-stream")
	e.w.Header().Set("Cache-Control", "no-cache")
	e.w.WriteHeader(http.StatusOK)
}

// event sends one event of type name with data as its JSON.
func (e sse) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err) // data is built by this package from JSON-safe values
	}
	io.WriteString(e.w, "event: "+name+"\ndata: ")
	e.w.Write(b)
	io.WriteString(e.w, "\n\n")
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// joinText joins non-empty texts with line breaks.
func joinText(parts []string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n")
}
