package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/goconst"
)

// declaredCodes returns every constant of type Code the root package
// declares, read from its source, so that a new code cannot miss the
// mapping table below.
func declaredCodes(t *testing.T) map[fleetstate.Code]string {
	t.Helper()
	values, err := goconst.Values("..", "Code")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[fleetstate.Code]string{}
	for v, name := range values {
		codes[fleetstate.Code(v)] = name
	}
	if len(codes) < 20 {
		t.Fatalf("found %d codes in the root package; the parse lost some", len(codes))
	}
	return codes
}

// decodeResult checks the common shape of an error result and returns its
// body.
func decodeResult(t *testing.T, res *mcp.CallToolResult) errorBody {
	t.Helper()
	if !res.IsError {
		t.Fatalf("IsError false; want true")
	}
	raw, ok := res.StructuredContent.(json.RawMessage)
	if !ok {
		t.Fatalf("structured content %T; want json.RawMessage", res.StructuredContent)
	}
	var keys map[string]any
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Errorf("structured content %s; want exactly error and message", raw)
	}
	var body errorBody
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%d contents; want 1", len(res.Content))
	}
	if text, ok := res.Content[0].(mcp.TextContent); !ok || text.Text != string(raw) {
		t.Errorf("text content %v; want %s", res.Content[0], raw)
	}
	return body
}

// TestErrorResultEveryCode maps every code of the root package, bare and
// wrapped, onto {error: CODE, message}.
func TestErrorResultEveryCode(t *testing.T) {
	declared := declaredCodes(t)
	table := []struct {
		code fleetstate.Code
		want string // the wire code
	}{
		{fleetstate.CodeNoActiveSession, "ERR_NO_ACTIVE_SESSION"},
		{fleetstate.CodeFileExists, "ERR_FILE_EXISTS"},
		{fleetstate.CodeCanOnlyRetrieveFiles, "ERR_CAN_ONLY_RETRIEVE_FILES"},
		{fleetstate.CodeSessionNotValid, "ERR_SESSION_NOT_VALID"},
		{fleetstate.CodeAgentNotValid, "ERR_AGENT_NOT_VALID"},
		{fleetstate.CodeFileNotFound, "ERR_FILE_NOT_FOUND"},
		{fleetstate.CodeInvalidAgentName, "ERR_INVALID_AGENT_NAME"},
		{fleetstate.CodeInvalidFileName, "ERR_INVALID_FILE_NAME"},
		{fleetstate.CodeInvalidSessionName, "ERR_INVALID_SESSION_NAME"},
		{fleetstate.CodeContentTooLarge, "ERR_CONTENT_TOO_LARGE"},
		{fleetstate.CodePathConflict, "ERR_PATH_CONFLICT"},
		{fleetstate.CodePathEscape, "ERR_PATH_ESCAPE"},
		{fleetstate.CodeUnavailable, "ERR_UNAVAILABLE"},
		{fleetstate.CodeInternal, "ERR_INTERNAL"},
		{fleetstate.CodeUnknownMember, "ERR_UNKNOWN_MEMBER"},
		{fleetstate.CodeUnknownTurn, "ERR_UNKNOWN_TURN"},
		{fleetstate.CodeUnknownTicket, "ERR_UNKNOWN_TICKET"},
		{fleetstate.CodeNoOpenTurn, "ERR_NO_OPEN_TURN"},
		{fleetstate.CodeNoPendingQuestion, "ERR_NO_PENDING_QUESTION"},
		{fleetstate.CodeQuestionPending, "ERR_QUESTION_PENDING"},
		{fleetstate.CodeTicketOpen, "ERR_TICKET_OPEN"},
		{fleetstate.CodeNotPermitted, "ERR_NOT_PERMITTED"},
		{fleetstate.CodeInvalidArgument, "ERR_INVALID_ARGUMENT"},
		{fleetstate.CodeClosed, "ERR_CLOSED"},
		{fleetstate.CodeMemberGone, "ERR_MEMBER_GONE"},
		{fleetstate.CodeFleetOwned, "ERR_FLEET_OWNED"},
		{fleetstate.CodeTurnCancelled, "ERR_TURN_CANCELLED"},
		{fleetstate.CodeSuperseded, "ERR_SUPERSEDED"},
		{fleetstate.CodeCancelled, "ERR_CANCELLED"},
		{fleetstate.CodeUnknownRequest, "ERR_UNKNOWN_REQUEST"},
		{fleetstate.CodeRequestDecided, "ERR_REQUEST_DECIDED"},
		{fleetstate.CodeDecisionUnconfirmed, "ERR_DECISION_UNCONFIRMED"},
		{fleetstate.CodeBudgetExhausted, "ERR_BUDGET_EXHAUSTED"},
	}
	covered := map[fleetstate.Code]bool{}
	for _, tc := range table {
		covered[tc.code] = true
		t.Run(string(tc.code), func(t *testing.T) {
			if string(tc.code) != tc.want {
				t.Errorf("code %q; want the wire string %q", tc.code, tc.want)
			}
			base := &fleetstate.Error{Code: tc.code, Op: "op", Err: errors.New("detail")}
			for name, err := range map[string]error{
				"bare":      base,
				"no detail": &fleetstate.Error{Code: tc.code},
				"wrapped":   fmt.Errorf("mcpadapter: context: %w", base),
				"sentinel":  fmt.Errorf("x: %w", &fleetstate.Error{Code: tc.code, Op: "o"}),
			} {
				body := decodeResult(t, ErrorResult(err))
				if string(body.Error) != tc.want {
					t.Errorf("%s: error %s; want %s", name, body.Error, tc.want)
				}
				if body.Message == "" {
					t.Errorf("%s: empty message", name)
				}
				if tc.code != fleetstate.CodeInternal && body.Message != err.Error() {
					t.Errorf("%s: message %q; want %q", name, body.Message, err.Error())
				}
			}
			if body := decodeResult(t, ErrorResult(base)); !strings.Contains(body.Message, "detail") {
				t.Errorf("message %q lost the detail", body.Message)
			}
		})
	}
	var missing []string
	for c, name := range declared {
		if !covered[c] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("codes missing from the table: %v", missing)
	}
	for c := range covered {
		if _, ok := declared[c]; !ok {
			t.Errorf("table code %s is not declared by the root package", c)
		}
	}
}

// TestErrorResultOtherErrors: errors without a code are ERR_INTERNAL with
// a message that reveals nothing of the host; a caller that gave up is
// said to have given up.
func TestErrorResultOtherErrors(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		code     fleetstate.Code
		message  string // exact, or "" to skip
		contains string
	}{
		{"plain error with a path", errors.New("open /home/me/.ai-fleet-state/x: permission denied"),
			fleetstate.CodeInternal, "fleetstate: internal error", ""},
		{"wrapped internal without the package prefix", fmt.Errorf("open /srv/state: %w", &fleetstate.Error{Code: fleetstate.CodeInternal}),
			fleetstate.CodeInternal, "fleetstate: internal error", ""},
		{"internal from the store keeps its relative detail", &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "get", Err: errors.New("read current_run.txt: is a directory")},
			fleetstate.CodeInternal, "fleetstate: get: internal error: read current_run.txt: is a directory", ""},
		{"cancelled", context.Canceled, fleetstate.CodeCancelled, "", "cancelled"},
		{"cancelled, wrapped", fmt.Errorf("wait: %w", context.Canceled), fleetstate.CodeCancelled, "", "cancelled"},
		{"deadline", context.DeadlineExceeded, fleetstate.CodeCancelled, "", "deadline"},
		{"a backend's own bound keeps its code", &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "persist turn", Err: fmt.Errorf("nats: %w", context.DeadlineExceeded)},
			fleetstate.CodeUnavailable, "", "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := decodeResult(t, ErrorResult(tc.err))
			if body.Error != tc.code {
				t.Errorf("error %s; want %s", body.Error, tc.code)
			}
			if tc.message != "" && body.Message != tc.message {
				t.Errorf("message %q; want %q", body.Message, tc.message)
			}
			if !strings.Contains(body.Message, tc.contains) {
				t.Errorf("message %q; want it to say %q", body.Message, tc.contains)
			}
			if strings.Contains(body.Message, "/home") || strings.Contains(body.Message, "/srv") {
				t.Errorf("message %q names a host path", body.Message)
			}
		})
	}
}

// TestResultUnencodable: a value that cannot be encoded becomes an
// ERR_INTERNAL error result, not a handler error.
func TestResultUnencodable(t *testing.T) {
	body := decodeResult(t, result(map[string]any{"c": make(chan int)}, false))
	if body.Error != fleetstate.CodeInternal {
		t.Errorf("error %s; want ERR_INTERNAL", body.Error)
	}
}

// TestDecodeArgsNotFromTheWire: arguments a Go caller set as raw JSON, not
// decoded by mcp-go, get the same exact checks.
func TestDecodeArgsNotFromTheWire(t *testing.T) {
	fields := []field{
		{name: "content", kind: "string", required: true},
		{name: "overwrite", kind: "boolean"},
	}
	type args struct {
		Content   *string `json:"content"`
		Overwrite *bool   `json:"overwrite"`
	}
	tests := []struct {
		name string
		in   any
		ok   bool
	}{
		{"raw ok", json.RawMessage(`{"content":"x"}`), true},
		{"raw other case", json.RawMessage(`{"Content":"x"}`), false},
		{"raw null", json.RawMessage(`{"content":"x","overwrite":null}`), false},
		{"raw unknown", json.RawMessage(`{"content":"x","y":1}`), false},
		{"struct ok", struct {
			Content string `json:"content"`
		}{"x"}, true},
		{"map ok", map[string]any{"content": "x", "overwrite": true}, true},
		{"map other case", map[string]any{"CONTENT": "x"}, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := mcp.CallToolRequest{}
			req.Params.Arguments = tc.in
			err := decodeArgs(req, fields, new(args))
			if tc.ok && err != nil {
				t.Errorf("decodeArgs: %v; want nil", err)
			}
			if !tc.ok && fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
				t.Errorf("decodeArgs: %v; want ERR_INVALID_ARGUMENT", err)
			}
		})
	}
}
