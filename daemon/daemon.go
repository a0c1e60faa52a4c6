// Package daemon is the fleetstate server that a program embeds: the
// store and the rendezvous of one fleet served over streamable HTTP (MCP
// at /mcp, the event stream, the dashboard) with bearer tokens, the roster
// of agents in tmux panes, the event log and the notification command;
// on NATS JetStream, the ownership of the fleet and the forwarding to its
// owner. The fleetstate command parses its flags into a [Config] and runs
// a [Daemon]; a test or another program does the same in process:
//
//	d, err := daemon.New(daemon.Config{Dir: dir, Logger: log})
//	if err != nil {
//		return err
//	}
//	ln, err := net.Listen("tcp", "127.0.0.1:0")
//	if err != nil {
//		return err
//	}
//	return d.Serve(ctx, ln) // until ctx is done, or d.Close
//
// # Ownership
//
// A fleet has one writer. On the disk, the daemon that serves a state
// directory owns it (an OS lock) and another daemon started on it fails
// with [fleetstate.ErrFleetOwned]. On NATS every daemon of the fleet
// serves: the holder of the fleet's lease runs the rendezvous, the others
// forward each request to it and take over when its lease lapses.
package daemon

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/events"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/dashboard"
	"github.com/fleetstate/fleetstate/daemon/permission"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
)

// The daemon's bounds on its callers, the defaults of [Config]'s fields;
// SECURITY.md tells what they leave an attacker.
const (
	// DefaultSessionTTL is how long the daemon remembers an MCP session
	// that makes no call and holds no listening stream: long enough for
	// any agent's quiet spell, short enough that sessions of killed
	// clients do not pile up.
	DefaultSessionTTL = 30 * time.Minute
	// DefaultIdleTimeout closes a keep-alive connection that sends no
	// request that long. Go's HTTP client forgets idle connections after
	// 90 s, so a client normally closes first; a listening stream is a
	// request in progress, never idle.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultHeaderTimeout bounds the reading of a request's headers,
	// from the connection's start: a caller that connects and sends
	// nothing holds its descriptor that long at most.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultMaxConns bounds the connections served at once, below the
	// usual descriptor limit (1024 soft, raised by Go to the hard limit).
	DefaultMaxConns = 1024
	// DefaultHoldReturned is how long the daemon keeps on its ticket an
	// outcome that a lead's call returned, when that connection does not
	// call again and the lead does not ack it: long enough for a lead
	// whose connection broke to reconnect and poll, short enough that
	// leads which never ack leave no pile.
	DefaultHoldReturned = 15 * time.Minute
)

// shutdownWait bounds an HTTP shutdown: the requests in progress get that
// long to finish once the rendezvous is closed.
const shutdownWait = 5 * time.Second

// Config configures a [Daemon]. The zero value serves the fleet of the
// state directory [fleetstate.DefaultDir] on the disk, to callers with a
// token, with every bound at its default, and logs nothing.
type Config struct {
	// Dir is the state directory of a fleet on the disk; "" means
	// [fleetstate.DefaultDir]. It must be "" when NATS is set.
	Dir string
	// SyncWrites makes every put on the disk reach stable storage before
	// it returns ([fleetstate.Options.SyncWrites]).
	SyncWrites bool
	// NATS, if not nil, keeps the fleet in NATS JetStream instead.
	NATS *NATSConfig
	// Roster is the path of a fleet file ([Roster]) naming the fleet's
	// agents and their tmux panes; "" means none.
	Roster string
	// Notify is a shell command run with an event as JSON on its standard
	// input when a member asks, turns BLOCKED, a detached ticket finishes
	// or a turn fails; "" means none.
	Notify string
	// notifyBound bounds each run of Notify; zero means notifyTimeout.
	// Only tests set it (export_test.go).
	notifyBound time.Duration
	// Anonymous lets callers without a token use the store tools (never
	// the fleet tools).
	Anonymous bool
	// Rendezvous holds the bounds of the fleet's rendezvous; a zero field
	// means its default, and a zero HoldReturned [DefaultHoldReturned].
	// Its Logger, Addr, Journal and AddOnReady are the daemon's to set.
	Rendezvous fleetstate.RendezvousOptions
	// IdleTimeout closes a keep-alive connection idle that long,
	// HeaderTimeout bounds the reading of a request's headers, SessionTTL
	// forgets an MCP session idle that long, and TokenPoll is how often
	// the token file is looked at for added and revoked tokens. Zero
	// means [DefaultIdleTimeout], [DefaultHeaderTimeout],
	// [DefaultSessionTTL] and [auth.DefaultTokenPoll].
	IdleTimeout, HeaderTimeout, SessionTTL, TokenPoll time.Duration
	// MaxConns bounds the connections served at once: past it, the next
	// waits for one to close. Zero means [DefaultMaxConns]; -1, no limit.
	MaxConns int
	// MaxSessionsPerToken and MaxSessions bound the live MCP sessions of
	// one token holder and in all, as [mcphttp.Options] do: zero
	// means its default; -1, no limit.
	MaxSessionsPerToken, MaxSessions int
	// Logger takes the daemon's log; nil means none.
	Logger *slog.Logger
	// ErrorLog takes the transports' errors; nil means Logger at level
	// warn.
	ErrorLog *log.Logger
	// Version is the server version reported to MCP clients and on the
	// dashboard.
	Version string
}

// Daemon serves one fleet. It is made by [New]; the zero value is not
// usable. Its methods are safe for concurrent use. A Daemon serves once,
// by [Daemon.Serve] or [Daemon.ServeStdio]; Close ends it.
type Daemon struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	closed bool               // guarded by mu; set by Close
	cancel context.CancelFunc // guarded by mu; ends the serving, once started
	done   chan struct{}      // guarded by mu; closed when the serving returns
}

// ErrClosed is the error of [Daemon.Serve] on a Daemon that was closed
// or served already.
var ErrClosed = errors.New("daemon: closed, or served already")

// New checks cfg and returns a daemon of it. It opens nothing: the store,
// the rendezvous and NATS are opened by Serve.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ErrorLog == nil {
		cfg.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.IdleTimeout, DefaultIdleTimeout)
	def(&cfg.HeaderTimeout, DefaultHeaderTimeout)
	def(&cfg.SessionTTL, DefaultSessionTTL)
	def(&cfg.TokenPoll, auth.DefaultTokenPoll)
	def(&cfg.notifyBound, notifyTimeout)
	def(&cfg.Rendezvous.HoldReturned, DefaultHoldReturned)
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.NATS != nil {
		n := *cfg.NATS
		if n.Fleet == "" {
			n.Fleet = fleetnats.DefaultFleet
		}
		cfg.NATS = &n
	}
	return &Daemon{cfg: cfg, log: cfg.Logger}, nil
}

// check reports the first field of c that makes no sense.
func (c *Config) check() error {
	for name, d := range map[string]time.Duration{"IdleTimeout": c.IdleTimeout, "HeaderTimeout": c.HeaderTimeout, "SessionTTL": c.SessionTTL, "TokenPoll": c.TokenPoll} {
		if d < 0 {
			return errors.New("daemon: Config." + name + " is negative")
		}
	}
	for name, n := range map[string]int{"MaxConns": c.MaxConns, "MaxSessionsPerToken": c.MaxSessionsPerToken, "MaxSessions": c.MaxSessions} {
		if n < -1 {
			return errors.New("daemon: Config." + name + " is below -1")
		}
	}
	if c.NATS != nil {
		if c.Dir != "" {
			return errors.New("daemon: Config.Dir and Config.NATS: a fleet on NATS keeps its whole state there; give one or the other")
		}
		return c.NATS.check()
	}
	return nil
}

// start marks d as serving, with a context that Close cancels, or reports
// that it cannot serve.
func (d *Daemon) start(ctx context.Context) (context.Context, func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.done != nil {
		return nil, nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	d.cancel, d.done = cancel, done
	return ctx, func() { cancel(); close(done) }, nil
}

// Serve serves the fleet on ln until ctx is done or Close is called, and
// closes ln. It returns ctx.Err() when ctx ended it, nil when Close did,
// [ErrClosed] at once on a Daemon that was closed or served already, and
// otherwise the error that stopped it: the state directory owned by
// another process, say, or the listener's. Every goroutine it started has
// ended when it returns.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	sctx, end, err := d.start(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	defer end()
	if d.cfg.MaxConns > 0 {
		ln = newLimitListener(ln, d.cfg.MaxConns, d.log)
	}
	switch {
	case d.cfg.NATS != nil && d.cfg.NATS.Node != nil:
		err = d.serveNATSNode(sctx, ln)
	case d.cfg.NATS != nil:
		err = d.serveNATS(sctx, ln)
	default:
		err = d.serveDisk(sctx, ln)
	}
	if err == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Close stops the daemon and waits until Serve (or ServeStdio) has
// returned. It is idempotent and always returns nil.
func (d *Daemon) Close() error {
	d.mu.Lock()
	d.closed = true
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// serveDisk serves the fleet of the state directory until ctx is done.
func (d *Daemon) serveDisk(ctx context.Context, ln net.Listener) error {
	url := "http://" + ln.Addr().String() + "/mcp"
	opts := d.cfg.Rendezvous
	opts.Addr = url
	st, err := d.openState(&opts)
	if err != nil {
		ln.Close()
		return ownedHint(err)
	}
	panes := map[string]*tmux.Pane{}
	if d.cfg.Roster != "" {
		ro, err := LoadRoster(d.cfg.Roster, st.store.Dir())
		if err == nil {
			panes, err = ro.apply(st.rv)
		}
		if err == nil && slices.ContainsFunc(ro.Agents, func(a RosterAgent) bool { return a.Worktree != nil }) {
			st.worktrees = &worktrees{ro: ro, rv: st.rv}
		}
		if err != nil {
			st.rv.Close()
			ln.Close()
			return err
		}
	}
	fh, err := d.startFleetHTTP(ctx, st, func(agent string) fleetstate.Member {
		if p := panes[agent]; p != nil {
			return p
		}
		return nil
	}, reportTo(st.rv, panes))
	if err != nil {
		ln.Close()
		return err
	}
	hs := d.httpServer(fh.mux)
	d.log.Info("fleetstate: serving MCP", "url", url, "dir", st.store.Dir(), "anonymous", d.cfg.Anonymous)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		fh.close()
		return err
	case <-ctx.Done():
	}
	d.log.Info("fleetstate: shutting down")
	fh.close()
	shutdown(hs)
	<-served
	return nil
}

// httpServer returns the daemon's HTTP server of h.
func (d *Daemon) httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: d.cfg.HeaderTimeout, IdleTimeout: d.cfg.IdleTimeout, ErrorLog: d.cfg.ErrorLog}
}

// shutdown shuts hs down, gracefully within shutdownWait, else at once.
func shutdown(hs *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		hs.Close()
	}
}

// fleetHTTP is what serves one rendezvous over HTTP: the MCP handler with
// its membership, the event stream, the dashboard, the event log and the
// notifications.
type fleetHTTP struct {
	mux     *http.ServeMux
	st      *state
	members *auth.Membership
	handler *mcphttp.Handler
	dash    *dashboard.Dashboard
	readers sync.WaitGroup // the event log and the notifications
}

// startFleetHTTP serves st's rendezvous. port gives the member port of an
// agent whose token appears; onStatus takes the status reports of hooks.
// On an error it closes st's rendezvous.
func (d *Daemon) startFleetHTTP(ctx context.Context, st *state, port func(string) fleetstate.Member, onStatus func(mcpadapter.Identity, fleetstate.Status) error) (*fleetHTTP, error) {
	if err := d.applyApprovals(st); err != nil {
		st.rv.Close()
		return nil, err
	}
	if err := d.applyBudgets(st); err != nil {
		st.rv.Close()
		return nil, err
	}
	pruneMembers(st.rv)
	// The token file is the roster of identities, read live: a token added
	// makes a member at once (with its roster pane, if it has one), a
	// token revoked ends its holder's streams, sessions and turns.
	members, err := auth.WatchMembership(st.tokens, st.rv, &auth.MembershipOptions{
		Poll: d.cfg.TokenPoll, Logger: d.log, Port: port,
	})
	if err != nil {
		st.rv.Close()
		return nil, err
	}
	st.members.Store(members) // a call naming an unknown member looks again
	// The operator token opens the event stream and the dashboard, and
	// calls the tools as the lead mcpadapter.OperatorAgent.
	operator, err := auth.NewOperatorToken(st.store)
	if err != nil {
		members.Close()
		st.rv.Close()
		return nil, err
	}
	srv := st.adapter.NewServer("fleetstate", d.cfg.Version)
	if st.worktrees != nil {
		srv.AddTools(st.worktrees.tools()...)
	}
	srv.AddTools(budgetTool(st.rv, func() error { return d.applyBudgets(st) }))
	handler := mcphttp.New(st.adapter, srv, mcphttp.Options{Tokens: st.tokens, Anonymous: d.cfg.Anonymous, Connections: st.conns,
		OnStatus: onStatus, OnUsage: reportUsage(st.rv), SessionIdleTTL: d.cfg.SessionTTL,
		MaxSessionsPerToken: d.cfg.MaxSessionsPerToken, MaxSessions: d.cfg.MaxSessions, Membership: members,
		Operator: operator})
	// What happens in the fleet: one structured log line per event, the
	// notification command, and the event stream for views.
	fh := &fleetHTTP{st: st, members: members, handler: handler}
	logSub, _ := st.rv.Subscribe(4096)
	fh.readers.Go(func() { logEvents(d.log, logSub) })
	if d.cfg.Notify != "" {
		notifySub, _ := st.rv.Subscribe(256)
		fh.readers.Go(func() { notify(ctx, d.log, d.cfg.Notify, d.cfg.notifyBound, notifySub) })
	}
	fh.dash = dashboard.New(st.rv, &dashboard.Options{Operator: operator, Tokens: st.tokens, Version: d.cfg.Version,
		LeadsDecide: st.leadsDecide.Load, Work: st.dashboardWork()})
	fh.mux = http.NewServeMux()
	fh.mux.Handle(events.Path, events.Handler(st.rv, events.Options{Tokens: st.tokens, Operator: operator,
		Authorize: fh.dash.Authorized, Membership: members}))
	fh.mux.Handle(dashboard.Path, fh.dash)
	perms := permission.NewHandler(st.rv, permission.Options{Tokens: st.tokens, Operator: operator,
		LeadsDecide: st.leadsDecide.Load()})
	fh.mux.Handle(permission.Path, perms)
	fh.mux.Handle(permission.RequestsPath, perms)
	fh.mux.Handle(permission.RequestsPath+"/", perms)
	fh.mux.Handle("/", handler)
	return fh, nil
}

// close stops serving the rendezvous and closes it. The membership stops
// first, so that nothing is added or removed while the rest closes.
// Closing the rendezvous then returns every blocked call (a lead's send
// with its ticket) and ends the event readers' subscriptions, and closing
// the handler ends the listening streams, so that an HTTP shutdown does
// not wait on them.
func (fh *fleetHTTP) close() {
	fh.members.Close()
	fh.st.rv.Close()
	fh.handler.Close()
	fh.dash.Close()
	fh.readers.Wait()
}

// reportUsage returns the OnUsage hook of the HTTP handler: a member's
// usage goes to the rendezvous; a lead's is not counted (the fleet counts
// what its members spend).
func reportUsage(rv *fleetstate.Rendezvous) func(mcpadapter.Identity, []fleetstate.UsageReport) error {
	return func(id mcpadapter.Identity, reports []fleetstate.UsageReport) error {
		if id.Role != mcpadapter.RoleMember {
			return nil
		}
		return rv.ReportUsage(id.Agent, reports...)
	}
}
