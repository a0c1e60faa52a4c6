package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/door"
	"github.com/fleetstate/fleetstate/internal/worktree"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
)

// How a daemon serves a fleet on NATS JetStream (Config.NATS).
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

// NATSConfig keeps a daemon's fleet in NATS JetStream. The zero value
// is not usable: it names no server.
type NATSConfig struct {
	// URL names the NATS servers, comma-separated. It must be "" when
	// Node is set.
	URL string
	// Fleet is the fleet's name; daemons with the same URL and Fleet serve
	// one fleet. "" means [fleetnats.DefaultFleet].
	Fleet string
	// CredsFile is a NATS credentials file; "" means none.
	CredsFile string
	// Replicas is the replication factor of the fleet's streams and
	// buckets when they are created; 0 means fleetnats's default.
	Replicas int
	// Advertise is the URL other daemons reach this one at; "" means
	// http://ADDR/mcp of the listener.
	Advertise string
	// LeaseTTL is how long a dead owner's lease outlives it, before
	// another daemon takes the fleet over; 0 means
	// [fleetnats.DefaultLeaseTTL].
	LeaseTTL time.Duration
	// Node, if not nil, makes the daemon run a NATS server with
	// JetStream ([StartNode] with these options) and keep the fleet
	// there, reached in process; other daemons reach it at its client
	// address. The server starts first and stops last.
	Node *server.Options

	// node is the server the daemon started from Node.
	node *server.Server
}

// check reports the first field of n that makes no sense.
func (n *NATSConfig) check() error {
	if n.URL == "" && n.Node == nil {
		return errors.New("daemon: NATSConfig names no server: set URL or Node")
	}
	if n.URL != "" && n.Node != nil {
		return errors.New("daemon: NATSConfig.URL and NATSConfig.Node: a daemon with its own node keeps the fleet there")
	}
	if n.Fleet != "" {
		if err := fleetnats.ValidateFleetName(n.Fleet); err != nil {
			return fmt.Errorf("daemon: NATSConfig.Fleet: %v", err)
		}
	}
	if n.Replicas < 0 || n.Replicas > 5 {
		return fmt.Errorf("daemon: NATSConfig.Replicas %d: want 1 to 5", n.Replicas)
	}
	if n.LeaseTTL < 0 {
		return errors.New("daemon: NATSConfig.LeaseTTL is negative")
	}
	if n.Advertise != "" {
		u, err := url.Parse(n.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("daemon: NATSConfig.Advertise %q: want an http:// or https:// URL", n.Advertise)
		}
	}
	return nil
}

// Connect connects to the fleet n names, as name (which the NATS
// server's monitoring shows), logging to log. The caller closes the
// fleet.
func (n *NATSConfig) Connect(ctx context.Context, log *slog.Logger, name string) (*fleetnats.Fleet, error) {
	fleet := n.Fleet
	if fleet == "" {
		fleet = fleetnats.DefaultFleet
	}
	opts := fleetnats.Options{URL: n.URL, Fleet: fleet, CredsFile: n.CredsFile,
		Replicas: n.Replicas, Logger: log, Name: name}
	if n.node != nil { // a nil *server.Server would be a non-nil provider
		opts.InProcess = n.node
	}
	return fleetnats.Connect(ctx, opts)
}

// natsStoreTimeout bounds each store call on NATS in a daemon: a daemon
// cut off from the cluster answers ERR_UNAVAILABLE within it.
const natsStoreTimeout = 5 * time.Second

// serveNATSNode runs the daemon of a fleet on NATS with its own NATS
// server (NATSConfig.Node): the server starts first and stops last, so
// that the daemon reaches it in process for as long as it runs, and other
// daemons, fleetstate token --nats, or servers routed to it in a cluster
// reach it at its client and cluster addresses. A daemon killed takes its
// node with it: the daemons that named only this node are cut off
// (ERR_UNAVAILABLE) until it is back, and a cluster carries on with its
// other nodes.
func (d *Daemon) serveNATSNode(ctx context.Context, ln net.Listener) error {
	o := d.cfg.NATS.Node
	s, err := StartNode(o, d.log)
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
			d.log.Warn("fleetstate: waiting for the NATS cluster's JetStream", "cluster", net.JoinHostPort(o.Cluster.Host, strconv.Itoa(o.Cluster.Port)), "routes", o.Routes)
			waiting = time.Now()
		}
		select {
		case <-ctx.Done():
			ln.Close()
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.cfg.NATS.node, d.cfg.NATS.URL = s, s.ClientURL()
	return d.serveNATS(ctx, ln)
}

// serveNATS runs the daemon of a fleet on NATS until ctx is done.
func (d *Daemon) serveNATS(ctx context.Context, ln net.Listener) error {
	self := d.cfg.NATS.Advertise
	if self == "" {
		self = "http://" + ln.Addr().String() + "/mcp"
	}
	f, err := d.cfg.NATS.Connect(ctx, d.log, "fleetstate daemon "+self)
	if err != nil {
		ln.Close()
		return err
	}
	defer f.Close()
	n := &natsDaemon{d: d, f: f, log: d.log, self: self, turned: make(chan struct{}),
		handler: takeoverHandler("this daemon has not joined the fleet yet")}
	hs := d.httpServer(n)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	d.log.Info("fleetstate: serving MCP", "url", self, "nats", fleetnats.Redact(d.cfg.NATS.URL), "fleet", f.Name(), "replicas", f.Replicas())
	runErr := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	go func() { runErr <- n.run(rctx) }()
	var result error
	servedDone := false
	select {
	case result = <-served:
		servedDone = true
		cancel()
		<-runErr
	case result = <-runErr:
		cancel()
	case <-ctx.Done():
		cancel()
		<-runErr
	}
	d.log.Info("fleetstate: shutting down")
	shutdown(hs)
	if !servedDone {
		<-served
	}
	if errors.Is(result, http.ErrServerClosed) || errors.Is(result, context.Canceled) {
		result = nil
	}
	return result
}

// natsDaemon is one daemon of a fleet on NATS: owner or forwarder.
type natsDaemon struct {
	d    *Daemon
	f    *fleetnats.Fleet
	log  *slog.Logger
	self string

	roster *Roster // this daemon's fleet file; nil: none
	across *across // its work trees and checkouts, for the owner

	mu      sync.Mutex
	handler http.Handler  // guarded by mu; what serves the fleet's requests now
	turned  chan struct{} // guarded by mu; closed and replaced when handler changes
}

// set makes h serve the fleet's requests from now on, and wakes the
// requests waiting for a change.
func (d *natsDaemon) set(h http.Handler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.handler = h
	close(d.turned)
	d.turned = make(chan struct{})
}

// current returns what serves the fleet's requests now, and a channel
// closed when that changes.
func (d *natsDaemon) current() (http.Handler, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.handler, d.turned
}

// takeoverWait bounds how long a request waits for the fleet to have an
// owner again: the lease of a dead owner runs out within LeaseTTL, and
// the daemon that wins it needs a moment to take the turns up.
func (d *natsDaemon) takeoverWait() time.Duration {
	ttl := d.d.cfg.NATS.LeaseTTL
	if ttl <= 0 {
		ttl = fleetnats.DefaultLeaseTTL
	}
	return 3 * ttl
}

func (d *natsDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if door.Rebound(r) {
		// Refused here as the owner would refuse it: forwarded, it would
		// carry the owner's Host.
		w.Header().Set("Connection", "close")
		http.Error(w, "forbidden: the Host or Origin of this request is not local", http.StatusForbidden)
		return
	}
	d.serve(w, r, time.Now().Add(d.takeoverWait()))
}

// serve serves r with what serves the fleet now. While the fleet has no
// owner this daemon can reach (the owner died and its lease has not run
// out yet, or this daemon has not joined), r waits for one, until by or
// until its caller gives up: a call that never reached an owner has had
// no effect, and goes to the next owner rather than fail.
func (d *natsDaemon) serve(w http.ResponseWriter, r *http.Request, by time.Time) {
	for {
		h, turned := d.current()
		if u, down := h.(unavailable); down && u.passing && time.Now().Before(by) {
			t := time.NewTimer(time.Until(by))
			select {
			case <-turned:
				t.Stop()
				continue
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return // nobody is left to answer
			}
			h, turned = d.current()
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), dispatchKey{}, dispatch{d: d, in: r, by: by, turned: turned})))
		return
	}
}

// dispatch is how a request reached a forwarder, so that one the owner
// did not answer can go to the next owner.
type dispatch struct {
	d      *natsDaemon
	in     *http.Request // the request as it came
	by     time.Time     // how long it may wait for an owner
	turned <-chan struct{}
}

type dispatchKey struct{}

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
	d.across = &across{ro: d.roster}
	var trees []string
	if d.roster != nil {
		for _, a := range d.roster.Agents {
			if a.Worktree != nil {
				trees = append(trees, a.Name)
			}
		}
	}
	ms, err := d.f.ServeMembers(ctx, ports, &fleetnats.ServeOptions{Daemon: d.self, Call: d.across.serve, Worktrees: trees})
	if err != nil {
		return err
	}
	defer ms.Close()
	poll := d.d.cfg.NATS.LeaseTTL / 5
	if poll <= 0 {
		poll = fleetnats.DefaultLeaseTTL / 5
	}
	var forwardingTo string
	for {
		if ctx.Err() != nil {
			return nil
		}
		own, err := d.f.Own(ctx, fleetnats.OwnOptions{Addr: d.self, LeaseTTL: d.d.cfg.NATS.LeaseTTL})
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
			d.set(unavailableHandler(err.Error()))
		case fleetstate.CodeOf(err) == fleetstate.CodeFleetOwned:
			var owned *fleetstate.OwnedError
			if errors.As(err, &owned) && owned.Owner.Addr == d.self {
				// The lease still names this daemon, which gave the fleet
				// up: it runs out within a lease, and requests wait for
				// the next owner rather than come back here.
				if forwardingTo != d.self {
					d.set(takeoverHandler("this daemon's old lease has not run out yet"))
					forwardingTo = d.self
				}
			} else if errors.As(err, &owned) && owned.Owner.Addr != "" && owned.Owner.Addr != forwardingTo {
				h, perr := forwardTo(owned.Owner.Addr, d.log)
				if perr != nil {
					d.set(unavailableHandler(perr.Error()))
				} else {
					d.set(h)
					forwardingTo = owned.Owner.Addr
					d.log.Info("fleetstate: forwarding to the fleet's owner", "owner", owned.Owner.Addr)
				}
			}
		default:
			forwardingTo = ""
			d.set(unavailableHandler("NATS: " + err.Error()))
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
	if d.d.cfg.Roster == "" {
		return map[string]*tmux.Pane{}, nil
	}
	ro, err := LoadRoster(d.d.cfg.Roster, "")
	if err != nil {
		return nil, err
	}
	for i, a := range ro.Agents {
		if a.Worktree != nil && ro.Remote == "" {
			return nil, fmt.Errorf("fleet file %s: agents[%d].worktree: %w", d.d.cfg.Roster, i, ErrWorktreeNeedsRemote)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ro.EnsureWorktrees(ctx, func(format string, args ...any) { d.log.Info("fleetstate: " + fmt.Sprintf(format, args...)) }); err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", d.d.cfg.Roster, err)
	}
	d.roster = ro
	return ro.panes()
}

// serveAsOwner runs the fleet's rendezvous until ctx is done or the
// ownership is lost.
func (d *natsDaemon) serveAsOwner(ctx context.Context, own *fleetnats.Ownership, panes map[string]*tmux.Pane) error {
	store := fleetstate.OpenBackend(d.f.Store(), &fleetstate.BackendOptions{Timeout: natsStoreTimeout})
	tokens, stopTokens, err := openNATSTokens(ctx, d.f)
	if err != nil {
		own.Close()
		return err
	}
	defer stopTokens()
	opts := d.d.cfg.Rendezvous
	opts.Journal = own
	rv, err := d.d.newRendezvous(store, &opts)
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
	if d.roster != nil && d.roster.Remote != "" {
		st.worktrees = &worktrees{ro: d.roster, rv: rv, peer: remote.gitPeer(d.across),
			leads: func() []string { return tokens.Agents(mcpadapter.RoleLead) }, listed: d.worktreeMembers}
	}
	fh, err := d.d.startFleetHTTP(ctx, st, remote.port, remote.report)
	if err != nil {
		return err
	}
	d.set(&provenOwner{own: own, h: fh.mux})
	d.log.Info("fleetstate: this daemon owns the fleet", "fleet", d.f.Name(), "url", d.self)
	var lost error
	select {
	case <-ctx.Done():
	case <-own.Lost():
		lost = own.Err()
		d.log.Error("fleetstate: lost the fleet", "err", lost)
	}
	// Stop answering for the fleet before the rendezvous closes, so that
	// no caller sees what it kept once it is not the owner. Requests wait
	// for the next owner where there is one.
	if errors.Is(lost, fleetnats.ErrLeasePassed) {
		d.set(takeoverHandler("this daemon gave the fleet up"))
	} else {
		d.set(unavailableHandler("this daemon gave the fleet up"))
	}
	fh.close()
	return lost
}

// provenOwner serves the fleet's requests as its owner, for as long as
// the owner can prove it holds the lease (fleetnats.Ownership.Proven). A
// daemon that was paused, or cut off from NATS, past that cannot tell
// whether another daemon took the fleet over and moved past what it keeps
// in memory: a request waits for the proof (a renewal) or for the loss of
// the lease, after which it goes wherever the fleet is served then; an
// answer written after the proof lapsed is replaced by a 503.
type provenOwner struct {
	own *fleetnats.Ownership
	h   http.Handler
}

// proofPoll is how often a request waiting for the lease's proof looks.
const proofPoll = 10 * time.Millisecond

func (p *provenOwner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dp, _ := r.Context().Value(dispatchKey{}).(dispatch)
	by := dp.by
	if dp.d == nil {
		by = time.Now().Add(fleetnats.DefaultLeaseTTL)
	}
	for !p.own.Proven() {
		if !time.Now().Before(by) {
			unavailableHandler("this daemon cannot prove it still owns the fleet").ServeHTTP(w, r)
			return
		}
		t := time.NewTimer(min(proofPoll, time.Until(by)))
		select {
		case <-p.own.Lost():
			t.Stop()
			if dp.d == nil {
				unavailableHandler("this daemon gave the fleet up").ServeHTTP(w, r)
				return
			}
			// Served wherever the fleet is served next, once this
			// daemon stopped serving it (serveAsOwner).
			select {
			case <-dp.turned:
				dp.d.serve(w, dp.in, dp.by)
			case <-r.Context().Done():
			case <-time.After(time.Until(by)):
				unavailableHandler("this daemon gave the fleet up").ServeHTTP(w, r)
			}
			return
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	p.h.ServeHTTP(&provenWriter{ResponseWriter: w, own: p.own}, r)
}

// provenWriter lets an answer out only while its owner can prove it holds
// the lease: the first byte of an answer computed by an owner whose proof
// lapsed meanwhile (it was paused mid-request) is replaced by a 503, which
// clients take for a lost daemon and try again.
type provenWriter struct {
	http.ResponseWriter
	own     *fleetnats.Ownership
	decided bool
	stale   bool
}

func (w *provenWriter) decide() bool {
	if !w.decided {
		w.decided = true
		if !w.own.Proven() {
			w.stale = true
			w.ResponseWriter.Header().Set("Retry-After", "1")
			http.Error(w.ResponseWriter, string(fleetstate.CodeUnavailable)+": this daemon cannot prove it still owns the fleet; retry", http.StatusServiceUnavailable)
		}
	}
	return !w.stale
}

func (w *provenWriter) WriteHeader(status int) {
	if w.decide() {
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *provenWriter) Write(p []byte) (int, error) {
	if !w.decide() {
		return 0, http.ErrAbortHandler
	}
	return w.ResponseWriter.Write(p)
}

func (w *provenWriter) Flush() {
	if w.decided && w.stale {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *provenWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// forwardTo returns a handler that forwards every request to the owner at
// ownerURL (its MCP endpoint; the other paths are beside it), streams
// included. A request the owner did not answer goes to the fleet's next
// owner, within its bound, when it cannot have taken effect: it never
// reached the owner, or sending it twice does what sending it once does
// (see [mcpadapter.SafeToResend]). Any other answers ERR_UNAVAILABLE.
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
			kept, _ := r.Context().Value(keptBody{}).([]byte)
			dp, _ := r.Context().Value(dispatchKey{}).(dispatch)
			alive := r.Context().Err() == nil || context.Cause(r.Context()) == errOwnerChanged
			if dp.d != nil && alive && dp.in.Context().Err() == nil && time.Now().Before(dp.by) &&
				(kept != nil || dp.in.ContentLength == 0) && (neverSent(err) || resendable(dp.in.Method, kept)) {
				log.Info("fleetstate: the fleet's owner did not answer; the request waits for the next", "owner", ownerURL, "err", err)
				in := dp.in
				if kept != nil {
					in = in.Clone(in.Context())
					in.Body = io.NopCloser(bytes.NewReader(kept))
				}
				t := time.NewTimer(time.Until(dp.by))
				defer t.Stop()
				select {
				case <-dp.turned:
					dp.d.serve(w, in, dp.by)
					return
				case <-t.C:
				case <-dp.in.Context().Done():
					return // the caller went away
				}
			}
			log.Warn("fleetstate: forward to the fleet's owner", "owner", ownerURL, "err", err)
			if kept != nil {
				r.Body = io.NopCloser(bytes.NewReader(kept))
			}
			unavailableHandler("the fleet's owner at "+ownerURL+" did not answer").ServeHTTP(w, r)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dp, ok := r.Context().Value(dispatchKey{}).(dispatch); ok {
			// An owner that was paused, or cut off, answers nothing
			// while the fleet moves on: once another daemon serves the
			// fleet, what is in flight to this one stops waiting.
			ctx, cancel := context.WithCancelCause(r.Context())
			defer cancel(nil)
			go func() {
				select {
				case <-dp.turned:
					cancel(errOwnerChanged)
				case <-ctx.Done():
				}
			}()
			r = r.WithContext(ctx)
		}
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

// errOwnerChanged ends a forwarded request whose owner no longer serves
// the fleet.
var errOwnerChanged = errors.New("the fleet's owner changed")

// neverSent reports whether a forwarded request failed before it reached
// the owner: its connection could not be made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// resendable reports whether a request the owner may have received, but
// did not answer, may be sent again: a listening stream or the end of a
// session (bodiless), a handshake or a listing (their sessions die with
// the owner that kept them), or a tool call that is safe to send twice.
func resendable(method string, body []byte) bool {
	if method != http.MethodPost {
		return method == http.MethodGet || method == http.MethodDelete
	}
	var req struct {
		Method string `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	switch req.Method {
	case "initialize", "ping", "tools/list", "notifications/initialized":
		return true
	case "tools/call":
		return mcpadapter.SafeToResend(req.Params.Name, req.Params.Arguments)
	}
	return false
}

// forwardKeep is how much of a request's body a forwarding daemon keeps
// while the owner handles it. The proxy has sent the body on by the time
// it learns the owner did not answer; with the body kept, the request can
// go to the next owner, and a tool call that may have taken effect gets
// ERR_UNAVAILABLE in the adapter's shape (a tool error for its JSON-RPC
// id), which clients read as a code, rather than a bare HTTP 503. Larger
// bodies (big puts) stream through and get the 503.
const forwardKeep = 1 << 20

// keptBody is the context key of a forwarded request's kept body.
type keptBody struct{}

// unavailable answers every request with ERR_UNAVAILABLE: a tool call
// gets a tool error in the adapter's shape, another JSON-RPC request a
// JSON-RPC error, anything else (a listening stream, the end of a
// session) HTTP 503 with Retry-After. A daemon serving with it has no
// owner to reach; requests wait for one first (natsDaemon.serve).
type unavailable struct {
	msg string
	// passing says the fleet is between two owners (this daemon has not
	// joined yet, or gave the fleet up to another): requests wait for the
	// next owner. Otherwise (this daemon cannot reach NATS, say) they are
	// answered at once.
	passing bool
}

// unavailableHandler answers ERR_UNAVAILABLE, why, at once.
func unavailableHandler(why string) http.Handler { return newUnavailable(why, false) }

// takeoverHandler answers ERR_UNAVAILABLE, why, to requests that waited
// for the fleet's next owner in vain.
func takeoverHandler(why string) http.Handler { return newUnavailable(why, true) }

func newUnavailable(why string, passing bool) unavailable {
	return unavailable{msg: string(fleetstate.CodeUnavailable) + ": " + why + "; retry, or reach the fleet through another daemon", passing: passing}
}

func (u unavailable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var body []byte
	if r.Body != nil { // an outgoing request without a body has none
		body, _ = io.ReadAll(io.LimitReader(r.Body, 1<<20))
	}
	if r.Method != http.MethodPost || json.Unmarshal(bytes.TrimSpace(body), &req) != nil || len(req.ID) == 0 {
		w.Header().Set("Retry-After", "1")
		http.Error(w, u.msg, http.StatusServiceUnavailable)
		return
	}
	var resp any
	if req.Method == "tools/call" {
		detail, _ := json.Marshal(map[string]string{"error": string(fleetstate.CodeUnavailable), "message": u.msg})
		resp = map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
			"content":           []map[string]string{{"type": "text", "text": string(detail)}},
			"structuredContent": map[string]string{"error": string(fleetstate.CodeUnavailable), "message": u.msg},
			"isError":           true,
		}}
	} else {
		resp = map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
			"code": -32000, "message": u.msg, "data": map[string]string{"error": string(fleetstate.CodeUnavailable)},
		}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// remotePanes gives the owner the ports of the fleet's panes: its own
// roster's, and over NATS those of the other daemons.
type remotePanes struct {
	f      *fleetnats.Fleet
	rv     *fleetstate.Rendezvous
	tokens *auth.Tokens
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

// worktreeMembers names the members whose daemons registered their panes
// with a work tree, by name.
func (d *natsDaemon) worktreeMembers() []string {
	ctx, cancel := context.WithTimeout(context.Background(), natsStoreTimeout)
	defer cancel()
	panes, err := d.f.Panes(ctx)
	if err != nil {
		d.log.Warn("fleetstate: the members with work trees are unknown", "err", err)
		return nil
	}
	var names []string
	for name, rec := range panes {
		if rec.Worktree {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// gitPeer returns how the owner asks the daemon of an agent's pane about
// work trees (see across.go): this daemon's own across for a pane here,
// the pane's daemon over NATS for one elsewhere.
func (p *remotePanes) gitPeer(here *across) func(context.Context, string, gitRequest) (gitReply, error) {
	return func(ctx context.Context, agent string, req gitRequest) (gitReply, error) {
		// A push or a fetch crosses the network; a merge runs the check.
		bound := 2 * time.Minute
		if req.Op == "merge" {
			bound += worktree.DefaultCheckTimeout
		}
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		body, err := json.Marshal(req)
		if err != nil {
			return gitReply{}, err
		}
		var data json.RawMessage
		if p.local[agent] != nil {
			data, err = here.serve(ctx, agent, body)
		} else {
			p.mu.Lock()
			port := p.ports[agent]
			p.mu.Unlock()
			if port == nil {
				port = p.f.RemoteMember(agent)
			}
			data, err = port.Call(ctx, body)
		}
		var rep gitReply
		if err == nil {
			err = json.Unmarshal(data, &rep)
		}
		return rep, err
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
