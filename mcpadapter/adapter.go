// Package mcpadapter serves a fleetstate [fleetstate.Store] and
// [fleetstate.Rendezvous] as MCP tools with github.com/mark3labs/mcp-go.
//
// The store tools (new_session, get_session, clean_sessions, put, get,
// list) keep the names, arguments and error codes of fleet-state-mgr. The
// fleet tools (fleet_send, fleet_next, fleet_ask, fleet_reply, fleet_poll,
// fleet_ack, fleet_members) expose the rendezvous. Every result carries
// structured content, repeated as JSON text for clients that read text
// only; every failure is a result with isError set and structured content
// {error: CODE, message}.
//
// The caller's [Identity] comes from the context (see
// [ContextWithIdentity]); the role it needs is checked before its
// arguments.
//
// The adapter is a projection of the library: each tool decodes its
// arguments, makes one call of the store or the rendezvous, and encodes the
// result; bounds, enumerations and policy (such as making a member of an
// unknown caller: [fleetstate.RendezvousOptions].AddOnReady) are the
// library's. [Client] is the other side, for Go programs: one typed method
// per tool.
package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/mcpwire"
)

// DefaultProgressInterval is how often a blocked tool call sends
// notifications/progress to a client that gave a progress token.
const DefaultProgressInterval = 5 * time.Second

// Options configure an [Adapter]. A nil *Options means the defaults.
type Options struct {
	// RolesConfigured reports whether callers have roles: tokens exist, or
	// the stdio server runs as a named agent. While it reports false,
	// anonymous callers may start and clean sessions, as with
	// fleet-state-mgr. Nil means false.
	RolesConfigured func() bool
	// ProgressInterval is the period of progress notifications. Zero
	// means DefaultProgressInterval.
	ProgressInterval time.Duration
	// MarkReady makes every call of a member, once its role is checked,
	// mark it ready in the rendezvous ([fleetstate.Rendezvous.SetReady]):
	// a member is known from its token but not ready until it has
	// mounted, and a member whose process died is ready again once its
	// new process calls. A rendezvous with
	// [fleetstate.RendezvousOptions].AddOnReady makes a member of a caller
	// it did not know.
	MarkReady bool
	// Resync, if not nil, brings the rendezvous's members up to date with
	// the tokens at once (daemon/auth's Membership.Resync). A call that names a member
	// the rendezvous does not know calls it, and is made once more before
	// it answers ERR_UNKNOWN_MEMBER: an agent whose member token was added
	// a moment ago, by another process, is a member for the very next
	// call, not from the membership's next look.
	Resync func()
	// FleetElsewhere, when the adapter has no rendezvous, still lists the
	// fleet tools, and each call of one (by a caller whose role allows
	// it) answers this error: for a server beside the daemon that owns the
	// fleet, telling the caller where to reach it. Nil leaves the fleet
	// tools out.
	FleetElsewhere error
	// Connections, if set with a rendezvous, follows the MCP sessions of
	// the callers (daemon/mcphttp's, for streamable HTTP and stdio alike),
	// so that a member's newer session supersedes its older one, a
	// member whose session ends is disconnected, and a lead's next call
	// on a session releases the outcomes returned on it. Nil: no call is
	// told apart by its session.
	Connections Connections
	// LeadsDecide lets leads decide the members' permission requests
	// (fleet_approve) and see them in fleet_members, as the fleet file's
	// approvals say; it is asked at each call. Nil, or false, makes
	// fleet_approve answer ERR_NOT_PERMITTED.
	LeadsDecide func() bool
}

// Connections follows the MCP sessions of a server's callers for the
// adapter's tool calls (see [Options].Connections). sid is the caller's
// MCP session, "" for a call without one.
type Connections interface {
	// Claim lets session sid of member make a fleet call, or refuses it
	// (ERR_SUPERSEDED, say).
	Claim(ctx context.Context, member, sid string) error
	// Received is told of each call of lead on session sid but fleet_poll:
	// what earlier calls on sid returned arrived. ticket is the ticket the
	// call itself names, if any.
	Received(sid, lead, ticket string)
	// ReturnedTo is told of each outcome a call of a lead on session sid
	// returned.
	ReturnedTo(sid string, o fleetstate.Outcome)
	// Hooks are the session hooks of the server that serves the tools
	// (see [Adapter.NewServer]).
	Hooks() *server.Hooks
}

// Adapter maps a store and a rendezvous onto MCP tools. It is safe for
// concurrent use.
type Adapter struct {
	store  *fleetstate.Store
	rv     *fleetstate.Rendezvous
	opt    Options
	tools  []tool
	byName map[string]*tool // the tools, for the fast paths
	conns  Connections      // nil without a rendezvous or Options.Connections
	direct atomic.Int64     // calls a fast path (stdio or HTTP) served itself, for tests
}

// New returns an adapter for store and rv. rv may be nil: the fleet tools
// are then not served.
func New(store *fleetstate.Store, rv *fleetstate.Rendezvous, opts *Options) *Adapter {
	a := &Adapter{store: store, rv: rv}
	if opts != nil {
		a.opt = *opts
	}
	if a.opt.ProgressInterval <= 0 {
		a.opt.ProgressInterval = DefaultProgressInterval
	}
	a.tools = a.storeTools()
	switch {
	case rv != nil:
		a.tools = append(a.tools, a.fleetTools()...)
		a.conns = a.opt.Connections
	case a.opt.FleetElsewhere != nil:
		for _, t := range a.fleetTools() {
			t.call = func(context.Context, Identity, any) (any, error) { return nil, a.opt.FleetElsewhere }
			a.tools = append(a.tools, t)
		}
	}
	a.byName = make(map[string]*tool, len(a.tools))
	for i := range a.tools {
		t := &a.tools[i]
		t.wire = wireTool(t.input, t.newArgs)
		a.byName[t.name] = t
	}
	return a
}

// Tools returns the tools for registration on an MCP server.
func (a *Adapter) Tools() []server.ServerTool {
	out := make([]server.ServerTool, len(a.tools))
	for i, t := range a.tools {
		out[i] = server.ServerTool{Tool: t.mcpTool(), Handler: a.handler(t)}
	}
	return out
}

// NewServer returns an MCP server with the adapter's tools registered.
// With a rendezvous, the server's session hooks tell it when a member's
// session ends (see [fleetstate.Rendezvous.Disconnect]); an option
// server.WithHooks among opts replaces those hooks.
func (a *Adapter) NewServer(name, version string, opts ...server.ServerOption) *server.MCPServer {
	base := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions(Instructions),
	}
	if a.conns != nil {
		base = append(base, server.WithHooks(a.conns.Hooks()))
	}
	opts = append(base, opts...)
	s := server.NewMCPServer(name, version, opts...)
	s.AddTools(a.Tools()...)
	return s
}

// Instructions is what the server tells a client of its tools at
// initialization, the daemon's and a proxy's alike.
const Instructions = `fleetstate keeps files per session and agent (put, get, list) and lets a lead hand work to member agents (fleet_* tools). ` +
	`A lead delegates with fleet_send and collects detached work with fleet_poll/fleet_ack; a member takes work with fleet_next, asks with fleet_ask and answers with fleet_reply.`

// access says who may call a tool.
type access int

const (
	anyone    access = iota // every caller, anonymous too
	lifecycle               // a lead, or anyone while no roles are configured
	leadOnly
	memberOnly
)

// tool is one MCP tool: its contract and its handler.
type tool struct {
	name        string
	description string
	access      access
	input       []field // the arguments, all of them strings, booleans or numbers
	output      map[string]any
	annotations mcp.ToolAnnotation
	// call decodes nothing: args were decoded strictly into a fresh
	// value by newArgs.
	newArgs func() any
	wire    mcpwire.Tool // what the fast paths read its arguments with
	call    func(ctx context.Context, id Identity, args any) (any, error)
}

// handler wraps a tool for mcp-go: see [Adapter.invoke].
func (a *Adapter) handler(t tool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return a.callTool(ctx, &t, req, server.ServerFromContext(ctx)), nil
	}
}

// callTool runs t for req on srv: see [Adapter.invoke]. Its result is
// the tool's, or the failure's (see [ErrorResult]).
func (a *Adapter) callTool(ctx context.Context, t *tool, req mcp.CallToolRequest, srv *server.MCPServer) *mcp.CallToolResult {
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	out, err := a.invoke(ctx, t, nil, func(args any) error { return decodeArgs(req, t.input, args) }, srv, token)
	if err != nil {
		return ErrorResult(err)
	}
	return result(out, false)
}

// invoke calls t for the caller of ctx: identity and role first, then the
// arguments, then the call. args are the arguments already decoded (by
// a fast path), or nil to have decode decode them into a fresh
// value of t.newArgs. A non-nil error is the failure the result carries
// (see [ErrorResult]). While the call blocks, srv sends progress
// notifications for token, if the client gave one.
func (a *Adapter) invoke(ctx context.Context, t *tool, args any, decode func(any) error, srv *server.MCPServer, token mcp.ProgressToken) (any, error) {
	id := IdentityFromContext(ctx)
	if err := a.permit(*t, id); err != nil {
		return nil, err
	}
	if t.access == memberOnly && a.conns != nil {
		if err := a.conns.Claim(ctx, id.Agent, sessionID(ctx)); err != nil {
			return nil, err
		}
	}
	a.markReady(id)
	if args == nil {
		args = t.newArgs()
		if err := decode(args); err != nil {
			return nil, err
		}
	}
	var receipt string
	if t.access == leadOnly && a.conns != nil && t.name != "fleet_poll" {
		// A poll shows what was returned, and keeps it: a lead that
		// lost a response looks for it there.
		if receipt = sessionID(ctx); receipt != "" {
			a.conns.Received(receipt, id.Agent, ticketArg(args))
		}
	}
	stop := StartProgress(ctx, srv, token, a.opt.ProgressInterval)
	out, err := t.call(ctx, id, args)
	if fleetstate.CodeOf(err) == fleetstate.CodeUnknownMember && a.opt.Resync != nil {
		// A member the rendezvous did not know changed nothing: the
		// call is made again once the tokens were looked at.
		a.opt.Resync()
		a.markReady(id)
		out, err = t.call(ctx, id, args)
	}
	stop()
	if err != nil {
		return nil, err
	}
	if o, ok := out.(fleetstate.Outcome); ok && receipt != "" && ctx.Err() == nil {
		a.conns.ReturnedTo(receipt, o)
	}
	return out, nil
}

// sessionID returns the MCP session of a call, or "" without one.
func sessionID(ctx context.Context) string {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}

// DirectCalls returns how many tool calls a fast path (ServeStdio's or
// [FastCalls]) served itself: for tests that tell the two paths apart.
func (a *Adapter) DirectCalls() int64 { return a.direct.Load() }

// mayDecide reports whether id may see and decide permission requests:
// the operator (the lead [OperatorAgent], as the operator token calls the
// tools; only the operator can issue a token of that name) always, other
// leads where Options.LeadsDecide.
func (a *Adapter) mayDecide(id Identity) bool {
	if id.Role != RoleLead || id.Anonymous() {
		return false
	}
	return id.Agent == OperatorAgent || a.opt.LeadsDecide != nil && a.opt.LeadsDecide()
}

// markReady marks a member that calls ready, with Options.MarkReady.
func (a *Adapter) markReady(id Identity) {
	if a.opt.MarkReady && a.rv != nil && id.Role == RoleMember && !id.Anonymous() {
		// An unknown member's own call says what is wrong with it.
		_ = a.rv.SetReady(id.Agent, true)
	}
}

// ticketArg returns the ticket a call's arguments name, if any.
func ticketArg(args any) string {
	var tk *string
	switch a := args.(type) {
	case *ackArgs:
		tk = a.Ticket
	case *cancelArgs:
		tk = a.Ticket
	}
	if tk == nil {
		return ""
	}
	return *tk
}

func (a *Adapter) permit(t tool, id Identity) error {
	// A caller that names no agent is anonymous whatever role it claims.
	role := id.Role
	if id.Anonymous() {
		role = ""
	}
	ok := false
	switch t.access {
	case anyone:
		ok = true
	case lifecycle:
		ok = role == RoleLead || (id.Anonymous() && (a.opt.RolesConfigured == nil || !a.opt.RolesConfigured()))
	case leadOnly:
		ok = role == RoleLead
	case memberOnly:
		ok = role == RoleMember
	}
	if ok {
		return nil
	}
	who := "an anonymous caller"
	if !id.Anonymous() {
		who = string(id.Role) + " " + id.Agent
		if id.Role == "" {
			who = id.Agent
		}
	}
	need := map[access]string{lifecycle: "the lead", leadOnly: "the lead", memberOnly: "a member"}[t.access]
	return &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: t.name,
		Err: errors.New(who + " may not call " + t.name + "; only " + need + " may")}
}

// StartProgress makes srv send notifications/progress every interval while
// a call blocks, if the client asked for them with a progress token. The
// returned stop ends the goroutine and waits for it.
func StartProgress(ctx context.Context, srv *server.MCPServer, token mcp.ProgressToken, interval time.Duration) (stop func()) {
	if token == nil || srv == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
					"progressToken": token,
					"progress":      n,
					"message":       "still waiting",
				})
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// result returns a tool result whose structured content is v, repeated as
// JSON text. v is marshalled once.
func result(v any, isError bool) *mcp.CallToolResult {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(errorBody{Error: fleetstate.CodeInternal, Message: "mcpadapter: encode result: " + err.Error()})
		isError = true
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(string(data))},
		StructuredContent: json.RawMessage(data),
		IsError:           isError,
	}
}

type errorBody struct {
	Error   fleetstate.Code `json:"error"`
	Message string          `json:"message"`
}

// ErrorResult maps any error onto a result with isError set and the
// structured content {error: CODE, message}. Codes come from
// [fleetstate.CodeOf]; a context error, which the library returns bare,
// means the caller gave up: [fleetstate.CodeCancelled]. A caller that gave
// up is usually gone and reads no result; what its call started goes on
// (a send's turn stays on its ticket).
func ErrorResult(err error) *mcp.CallToolResult {
	return result(errorBodyOf(err), true)
}

// errorBodyOf is the structured content of the failure result of err.
func errorBodyOf(err error) errorBody {
	// Only a bare context error is the caller's: one a code was given to
	// (a backend call cut by its own bound: ERR_UNAVAILABLE) keeps it.
	var coded *fleetstate.Error
	switch {
	case errors.As(err, &coded):
	case errors.Is(err, context.Canceled):
		err = &fleetstate.Error{Code: fleetstate.CodeCancelled, Err: errors.New("the call was cancelled")}
	case errors.Is(err, context.DeadlineExceeded):
		err = &fleetstate.Error{Code: fleetstate.CodeCancelled, Err: errors.New("the call's deadline passed")}
	}
	code := fleetstate.CodeOf(err)
	msg := err.Error()
	if code == fleetstate.CodeInternal && !strings.HasPrefix(msg, "fleetstate:") {
		msg = "fleetstate: internal error"
	}
	return errorBody{Error: code, Message: msg}
}
