package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/afero"
)

// How a daemon serves a fleet on NATS JetStream (serve --nats).
//
// Every daemon of the fleet listens and answers; one of them, the holder
// of the fleet's lease (fleetnats.Fleet.Own), runs the rendezvous, whose
// turns are in JetStream, and serves the fleet's MCP endpoint itself. The
// others forward every request to it, over HTTP to the address its lease
// names, and watch the lease: when it goes (the owner stopped or died),
// one of them wins it, takes the turns up from JetStream and serves. A
// daemon that cannot reach NATS answers ERR_UNAVAILABLE rather than
// anything it might have kept: the owner gives its lease up first (its
// renewals fail), so no daemon serves a fleet it no longer owns.

// natsFlags are the flags that put a command on a fleet in NATS.
type natsFlags struct {
	url, fleet, creds, advertise string
	replicas                     int
	lease                        time.Duration
	// node, when not nil, is the NATS server this daemon embeds
	// (serve --nats-node), reached in process instead of at url.
	node *server.Server
}

func (n *natsFlags) add(fs *flag.FlagSet, daemon bool) {
	fs.StringVar(&n.url, "nats", os.Getenv("FLEET_NATS"), "keep the fleet in NATS JetStream at these server URLs, comma-separated (default $FLEET_NATS)")
	fs.StringVar(&n.fleet, "fleet", envOr("FLEET_NAME", fleetnats.DefaultFleet), "with --nats: the fleet's name; daemons with the same --nats and --fleet serve one fleet")
	fs.StringVar(&n.creds, "nats-creds", "", "with --nats: a NATS credentials file")
	fs.IntVar(&n.replicas, "replicas", 0, "with --nats: replication factor of the fleet's streams and buckets when they are created (default 3 on a cluster of 3 or more servers, else 1)")
	if daemon {
		fs.StringVar(&n.advertise, "advertise", "", "with --nats: the URL other daemons reach this one at (default http://ADDR/mcp)")
		fs.DurationVar(&n.lease, "lease", fleetnats.DefaultLeaseTTL, "with --nats: how long a dead owner's lease outlives it, before another daemon takes the fleet over")
	}
}

// check checks the flags of a fleet on NATS, if the command is on one:
// --nats given, or embedded, a daemon with its own node.
func (n *natsFlags) check(embedded bool) error {
	if n.url == "" && !embedded {
		return nil
	}
	if err := fleetnats.ValidateFleetName(n.fleet); err != nil {
		return fmt.Errorf("--fleet: %v", err)
	}
	if n.replicas < 0 || n.replicas > 5 {
		return fmt.Errorf("--replicas %d: want 1 to 5", n.replicas)
	}
	if n.lease < 0 {
		return fmt.Errorf("--lease %v: must be positive", n.lease)
	}
	if n.advertise != "" {
		u, err := url.Parse(n.advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--advertise %q: want an http:// or https:// URL", n.advertise)
		}
	}
	return nil
}

// connect connects to the fleet.
func (n *natsFlags) connect(ctx context.Context, log *slog.Logger, name string) (*fleetnats.Fleet, error) {
	opts := fleetnats.Options{URL: n.url, Fleet: n.fleet, CredsFile: n.creds,
		Replicas: n.replicas, Logger: log, Name: name}
	if n.node != nil { // a nil *server.Server would be a non-nil provider
		opts.InProcess = n.node
	}
	return fleetnats.Connect(ctx, opts)
}

// natsStoreTimeout bounds each store call on NATS in a daemon: a daemon
// cut off from the cluster answers ERR_UNAVAILABLE within it.
const natsStoreTimeout = 5 * time.Second

// openNATSStore opens the fleet's store and its tokens: the tokens live in
// the fleet's configuration bucket and are copied, on every change, into
// the store's private in-memory file system, where the adapter's token
// table reads them.
func openNATSStore(ctx context.Context, f *fleetnats.Fleet, log *slog.Logger) (*fleetstate.Store, *mcpadapter.Tokens, func(), error) {
	store := fleetstate.OpenBackend(f.Store(), &fleetstate.BackendOptions{Timeout: natsStoreTimeout})
	path := mcpadapter.TokenPath(store)
	write := func(data []byte) error {
		if data == nil {
			err := store.Fs().Remove(path)
			if errors.Is(err, os.ErrNotExist) {
				err = nil
			}
			return err
		}
		return afero.WriteFile(store.Fs(), path, data, 0o600)
	}
	first := make(chan error, 1)
	var once sync.Once
	stop, err := f.WatchConfig(ctx, tokenConfig, func(data []byte) {
		err := write(data)
		once.Do(func() { first <- err })
		if err != nil {
			log.Error("fleetstate: copy the fleet's tokens", "err", err)
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	select {
	case err = <-first:
	case <-time.After(natsStoreTimeout):
		err = &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "read the fleet's tokens", Err: errors.New("no answer from NATS")}
	}
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	tokens, err := mcpadapter.OpenTokens(store)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return store, tokens, stop, nil
}

// tokenConfig is the key of the tokens in the fleet's configuration.
const tokenConfig = "tokens"

// serveNATSNode runs the daemon of a fleet on NATS with its own NATS
// server (serve --nats-node): the server starts first and stops last, so
// that the daemon reaches it in process for as long as it runs, and other
// daemons (serve --nats), token --nats, or servers routed to it in a
// cluster reach it at its client and cluster addresses. A daemon killed
// takes its node with it: the daemons that named only this node are cut
// off (ERR_UNAVAILABLE) until it is back, and a cluster carries on with
// its other nodes.
func serveNATSNode(ctx context.Context, c serveConfig, ln net.Listener, log *slog.Logger) error {
	s, err := c.node.start(log)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	// A node of a cluster has JetStream once the cluster has a leader and
	// the node caught up with it; the other nodes may be starting too.
	waiting := time.Now()
	for !s.JetStreamIsCurrent() {
		if time.Since(waiting) > 5*time.Second {
			log.Warn("fleetstate: waiting for the NATS cluster's JetStream", "cluster", c.node.cluster, "routes", c.node.routes)
			waiting = time.Now()
		}
		select {
		case <-ctx.Done():
			ln.Close()
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.nats.node, c.nats.url = s, s.ClientURL()
	return serveNATS(ctx, c, ln, log)
}

// serveNATS runs the daemon of a fleet on NATS until ctx is done.
func serveNATS(ctx context.Context, c serveConfig, ln net.Listener, log *slog.Logger) error {
	self := c.nats.advertise
	if self == "" {
		self = "http://" + ln.Addr().String() + "/mcp"
	}
	f, err := c.nats.connect(ctx, log, "fleetstate daemon "+self)
	if err != nil {
		ln.Close()
		return err
	}
	defer f.Close()
	d := &natsDaemon{c: c, f: f, log: log, self: self}
	d.handler.Store(&httpHandler{unavailableHandler("this daemon has not joined the fleet yet")})
	hs := &http.Server{Handler: d, ReadHeaderTimeout: c.header, IdleTimeout: c.idle,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("fleetstate: serving MCP", "url", self, "nats", fleetnats.Redact(c.nats.url), "fleet", f.Name(), "replicas", f.Replicas())
	runErr := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	go func() { runErr <- d.run(rctx) }()
	var result error
	select {
	case result = <-served:
		cancel()
		<-runErr
	case result = <-runErr:
		cancel()
	case <-ctx.Done():
		cancel()
		<-runErr
	}
	log.Info("fleetstate: shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if errors.Is(result, http.ErrServerClosed) || errors.Is(result, context.Canceled) {
		result = nil
	}
	return result
}

// httpHandler boxes a handler for an atomic.Pointer.
type httpHandler struct{ http.Handler }

// natsDaemon is one daemon of a fleet on NATS: owner or forwarder.
type natsDaemon struct {
	c       serveConfig
	f       *fleetnats.Fleet
	log     *slog.Logger
	self    string
	handler atomic.Pointer[httpHandler]
}

func (d *natsDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.handler.Load().ServeHTTP(w, r)
}

// run contends for the fleet and serves it in whichever role the lease
// gives, until ctx is done.
func (d *natsDaemon) run(ctx context.Context) error {
	panes, err := d.localPanes()
	if err != nil {
		return err
	}
	// This daemon's panes are served to the owner, whichever daemon it
	// is, for as long as this daemon runs.
	ports := make(map[string]fleetstate.Member, len(panes))
	for name, p := range panes {
		ports[name] = p
	}
	ms, err := d.f.ServeMembers(ctx, ports, &fleetnats.ServeOptions{Daemon: d.self})
	if err != nil {
		return err
	}
	defer ms.Close()
	poll := d.c.nats.lease / 5
	if poll <= 0 {
		poll = fleetnats.DefaultLeaseTTL / 5
	}
	var forwardingTo string
	for {
		if ctx.Err() != nil {
			return nil
		}
		own, err := d.f.Own(ctx, fleetnats.OwnOptions{Addr: d.self, LeaseTTL: d.c.nats.lease})
		switch {
		case err == nil:
			forwardingTo = ""
			err := d.serveAsOwner(ctx, own, panes)
			if err == nil {
				continue
			}
			// Not at once again: an owner that cannot start (its journal
			// unreadable, say) would otherwise take the lease and give it
			// up in a loop.
			d.log.Error("fleetstate: serving the fleet ended", "err", err)
			d.handler.Store(&httpHandler{unavailableHandler(err.Error())})
		case fleetstate.CodeOf(err) == fleetstate.CodeFleetOwned:
			var owned *fleetstate.OwnedError
			if errors.As(err, &owned) && owned.Owner.Addr != "" && owned.Owner.Addr != forwardingTo {
				h, perr := forwardTo(owned.Owner.Addr, d.log)
				if perr != nil {
					d.handler.Store(&httpHandler{unavailableHandler(perr.Error())})
				} else {
					d.handler.Store(&httpHandler{h})
					forwardingTo = owned.Owner.Addr
					d.log.Info("fleetstate: forwarding to the fleet's owner", "owner", owned.Owner.Addr)
				}
			}
		default:
			forwardingTo = ""
			d.handler.Store(&httpHandler{unavailableHandler("NATS: " + err.Error())})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// localPanes reads the roster: the panes on this machine, served to the
// owner over NATS whoever it is.
func (d *natsDaemon) localPanes() (map[string]*tmux.Pane, error) {
	if d.c.rosterPath == "" {
		return map[string]*tmux.Pane{}, nil
	}
	ro, err := loadRoster(d.c.rosterPath, "")
	if err != nil {
		return nil, err
	}
	return ro.panes()
}

// serveAsOwner runs the fleet's rendezvous until ctx is done or the
// ownership is lost.
func (d *natsDaemon) serveAsOwner(ctx context.Context, own *fleetnats.Ownership, panes map[string]*tmux.Pane) error {
	store, tokens, stopTokens, err := openNATSStore(ctx, d.f, d.log)
	if err != nil {
		own.Close()
		return err
	}
	defer stopTokens()
	opts := *d.c.rvOpts
	opts.Journal = own
	rv, err := newRendezvous(store, d.log, &opts)
	if err != nil {
		own.Close()
		return err
	}
	// The panes of the other daemons are reached over NATS: each is
	// delivered by the daemon that has it in its roster.
	remote := &remotePanes{f: d.f, rv: rv, tokens: tokens, local: panes, ports: map[string]*fleetnats.RemoteMember{}}
	stopPanes, err := d.f.WatchPanes(ctx, remote.changed)
	if err != nil {
		rv.Close()
		return err
	}
	defer stopPanes()
	st, err := newState(store, rv, tokens, remote.port)
	if err != nil {
		return err
	}
	fh, err := startFleetHTTP(ctx, st, d.c, d.log, remote.port, remote.report)
	if err != nil {
		return err
	}
	d.handler.Store(&httpHandler{fh.mux})
	d.log.Info("fleetstate: this daemon owns the fleet", "fleet", d.f.Name(), "url", d.self)
	var lost error
	select {
	case <-ctx.Done():
	case <-own.Lost():
		lost = own.Err()
		d.log.Error("fleetstate: lost the fleet", "err", lost)
	}
	// Stop answering for the fleet before the rendezvous closes, so that
	// no caller sees what it kept once it is not the owner.
	d.handler.Store(&httpHandler{unavailableHandler("this daemon gave the fleet up")})
	fh.close()
	return lost
}

// forwardTo returns a handler that forwards every request to the owner at
// ownerURL (its MCP endpoint; the other paths are beside it), streams
// included.
func forwardTo(ownerURL string, log *slog.Logger) (http.Handler, error) {
	u, err := url.Parse(ownerURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the fleet's owner gives no usable address (%q)", ownerURL)
	}
	target := &url.URL{Scheme: u.Scheme, Host: u.Host}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		FlushInterval: -1, // event streams pass at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("fleetstate: forward to the fleet's owner", "owner", ownerURL, "err", err)
			if kept, ok := r.Context().Value(keptBody{}).([]byte); ok {
				r.Body = io.NopCloser(bytes.NewReader(kept))
			}
			unavailableHandler("the fleet's owner at "+ownerURL+" did not answer").ServeHTTP(w, r)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			head, err := io.ReadAll(io.LimitReader(r.Body, forwardKeep+1))
			if err != nil {
				return // the caller went away mid-request
			}
			if len(head) <= forwardKeep {
				r.Body = io.NopCloser(bytes.NewReader(head))
				r = r.WithContext(context.WithValue(r.Context(), keptBody{}, head))
			} else {
				r.Body = struct {
					io.Reader
					io.Closer
				}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
			}
		}
		rp.ServeHTTP(w, r)
	}), nil
}

// forwardKeep is how much of a request's body a forwarding daemon keeps
// while the owner handles it. The proxy has sent the body on by the time
// it learns the owner did not answer; with the body kept, a tool call in
// flight when the owner died gets ERR_UNAVAILABLE in the adapter's shape
// (a tool error for its JSON-RPC id), which clients read as a code, rather
// than a bare HTTP 503. Larger bodies (big puts) stream through and get
// the 503.
const forwardKeep = 1 << 20

// keptBody is the context key of a forwarded request's kept body.
type keptBody struct{}

// unavailableHandler answers every request with ERR_UNAVAILABLE: a tool
// call gets a tool error in the adapter's shape, another JSON-RPC request
// a JSON-RPC error, anything else HTTP 503.
func unavailableHandler(why string) http.Handler {
	msg := string(fleetstate.CodeUnavailable) + ": " + why + "; retry, or reach the fleet through another daemon"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if r.Method != http.MethodPost || json.Unmarshal(bytes.TrimSpace(body), &req) != nil || len(req.ID) == 0 {
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		var resp any
		if req.Method == "tools/call" {
			detail, _ := json.Marshal(map[string]string{"error": string(fleetstate.CodeUnavailable), "message": msg})
			resp = map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
				"content":           []map[string]string{{"type": "text", "text": string(detail)}},
				"structuredContent": map[string]string{"error": string(fleetstate.CodeUnavailable), "message": msg},
				"isError":           true,
			}}
		} else {
			resp = map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
				"code": -32000, "message": msg, "data": map[string]string{"error": string(fleetstate.CodeUnavailable)},
			}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// natsTokens runs fn on the tokens of the fleet on NATS. With write, what
// fn changed is written back in one compare-and-swap: fn runs again if
// another process changed the tokens meanwhile.
func natsTokens(n *natsFlags, write bool, fn func(*mcpadapter.Tokens) error) error {
	ctx := context.Background()
	f, err := n.connect(ctx, slog.New(slog.DiscardHandler), "fleetstate token")
	if err != nil {
		return err
	}
	defer f.Close()
	if !write {
		data, err := f.ReadConfig(ctx, tokenConfig)
		if err != nil {
			return err
		}
		_, err = tokensOf(data, fn)
		return err
	}
	return f.UpdateConfig(ctx, tokenConfig, func(old []byte) ([]byte, error) {
		return tokensOf(old, fn)
	})
}

// tokensOf runs fn on the token file data and returns the file after it.
func tokensOf(old []byte, fn func(*mcpadapter.Tokens) error) ([]byte, error) {
	// The token file's code works on a store: one in memory, for this run.
	store, err := fleetstate.Open(afero.NewMemMapFs(), "/fleet", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		return nil, err
	}
	path := mcpadapter.TokenPath(store)
	if old != nil {
		if err := afero.WriteFile(store.Fs(), path, old, 0o600); err != nil {
			return nil, err
		}
	}
	tokens, err := mcpadapter.OpenTokens(store)
	if err != nil {
		return nil, err
	}
	if err := fn(tokens); err != nil {
		return nil, err
	}
	data, err := afero.ReadFile(store.Fs(), path)
	if errors.Is(err, os.ErrNotExist) {
		return old, nil
	}
	return data, err
}

// natsStdio is the stdio server of a fleet on NATS: the store, on NATS;
// the fleet tools answer where the fleet's owner is.
func natsStdio(ctx context.Context, n *natsFlags, log *slog.Logger) (*state, func(), error) {
	f, err := n.connect(ctx, log, "fleetstate mcp")
	if err != nil {
		return nil, nil, err
	}
	store := fleetstate.OpenBackend(f.Store(), &fleetstate.BackendOptions{Timeout: natsStoreTimeout})
	elsewhere := fleetElsewhere(store, "no daemon serves this fleet: start one with fleetstate serve --nats, then reach it with fleetstate mcp --connect URL and a token in $FLEET_TOKEN")
	st := &state{store: store}
	st.adapter = mcpadapter.New(store, nil, &mcpadapter.Options{FleetElsewhere: elsewhere})
	return st, f.Close, nil
}

// remotePanes gives the owner the ports of the fleet's panes: its own
// roster's, and over NATS those of the other daemons.
type remotePanes struct {
	f      *fleetnats.Fleet
	rv     *fleetstate.Rendezvous
	tokens *mcpadapter.Tokens
	local  map[string]*tmux.Pane

	mu    sync.Mutex
	ports map[string]*fleetnats.RemoteMember // the panes other daemons serve
}

// changed learns of a pane another daemon serves. A member holding a
// token is reached through it from then on (a pane that goes keeps its
// port: it reads UNKNOWN, never deliverable, until a daemon serves it
// again); a lead's pane is the lead's port.
func (p *remotePanes) changed(name string, present bool) {
	if !present || p.local[name] != nil {
		return
	}
	p.mu.Lock()
	port := p.ports[name]
	if port == nil {
		port = p.f.RemoteMember(name)
		p.ports[name] = port
	}
	p.mu.Unlock()
	if slices.Contains(p.tokens.Agents(mcpadapter.RoleMember), name) {
		_ = p.rv.AddMember(name, port) // only a closed rendezvous refuses
	} else if slices.Contains(p.tokens.Agents(mcpadapter.RoleLead), name) {
		_ = p.rv.SetLeadPort(name, port)
	}
}

// port returns the port of agent: its pane here or on another daemon, or
// nil for an agent that pulls.
func (p *remotePanes) port(agent string) fleetstate.Member {
	if pane := p.local[agent]; pane != nil {
		return pane
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if port := p.ports[agent]; port != nil {
		return port
	}
	return nil
}

// report takes a hook's status report: to the pane here, or to the daemon
// that has it.
func (p *remotePanes) report(id mcpadapter.Identity, st fleetstate.Status) error {
	if pane := p.local[id.Agent]; pane != nil {
		pane.Report(st)
		p.rv.Wake(id.Agent)
		return nil
	}
	p.mu.Lock()
	port := p.ports[id.Agent]
	p.mu.Unlock()
	if port == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsStoreTimeout)
	defer cancel()
	if err := port.Report(ctx, st); err != nil {
		return err
	}
	p.rv.Wake(id.Agent)
	return nil
}
