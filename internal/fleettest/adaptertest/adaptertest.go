// Package adaptertest is the part of the test kit that needs the adapter:
// a store with its token file on the disk, the adapter served over
// streamable HTTP on 127.0.0.1 with tokens (as `fleetstate serve` runs
// it), an initialized mcp-go client of it, a [Checker] that calls the
// tools of such a client and checks their results, the adapter the fuzz
// targets call ([Fuzzed]), and a member's permission request raised and
// left pending.
//
// It is internal: only this module's tests import it, and only their
// black-box (package x_test) files, since it imports the root package and
// mcpadapter.
package adaptertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// OpenStore opens a store in a new temporary directory on the disk, and
// its token file.
func OpenStore(tb testing.TB) (*fleetstate.Store, *auth.Tokens) {
	tb.Helper()
	st, err := fleetstate.Open(afero.NewOsFs(), filepath.Join(tb.TempDir(), "state"), &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		tb.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		tb.Fatal(err)
	}
	return st, tokens
}

// AddTokens issues a token to each agent with its role, and returns the
// tokens by agent.
func AddTokens(tb testing.TB, tokens *auth.Tokens, agents map[string]mcpadapter.Role) map[string]string {
	tb.Helper()
	out := make(map[string]string, len(agents))
	for agent, role := range agents {
		tok, err := tokens.Add(agent, role)
		if err != nil {
			tb.Fatalf("Add(%s, %s): %v", agent, role, err)
		}
		out[agent] = tok
	}
	return out
}

// Options configure [Start]. The zero value serves a fleet with no tokens.
type Options struct {
	// Agents are issued tokens before the daemon starts: agent to role.
	Agents map[string]mcpadapter.Role
	// Rendezvous are the rendezvous's options; nil means the defaults.
	Rendezvous *fleetstate.RendezvousOptions
	// Membership, if not nil, makes the token file the roster as
	// `fleetstate serve` does ([auth.WatchMembership] with these
	// options). If nil, the member agents are added to the rendezvous
	// once, at the start.
	Membership *auth.MembershipOptions
	// HTTP configure the handler; Start sets its Tokens and Membership.
	HTTP mcphttp.Options
	// Tools are served beside the adapter's.
	Tools []server.ServerTool
}

// Daemon is the adapter served over streamable HTTP on 127.0.0.1 with a
// store on the disk and a token file. The test's cleanup stops it in the
// order `fleetstate serve` does: the rendezvous first, so that blocked
// calls return, then the handler's streams, then HTTP.
type Daemon struct {
	URL        string            // the MCP endpoint
	Store      *fleetstate.Store // on the disk, under the test's temporary directory
	Tokens     *auth.Tokens
	Token      map[string]string // the tokens of Options.Agents, by agent
	Rendezvous *fleetstate.Rendezvous
	Adapter    *mcpadapter.Adapter
	Membership *auth.Membership // nil unless Options.Membership is set
	Handler    *mcphttp.Handler
	// Connections follow the agents' MCP sessions, for the adapter and the
	// handler alike.
	Connections *mcphttp.Connections
	// HTTP is a client that sends no token; its idle connections are
	// closed at cleanup.
	HTTP *http.Client
}

// Start starts a daemon; the test's cleanup stops it.
func Start(tb testing.TB, o Options) *Daemon {
	tb.Helper()
	st, tokens := OpenStore(tb)
	d := &Daemon{Store: st, Tokens: tokens, Token: AddTokens(tb, tokens, o.Agents)}
	rvOpts := fleetstate.RendezvousOptions{}
	if o.Rendezvous != nil {
		rvOpts = *o.Rendezvous
	}
	rvOpts.AddOnReady = true // as fleetstate serve runs it
	rv, err := fleetstate.NewRendezvous(st, &rvOpts)
	if err != nil {
		tb.Fatal(err)
	}
	d.Rendezvous = rv
	if o.Membership != nil {
		if d.Membership, err = auth.WatchMembership(tokens, rv, o.Membership); err != nil {
			rv.Close()
			tb.Fatal(err)
		}
	} else {
		for _, m := range tokens.Agents(mcpadapter.RoleMember) {
			if err := rv.AddMember(m, nil); err != nil {
				rv.Close()
				tb.Fatal(err)
			}
		}
	}
	d.Connections = mcphttp.NewConnections(rv)
	d.Adapter = mcpadapter.New(st, rv, &mcpadapter.Options{
		RolesConfigured: func() bool { return tokens.Len() > 0 },
		MarkReady:       true,
		Connections:     d.Connections,
	})
	srv := d.Adapter.NewServer("fleetstate", "test")
	srv.AddTools(o.Tools...)
	hopts := o.HTTP
	hopts.Tokens, hopts.Membership, hopts.Connections = tokens, d.Membership, d.Connections
	d.Handler = mcphttp.New(d.Adapter, srv, hopts)
	ts := httptest.NewServer(d.Handler) // on 127.0.0.1
	d.URL = ts.URL + "/mcp"
	tr := &http.Transport{}
	d.HTTP = &http.Client{Transport: tr}
	tb.Cleanup(func() {
		if d.Membership != nil {
			d.Membership.Close()
		}
		rv.Close()
		d.Handler.Close()
		ts.Close()
		tr.CloseIdleConnections()
	})
	return d
}

// DialOptions configure [Dial]. The zero value makes a client of mcp-go's
// default protocol version that holds no listening stream.
type DialOptions struct {
	// Name is the client's name in its initialize request; "" means
	// "fleettest".
	Name string
	// ProtocolVersion is the version the client asks for; "" means
	// mcp-go's default.
	ProtocolVersion string
	// Listen makes the client hold a listening stream, as the fleetstate
	// proxy does.
	Listen bool
	// Transport and Client are further options of the transport and the
	// client.
	Transport []transport.StreamableHTTPCOption
	Client    []client.ClientOption
}

// Dial returns an initialized mcp-go client of the MCP endpoint url whose
// requests go through hc (nil: http.DefaultClient), and its transport. The
// caller closes the client.
func Dial(ctx context.Context, url string, hc *http.Client, o DialOptions) (*client.Client, *transport.StreamableHTTP, error) {
	topts := o.Transport
	if hc != nil {
		topts = append([]transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(hc)}, topts...)
	}
	if o.Listen {
		topts = append(topts, transport.WithContinuousListening())
	}
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		return nil, nil, err
	}
	c := client.NewClient(tr, o.Client...)
	if err := c.Start(ctx); err != nil {
		return nil, nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = o.ProtocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: o.Name, Version: "0"}
	if init.Params.ClientInfo.Name == "" {
		init.Params.ClientInfo.Name = "fleettest"
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, tr, nil
}

// Permission is what a member's [fleetstate.Rendezvous.RequestPermission]
// returned.
type Permission struct {
	Decision fleetstate.Decision
	OK       bool
	Err      error
}

// RaisePermission raises member's request on rv in a goroutine, waits
// until it is pending, and returns it with the channel of its answer.
func RaisePermission(tb testing.TB, rv *fleetstate.Rendezvous, member string, req fleetstate.PermissionRequest) (fleetstate.PermissionRequest, <-chan Permission) {
	tb.Helper()
	before := len(rv.PermissionRequests())
	ch := make(chan Permission, 1)
	go func() {
		d, ok, err := rv.RequestPermission(context.Background(), member, req)
		ch <- Permission{d, ok, err}
	}()
	var got []fleetstate.PermissionRequest
	if !fleettest.Until(5*time.Second, time.Millisecond, func() bool {
		got = rv.PermissionRequests()
		return len(got) > before
	}) {
		tb.Fatal("the request never became pending")
	}
	return got[len(got)-1], ch
}
