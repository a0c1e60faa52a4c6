// Package permission serves the daemon's permission endpoints: /permission,
// where an agent's PermissionRequest hook raises a request and waits for
// its decision, and /permissions, where the operator (or a lead, where the
// fleet file lets leads decide) lists the requests and decides them. It
// also holds the hook's wire types.
package permission

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/door"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// Paths of the permission requests.
const (
	// Path is where an agent's PermissionRequest hook raises a
	// request, with the agent's bearer token.
	Path = "/permission"
	// RequestsPath lists the pending requests (GET), and decides one
	// (POST RequestsPath/ID): for the operator, and for leads where
	// [Options].LeadsDecide.
	RequestsPath = "/permissions"
)

// maxPermissionBody bounds the body of a request to the permission
// handlers: a tool's input is a command or a path, not a file.
const maxPermissionBody = 1 << 20

// Options configure [NewHandler].
type Options struct {
	// Tokens identifies the agents that raise requests, and leads.
	Tokens *auth.Tokens
	// Operator is the daemon's operator token: its bearer decides as
	// "operator". Empty means none.
	Operator string
	// LeadsDecide lets a lead's bearer token list and decide requests,
	// as the fleet file's approvals say.
	LeadsDecide bool
	// Authorize, if set, is another way to decide, such as a dashboard's
	// login cookie with its CSRF check: it returns who decides ("operator"
	// or a lead's name) and whether the request may. It is asked before
	// the bearer token.
	Authorize func(*http.Request) (by string, ok bool)
}

// HookRequest is the body of a POST to [Path]: what Claude
// Code and Codex hand their PermissionRequest hook, with the hook's own
// key and bound.
type HookRequest struct {
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
	Cwd       string          `json:"cwd,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	// Key names the request across the hook's retries.
	Key string `json:"key,omitempty"`
	// TimeoutMS is the request's window in milliseconds; zero means
	// fleetstate.DefaultPermissionTimeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// HookDecision is the answer of [Path] to a decided request.
type HookDecision struct {
	Decision fleetstate.Decision `json:"decision"`
}

// DecideBody is the body of a POST to RequestsPath/ID.
type DecideBody struct {
	Behavior fleetstate.Behavior `json:"behavior"`
	Message  string              `json:"message,omitempty"`
}

// NewHandler serves rv's permission requests over HTTP:
//
//   - POST [Path] with an agent's bearer token and a
//     [HookRequest] raises the agent's request and waits, at most for the
//     request's window, for the decision: 200 with a [HookDecision], or
//     204 when the window passed undecided.
//   - GET [RequestsPath] lists the pending requests.
//   - POST RequestsPath/ID with a [DecideBody] decides one: 204, or an
//     error {error: CODE, message} with 404 for ERR_UNKNOWN_REQUEST, 409
//     for ERR_REQUEST_DECIDED, 400 for bad input, and 202 for
//     ERR_DECISION_UNCONFIRMED: the decision may have taken effect, takes
//     effect once its write goes through, and no other is taken.
//
// Listing and deciding take the operator token, a lead's token where
// LeadsDecide, or what [Options].Authorize admits.
func NewHandler(rv *fleetstate.Rendezvous, o Options) http.Handler {
	mux := http.NewServeMux()
	h := &permissionHandler{rv: rv, o: o}
	mux.HandleFunc("POST "+Path, h.raise)
	mux.HandleFunc("GET "+RequestsPath, h.list)
	mux.HandleFunc("POST "+RequestsPath+"/{id}", h.decide)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if door.Rebound(r) {
			http.Error(w, "forbidden: the Host or Origin of this request is not local", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type permissionHandler struct {
	rv *fleetstate.Rendezvous
	o  Options
}

// raise serves an agent's hook.
func (h *permissionHandler) raise(w http.ResponseWriter, r *http.Request) {
	token, ok := door.Bearer(r.Header.Get("Authorization"))
	var id mcpadapter.Identity
	if ok && h.o.Tokens != nil {
		id, ok = h.o.Tokens.Lookup(token)
	}
	if !ok || id.Anonymous() {
		door.Unauthorized(w, "a permission request needs the agent's bearer token")
		return
	}
	var in HookRequest
	if err := readJSON(r, &in); err != nil {
		door.WriteError(w, err)
		return
	}
	req := fleetstate.PermissionRequest{Key: in.Key, Tool: in.ToolName, Input: string(in.ToolInput), Cwd: in.Cwd,
		Timeout: time.Duration(in.TimeoutMS) * time.Millisecond}
	if in.TimeoutMS < 0 || in.TimeoutMS > int64(fleetstate.MaxPermissionTimeout/time.Millisecond) {
		door.WriteError(w, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "request permission", Err: errors.New("timeout_ms out of range")})
		return
	}
	d, decided, err := h.rv.RequestPermission(r.Context(), id.Agent, req)
	switch {
	case err != nil:
		if r.Context().Err() != nil {
			return // the hook went: nobody reads an answer
		}
		door.WriteError(w, err)
	case !decided:
		w.WriteHeader(http.StatusNoContent)
	default:
		door.WriteJSON(w, http.StatusOK, HookDecision{Decision: d})
	}
}

// list serves the pending requests.
func (h *permissionHandler) list(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.decider(r); !ok {
		door.Unauthorized(w, "the permission requests are for the operator, or a lead where the fleet file lets leads decide")
		return
	}
	reqs := h.rv.PermissionRequests()
	if reqs == nil {
		reqs = []fleetstate.PermissionRequest{}
	}
	door.WriteJSON(w, http.StatusOK, map[string]any{"permissions": reqs})
}

// decide serves a decision.
func (h *permissionHandler) decide(w http.ResponseWriter, r *http.Request) {
	by, ok := h.decider(r)
	if !ok {
		door.Unauthorized(w, "deciding a permission request takes the operator, or a lead where the fleet file lets leads decide")
		return
	}
	var in DecideBody
	if err := readJSON(r, &in); err != nil {
		door.WriteError(w, err)
		return
	}
	if err := h.rv.DecidePermission(by, r.PathValue("id"), fleetstate.Decision{Behavior: in.Behavior, Message: in.Message}); err != nil {
		door.WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decider returns who r decides as, if it may.
func (h *permissionHandler) decider(r *http.Request) (string, bool) {
	if h.o.Authorize != nil {
		if by, ok := h.o.Authorize(r); ok {
			return by, true
		}
	}
	token, ok := door.Bearer(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	if h.o.Operator != "" && subtle.ConstantTimeCompare([]byte(token), []byte(h.o.Operator)) == 1 {
		return "operator", true
	}
	if !h.o.LeadsDecide || h.o.Tokens == nil {
		return "", false
	}
	id, found := h.o.Tokens.Lookup(token)
	if !found || id.Role != mcpadapter.RoleLead || id.Anonymous() {
		return "", false
	}
	return id.Agent, true
}

// readJSON decodes r's body, of at most maxPermissionBody bytes, into v.
func readJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "read request", Err: errors.New("the body must be application/json")}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPermissionBody+1))
	if err != nil {
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "read request", Err: err}
	}
	if len(body) > maxPermissionBody {
		return &fleetstate.Error{Code: fleetstate.CodeContentTooLarge, Op: "read request", Err: errors.New("body over 1 MiB")}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(v); err != nil || door.EndOfJSON(dec) != nil {
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "read request", Err: errors.New("the body is not the JSON object expected")}
	}
	return nil
}
