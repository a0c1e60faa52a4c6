package mcpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/mark3labs/mcp-go/server"
)

// DefaultMaxRequestBytes bounds the body of one HTTP request: room for the
// largest file content the store accepts, escaped as JSON.
const DefaultMaxRequestBytes = 64 << 20

// HTTPOptions configure [Adapter.HTTPHandler].
type HTTPOptions struct {
	// Tokens authenticates callers. Every request must carry
	// "Authorization: Bearer TOKEN" with a token from it.
	Tokens *Tokens
	// Anonymous lets requests without an Authorization header through as
	// anonymous callers, who may use the store tools only. A request with
	// a wrong token is refused all the same.
	Anonymous bool
	// Path is where MCP is served. Empty means "/mcp".
	Path string
	// MaxRequestBytes bounds request bodies. Zero means
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// OnStatus receives the status reports that agents' hooks POST to
	// StatusPath with their token. Nil means reports are accepted and
	// dropped.
	OnStatus func(Identity, fleetstate.Status) error
	// SessionIdleTTL, if positive, makes the server forget MCP sessions
	// (of the protocol versions that have them) idle that long: a client
	// killed without closing its session would otherwise be remembered
	// for ever. Listening streams get a heartbeat every third of it, so a
	// live one is never taken for idle. Forgetting a session frees memory
	// only; it never disconnects a member. The sweeper runs until the
	// process ends. Zero means sessions are kept until closed.
	SessionIdleTTL time.Duration
}

// HTTPHandler serves srv over MCP streamable HTTP with the caller's
// identity taken from its bearer token. Before authentication it refuses,
// with 403, a request that reached a loopback address under a Host or
// Origin that is not loopback (DNS rebinding); a request without a valid
// token gets 401. When a member's last listening stream closes (its
// process ended, however it ended), the member is disconnected from the
// rendezvous: see [fleetstate.Rendezvous.Disconnect].
//
// The handler also implements io.Closer: Close ends the listening streams
// and stops the session sweeper. Close the rendezvous first, so that the
// streams ending disconnects nobody.
func (a *Adapter) HTTPHandler(srv *server.MCPServer, opts HTTPOptions) http.Handler {
	path := opts.Path
	if path == "" {
		path = "/mcp"
	}
	limit := opts.MaxRequestBytes
	if limit <= 0 {
		limit = DefaultMaxRequestBytes
	}
	httpOpts := []server.StreamableHTTPOption{
		server.WithEndpointPath(path),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return ContextWithIdentity(ctx, IdentityFromContext(r.Context()))
		}),
	}
	if opts.SessionIdleTTL > 0 {
		httpOpts = append(httpOpts, server.WithSessionIdleTTL(opts.SessionIdleTTL),
			server.WithHeartbeatInterval(opts.SessionIdleTTL/3))
	}
	mcpHTTP := server.NewStreamableHTTPServer(srv, httpOpts...)
	status := statusHandler(opts.OnStatus)
	return &httpHandler{mcp: mcpHTTP, HandlerFunc: func(w http.ResponseWriter, r *http.Request) {
		if rebinding(r) {
			http.Error(w, "forbidden: the Host or Origin of this request is not local", http.StatusForbidden)
			return
		}
		id := Identity{}
		switch auth := r.Header.Get("Authorization"); {
		case auth == "" && opts.Anonymous:
		case auth == "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate"`)
			http.Error(w, "unauthorized: send Authorization: Bearer TOKEN (see fleetstate token add)", http.StatusUnauthorized)
			return
		default:
			token, ok := bearerToken(auth)
			var found bool
			if ok && opts.Tokens != nil {
				id, found = opts.Tokens.Lookup(token)
			}
			if !found {
				w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate", error="invalid_token"`)
				http.Error(w, "unauthorized: unknown or revoked token", http.StatusUnauthorized)
				return
			}
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if r.URL.Path == StatusPath {
			status(w, r, id)
			return
		}
		if acceptBareCancel(w, r) {
			return
		}
		if a.conns != nil && r.Method == http.MethodDelete && !a.conns.mayEnd(r.Header.Get("Mcp-Session-Id"), id) {
			http.Error(w, "forbidden: the session belongs to another agent", http.StatusForbidden)
			return
		}
		if a.conns != nil && id.Role == RoleMember && !id.Anonymous() && isListen(r) {
			// A member's listening stream is its connection: when the
			// last one closes, the member is gone.
			sw := &streamWriter{ResponseWriter: w, open: func() { a.conns.streamOpened(id.Agent) }}
			defer func() {
				if sw.opened {
					a.conns.streamClosed(id.Agent)
				}
			}()
			w = sw
		}
		mcpHTTP.ServeHTTP(w, r.WithContext(ContextWithIdentity(r.Context(), id)))
	}}
}

// httpHandler is the handler HTTPHandler returns.
type httpHandler struct {
	http.HandlerFunc
	mcp *server.StreamableHTTPServer
}

// Close ends the listening streams, so that an HTTP server's Shutdown need
// not wait for them, and stops the session sweeper.
func (h *httpHandler) Close() error { return h.mcp.Shutdown(context.Background()) }

// bearerToken returns the token of an "Authorization: Bearer TOKEN"
// header. The scheme is matched without regard to case (RFC 9110, 11.1),
// and spaces around the token are tolerated.
func bearerToken(auth string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(auth), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// rebinding reports whether r reached a loopback listener under a name
// that is not loopback, as a page whose DNS name was rebound to 127.0.0.1
// would make a browser do.
func rebinding(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) {
		return false
	}
	if !isLoopback(r.Host) {
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !isLoopback(u.Host) {
			return true
		}
	}
	return false
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// acceptBareCancel answers 202 Accepted to a notifications/cancelled that
// carries no _meta, under protocol version 2026-07-28. mcp-go refuses such
// a notification with 400, and a client that gets 400 for it (the official
// Go SDK v1.8.0 does) drops its whole session. The cancellation itself does
// not need the notification: under that protocol every request is its own
// HTTP exchange, and the client aborting it cancels the call's context.
func acceptBareCancel(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "notifications/cancelled" {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var n struct {
		Method string `json:"method"`
		ID     any    `json:"id"`
		Params struct {
			Meta json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &n) != nil || n.Method != "notifications/cancelled" || n.ID != nil || len(n.Params.Meta) > 0 {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}
