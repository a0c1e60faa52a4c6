// Package proxy is fleetstate mcp --connect: a stdio MCP server beside an
// agent that mirrors the tools of the daemons it is given and forwards
// every call with the agent's token, moving to the next daemon when one
// goes and sending again only what is safe to send twice.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The proxy's bounds, each a field of [Options] whose zero value means
// the default here.
const (
	// DefaultConnectTimeout bounds one attempt to connect to a
	// daemon: the handshake, the tool list and the listening stream. A
	// daemon that answers at all answers within milliseconds on a LAN; a
	// host that swallows packets must not hold the agent's calls longer.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultListenWait bounds how long a new connection waits for
	// its listening stream before it serves anyway: the stream is what
	// tells the daemon that the agent is there, so calls wait for it, but
	// a daemon that offers no stream costs only this wait.
	DefaultListenWait = 5 * time.Second
	// DefaultCallWait bounds how long a call waits for a daemon while
	// the proxy reconnects. A call answers ERR_UNAVAILABLE sooner, as soon
	// as one round over every URL has failed.
	DefaultCallWait = 10 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait
	// between two rounds of attempts while every daemon is down: the wait
	// doubles from the first to the second. A call made meanwhile starts
	// the next round at once, so an agent sees a restarted daemon on its
	// next call, and the cap only bounds the background retries.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Options configure [NewFailover]. A nil *Options means
// the defaults.
type Options struct {
	// Version is the proxy's version in its MCP handshakes.
	Version string
	// ConnectTimeout, ListenWait, CallWait, MinBackoff and MaxBackoff are
	// the bounds of the Default* constants of the same names; zero means
	// the default.
	ConnectTimeout time.Duration
	ListenWait     time.Duration
	CallWait       time.Duration
	MinBackoff     time.Duration
	MaxBackoff     time.Duration
	// Logger receives a line for every daemon lost and every daemon
	// connected; nil means none.
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	r := Options{}
	if o != nil {
		r = *o
	}
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&r.ConnectTimeout, DefaultConnectTimeout)
	set(&r.ListenWait, DefaultListenWait)
	set(&r.CallWait, DefaultCallWait)
	set(&r.MinBackoff, DefaultMinBackoff)
	set(&r.MaxBackoff, DefaultMaxBackoff)
	r.MaxBackoff = max(r.MaxBackoff, r.MinBackoff)
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// Proxy is an MCP server whose tools forward every call to a fleetstate
// daemon over streamable HTTP, for MCP clients that speak only stdio. The
// caller's identity is the daemon's token, not anything the client says.
//
// A proxy of several URLs (daemons of one fleet) fails over between them:
// when its daemon is lost (its connection refused or reset, its listening
// stream ended, an HTTP 5xx, or its session unknown after a restart) it
// connects to the next URL, round-robin, and goes on serving its client
// over the same session. A call in flight at that moment is sent again to
// the next daemon only if it cannot have had an effect: the daemon never
// got it, or the tool is read-only by the daemon's own annotations.
// Otherwise it returns ERR_UNAVAILABLE, since it may or may not have taken
// effect. While no daemon answers, calls return ERR_UNAVAILABLE and the
// proxy keeps trying in the background. A proxy of one URL reconnects the
// same way to a restarted daemon.
//
// A Proxy is safe for concurrent use.
type Proxy struct {
	urls     []string
	token    string
	o        Options
	srv      *server.MCPServer
	progress time.Duration

	kick chan struct{} // capacity 1: a call asks the supervisor for a round now
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu      sync.Mutex
	cur     *link               // guarded by mu; nil while no daemon is connected
	next    int                 // guarded by mu; the index in urls of the next URL to try
	failed  uint64              // guarded by mu; counts the rounds in which every URL failed
	lastErr error               // guarded by mu; why the last attempt failed
	changed chan struct{}       // guarded by mu; closed and replaced when cur or failed change
	tools   map[string]mcp.Tool // guarded by mu; the daemon's tools, mirrored
	closed  bool                // guarded by mu
	// took is the turn the last fleet_next through the proxy returned,
	// "" before any: every later fleet_next names it (after_turn).
	took string // guarded by mu
}

// New connects to the daemon at url with token and mirrors its tools.
// It is [NewFailover] of one URL with the default bounds.
//
// The proxy holds a listening stream open to the daemon for as long as it
// runs: when the proxy's process ends, however it ends, the stream closes
// and the daemon knows that the agent behind it is gone. Closing the proxy
// also ends its session.
func New(ctx context.Context, url, token, version string) (*Proxy, error) {
	return NewFailover(ctx, []string{url}, token, &Options{Version: version})
}

// NewFailover connects to the first of urls that answers, daemons of
// one fleet each accepting token, and mirrors its tools. If none answers,
// it returns the error of the first. The proxy's connection, and its
// background reconnections, outlive ctx; Close ends them.
func NewFailover(ctx context.Context, urls []string, token string, o *Options) (*Proxy, error) {
	if len(urls) == 0 {
		return nil, errors.New("mcpadapter: proxy: no daemon URL")
	}
	p := &Proxy{
		urls:     append([]string(nil), urls...),
		token:    token,
		o:        o.withDefaults(),
		progress: mcpadapter.DefaultProgressInterval,
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		changed:  make(chan struct{}),
	}
	var first error
	for i, url := range p.urls {
		l, tools, err := p.dial(ctx, url)
		if err == nil {
			p.srv = server.NewMCPServer("fleetstate", p.o.Version, server.WithToolCapabilities(true), server.WithRecovery(),
				server.WithInstructions(mcpadapter.Instructions))
			p.next = (i + 1) % len(p.urls)
			p.install(l, tools)
			p.wg.Add(1)
			go p.supervise()
			return p, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, first
}

// Server returns the MCP server to serve, for example over stdio.
func (p *Proxy) Server() *server.MCPServer { return p.srv }

// Close disconnects from the daemon and stops reconnecting; calls in
// flight return. Close is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cur := p.cur
	p.cur = nil
	p.broadcastLocked()
	p.mu.Unlock()
	close(p.done)
	p.wg.Wait()
	if cur != nil {
		cur.close()
	}
	return nil
}

// forward sends a tool call to the current daemon. A call that cannot have
// had an effect is sent again to the next daemon if its daemon is lost
// meanwhile, at most once per URL and then once more (a round and a
// restart of the first); any other call lost with its daemon answers
// ERR_UNAVAILABLE.
func (p *Proxy) forward(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fwd := mcp.CallToolRequest{}
	fwd.Params.Name = req.Params.Name
	if len(req.Params.RawArguments) > 0 {
		fwd.Params.Arguments = json.RawMessage(req.Params.RawArguments)
	} else {
		fwd.Params.Arguments = req.Params.Arguments
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	stop := mcpadapter.StartProgress(ctx, server.ServerFromContext(ctx), token, p.progress)
	defer stop()
	if fwd.Params.Name == "fleet_next" && p.tookAny() {
		// Named on every call, not only when sending again: a call held
		// up in a daemon and given up on, that reaches the owner after a
		// later one took work, is then refused rather than handed a
		// message nobody receives (see fleetstate.Rendezvous.NextAfter).
		fwd.Params.Arguments = p.afterTurn(fwd.Params.Arguments)
	}
	began := time.Now()
	for attempt := 0; ; attempt++ {
		l, err := p.link(ctx)
		if err != nil {
			return mcpadapter.ErrorResult(err), nil
		}
		res, err := l.c.CallTool(ctx, fwd)
		if err == nil && unavailableResult(res) && time.Since(began) < p.o.CallWait && ctx.Err() == nil {
			// A daemon forwarding to the fleet's owner lost it mid-call
			// and could not send the call on: the proxy can, if it is
			// safe, once the fleet has an owner again.
			if fwd.Params.Name == "fleet_next" {
				fwd.Params.Arguments = p.afterTurn(fwd.Params.Arguments)
			}
			if p.readOnly(fwd.Params.Name) || mcpadapter.SafeToResend(fwd.Params.Name, rawArgs(fwd.Params.Arguments)) {
				p.o.Logger.Info("fleetstate: proxy: sending the call again, the fleet's owner was lost", "tool", fwd.Params.Name)
				select {
				case <-time.After(p.o.MinBackoff):
				case <-ctx.Done():
				}
				continue
			}
		}
		if err == nil {
			p.noteTurn(fwd.Params.Name, res)
			return res, nil
		}
		var te *transport.Error
		var auth *transport.AuthorizationRequiredError
		if errors.As(err, &auth) {
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "proxy",
				Err: errors.New("the daemon refuses the token in $FLEET_TOKEN (unknown or revoked)")}), nil
		}
		if ctx.Err() != nil || (!errors.As(err, &te) && !l.isLost()) {
			// The caller gave up, or the daemon answered with a
			// JSON-RPC error: either way, not a lost daemon. (A
			// JSON-RPC error in a 5xx is a lost daemon.)
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeInternal, Op: "proxy",
				Err: fmt.Errorf("the daemon did not answer: %v", err)}), nil
		}
		l.lose(err)
		if fwd.Params.Name == "fleet_next" {
			fwd.Params.Arguments = p.afterTurn(fwd.Params.Arguments)
		}
		again := unsent(err) || p.readOnly(fwd.Params.Name) || mcpadapter.SafeToResend(fwd.Params.Name, rawArgs(fwd.Params.Arguments))
		if !again || attempt >= len(p.urls) {
			return mcpadapter.ErrorResult(lostMidCall(fwd.Params.Name)), nil
		}
		p.o.Logger.Info("fleetstate: proxy: sending the call again to the next daemon", "tool", fwd.Params.Name, "err", err)
	}
}

// unavailableResult reports whether res is an ERR_UNAVAILABLE tool error.
func unavailableResult(res *mcp.CallToolResult) bool {
	if !res.IsError {
		return false
	}
	sc, ok := res.StructuredContent.(map[string]any)
	return ok && sc["error"] == string(fleetstate.CodeUnavailable)
}

// noteTurn keeps the turn a fleet_next returned.
func (p *Proxy) noteTurn(tool string, res *mcp.CallToolResult) {
	if tool != "fleet_next" || res.IsError {
		return
	}
	msg, ok := res.StructuredContent.(map[string]any)
	if !ok {
		return
	}
	if id, ok := msg["turn_id"].(string); ok && id != "" {
		p.mu.Lock()
		p.took = id
		p.mu.Unlock()
	}
}

// tookAny reports whether a fleet_next through the proxy returned a turn.
func (p *Proxy) tookAny() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.took != ""
}

// afterTurn returns the arguments of a fleet_next to send: args
// with after_turn, the turn the member took last, unless they name one.
// Arguments it cannot read go as they are.
func (p *Proxy) afterTurn(args any) any {
	m := map[string]any{}
	if raw := rawArgs(args); len(raw) > 0 && json.Unmarshal(raw, &m) != nil {
		return args
	}
	if _, ok := m["after_turn"]; ok {
		return args
	}
	if m == nil { // the arguments were null
		m = map[string]any{}
	}
	p.mu.Lock()
	m["after_turn"] = p.took
	p.mu.Unlock()
	return m
}

// rawArgs returns a call's arguments as JSON.
func rawArgs(args any) json.RawMessage {
	if raw, ok := args.(json.RawMessage); ok {
		return raw
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil
	}
	return raw
}

// lostMidCall is the error of a call that may have reached a daemon which
// was lost before it answered.
func lostMidCall(tool string) error {
	what := "retry it if it is safe to"
	switch tool {
	case "fleet_send":
		what = "call fleet_poll to find its ticket before sending again"
	case "put":
		what = "get the file, or list the session's files, before putting it again"
	}
	return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: tool,
		Err: fmt.Errorf("the daemon was lost mid-call: the call may or may not have taken effect; the proxy has moved to another daemon, so %s", what)}
}

// unsent reports whether a failed request never reached a daemon: its
// connection was refused (or could not be made), or the daemon did not
// know its session, which it checks before anything else.
func unsent(err error) bool {
	if errors.Is(err, transport.ErrSessionTerminated) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// readOnly reports whether the daemon marks tool read-only, so that
// sending it twice does what sending it once does.
func (p *Proxy) readOnly(tool string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tools[tool]
	return ok && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
}

// link returns the connection of the current daemon. While there is none,
// it waits for the supervisor to connect one, until a whole round of
// attempts has failed, CallWait has passed or ctx is done: then the fleet
// is unavailable.
func (p *Proxy) link(ctx context.Context) (*link, error) {
	var timeout <-chan time.Time
	p.mu.Lock()
	defer p.mu.Unlock()
	failed := p.failed
	for {
		switch {
		case p.closed:
			return nil, &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "proxy", Err: errors.New("the proxy is closing")}
		case p.cur != nil && !p.cur.isLost():
			return p.cur, nil
		case p.failed != failed:
			return nil, p.unavailableLocked()
		}
		if timeout == nil {
			t := time.NewTimer(p.o.CallWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case p.kick <- struct{}{}:
		default:
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
			p.mu.Lock()
		case <-timeout:
			p.mu.Lock()
			return nil, p.unavailableLocked()
		case <-ctx.Done():
			p.mu.Lock()
			return nil, ctx.Err()
		}
	}
}

// unavailableLocked is the error of a call that found no daemon. p.mu must
// be held.
func (p *Proxy) unavailableLocked() error {
	why := ""
	if p.lastErr != nil {
		why = fmt.Sprintf(" (last: %v)", p.lastErr)
	}
	return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "proxy",
		Err: fmt.Errorf("no daemon of the fleet answers%s; the proxy keeps trying, so retry the call shortly", why)}
}

// broadcastLocked wakes every call waiting for a daemon. p.mu must be held.
func (p *Proxy) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}
