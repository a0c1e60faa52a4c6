package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
	"github.com/mark3labs/mcp-go/server"
)

// state is what both servers run on: the store, its rendezvous and tokens.
type state struct {
	store   *fleetstate.Store
	rv      *fleetstate.Rendezvous
	tokens  *mcpadapter.Tokens
	adapter *mcpadapter.Adapter
}

func openState(dir string, log *slog.Logger, rvOpts *fleetstate.RendezvousOptions) (*state, error) {
	store, tokens, err := openStore(dir)
	if err != nil {
		return nil, err
	}
	rv, err := newRendezvous(store, log, rvOpts)
	if err != nil {
		return nil, err
	}
	return newState(store, rv, tokens, nil)
}

// newRendezvous runs the fleet's rendezvous on store with the servers'
// settings over rvOpts.
func newRendezvous(store *fleetstate.Store, log *slog.Logger, rvOpts *fleetstate.RendezvousOptions) (*fleetstate.Rendezvous, error) {
	opts := fleetstate.RendezvousOptions{}
	if rvOpts != nil {
		opts = *rvOpts
	}
	opts.Logger = log
	// A caller holding a member token added while the server runs is a
	// member as soon as it calls (the membership adds it too, on its next
	// look at the token file).
	opts.AddOnReady = true
	if opts.HoldReturned <= 0 {
		opts.HoldReturned = holdReturned // and released per connection by the adapter
	}
	return fleetstate.NewRendezvous(store, &opts)
}

// newState serves rv: every agent holding a member token is a member,
// known but not ready until its connection makes its first call, behind
// the port that port gives (nil, or a nil port: it pulls). On an error it
// closes rv.
func newState(store *fleetstate.Store, rv *fleetstate.Rendezvous, tokens *mcpadapter.Tokens, port func(string) fleetstate.Member) (*state, error) {
	for _, name := range tokens.Agents(mcpadapter.RoleMember) {
		var p fleetstate.Member
		if port != nil {
			p = port(name)
		}
		if err := rv.AddMember(name, p); err != nil {
			rv.Close()
			return nil, err
		}
	}
	s := &state{store: store, rv: rv, tokens: tokens}
	s.adapter = mcpadapter.New(store, rv, &mcpadapter.Options{
		RolesConfigured: func() bool { return tokens.Len() > 0 },
		MarkReady:       true,
	})
	return s, nil
}

// syncWritesEnv, set to true, makes every put flush its file to stable
// storage before it returns (fleetstate.Options.SyncWrites): it then
// survives a power failure, at the price of an fsync per put.
const syncWritesEnv = "FLEET_STATE_SYNC_WRITES"

// storeOptions returns the options of the store on disk that the
// environment asks for.
func storeOptions() (*fleetstate.Options, error) {
	v := os.Getenv(syncWritesEnv)
	if v == "" {
		return nil, nil
	}
	sync, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("$%s is %q: want true or false (1 or 0)", syncWritesEnv, v)
	}
	return &fleetstate.Options{SyncWrites: sync}, nil
}

// openStore opens the store of dir on the disk and its tokens.
func openStore(dir string) (*fleetstate.Store, *mcpadapter.Tokens, error) {
	opts, err := storeOptions()
	if err != nil {
		return nil, nil, err
	}
	store, err := fleetstate.Open(nil, dir, opts)
	if err != nil {
		return nil, nil, err
	}
	tokens, err := mcpadapter.OpenTokens(store)
	return store, tokens, err
}

// openStoreOnly opens the store and its tokens without the rendezvous: the
// stdio server beside a daemon that owns the fleet, or without an agent.
// The fleet tools are listed and answer elsewhere.
func openStoreOnly(dir string, elsewhere error) (*state, error) {
	store, tokens, err := openStore(dir)
	if err != nil {
		return nil, err
	}
	s := &state{store: store, tokens: tokens}
	s.adapter = mcpadapter.New(store, nil, &mcpadapter.Options{
		RolesConfigured: func() bool { return tokens.Len() > 0 },
		FleetElsewhere:  elsewhere,
	})
	return s, nil
}

// ownedHint turns an ErrFleetOwned of NewRendezvous into the command's
// error: the directory, the owner, the code and what to do.
func ownedHint(err error) error {
	var owned *fleetstate.OwnedError
	if fleetstate.CodeOf(err) != fleetstate.CodeFleetOwned || !errors.As(err, &owned) {
		return err
	}
	who, url := "another process", "URL"
	if owned.Owner.PID != 0 {
		who = "another process (" + owned.Owner.String() + ")"
	}
	if strings.HasPrefix(owned.Owner.Addr, "http") {
		url = owned.Owner.Addr
	}
	return fmt.Errorf("%s: the state directory %s is owned by %s; stop it, use another --dir, or reach its fleet with fleetstate mcp --connect %s",
		fleetstate.CodeFleetOwned, owned.Dir, who, url)
}

// pruneMembers removes from rv the members that turns restored from disk
// name but that are no longer members (their tokens were revoked while no
// process owned the fleet): their turns end at once, member_removed.
func pruneMembers(rv *fleetstate.Rendezvous) {
	for _, name := range rv.Unregistered() {
		_ = rv.RemoveMember(name) // only a closed rendezvous refuses, and then nothing is left to end
	}
}

// fleetElsewhere is the error of the fleet tools of a stdio server that
// does not own the fleet: where the fleet is, and how to reach it; noDaemon
// says what to do when no daemon owns it.
func fleetElsewhere(store *fleetstate.Store, noDaemon string) error {
	o, owned, _ := store.FleetOwner()
	if !owned {
		return &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "fleet", Err: errors.New(noDaemon)}
	}
	where := "the daemon's URL"
	if strings.HasPrefix(o.Addr, "http") {
		where = o.Addr
	}
	return &fleetstate.Error{Code: fleetstate.CodeFleetOwned, Op: "fleet",
		Err: fmt.Errorf("the fleet is served by %s; reach it with fleetstate mcp --connect %s and a token in $FLEET_TOKEN", o, where)}
}

// The daemon's bounds on its callers, each a flag of serve; SECURITY.md
// tells what they leave an attacker.
const (
	// sessionIdleTTL is how long the daemon remembers an MCP session that
	// makes no call and holds no listening stream: long enough for any
	// agent's quiet spell, short enough that sessions of killed clients
	// do not pile up.
	sessionIdleTTL = 30 * time.Minute
	// idleTimeout closes a keep-alive connection that sends no request
	// that long. Go's HTTP client forgets idle connections after 90 s,
	// so a client normally closes first; a listening stream is a request
	// in progress, never idle.
	idleTimeout = 2 * time.Minute
	// headerTimeout bounds the reading of a request's headers, from the
	// connection's start: a caller that connects and sends nothing holds
	// its descriptor that long at most.
	headerTimeout = 10 * time.Second
	// maxConns bounds the connections served at once, below the usual
	// descriptor limit (1024 soft, raised by Go to the hard limit).
	maxConns = 1024
)

// holdReturned is how long the daemon keeps on its ticket an outcome that a
// lead's call returned, when that connection does not call again and the
// lead does not ack it: long enough for a lead whose connection broke to
// reconnect and poll, short enough that leads which never ack leave no
// pile.
const holdReturned = 15 * time.Minute

// rendezvousFlags adds the flags of the rendezvous bounds to fs.
func rendezvousFlags(fs *flag.FlagSet) *fleetstate.RendezvousOptions {
	o := &fleetstate.RendezvousOptions{}
	fs.DurationVar(&o.SendTimeout, "send-timeout", fleetstate.DefaultSendTimeout, "bound of a blocking fleet_send")
	fs.DurationVar(&o.AskTimeout, "ask-timeout", fleetstate.DefaultAskTimeout, "window of a member's fleet_ask")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", fleetstate.DefaultReadyTimeout, "how long a message waits for its member to be ready")
	fs.DurationVar(&o.RejoinTimeout, "rejoin-timeout", fleetstate.DefaultRejoinTimeout, "after a restart, how long a member with an open turn has to come back")
	fs.DurationVar(&o.HoldReturned, "hold-returned", holdReturned, "how long an outcome a lead's call returned stays on its ticket when the lead neither acks it nor calls again on that connection")
	return o
}

func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := newFlagSet("mcp")
	dir := fs.String("dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	agent := fs.String("agent", os.Getenv("FLEET_AGENT"), "the caller's agent name (default $FLEET_AGENT)")
	role := fs.String("role", os.Getenv("FLEET_ROLE"), "the caller's role, lead or member (default $FLEET_ROLE)")
	connect := fs.String("connect", "", "forward every tool to the daemon at this URL, authenticated by $FLEET_TOKEN; several comma-separated URLs of one fleet's daemons fail over between them")
	var nf natsFlags
	nf.add(fs, false)
	rvOpts := rendezvousFlags(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp: unexpected argument %q: mcp takes flags only (fleetstate --help lists the commands)", fs.Arg(0))
	}
	if *connect != "" {
		token := os.Getenv("FLEET_TOKEN")
		if token == "" {
			return errors.New("mcp: --connect needs the agent's token in $FLEET_TOKEN (fleetstate token add, or the agent's environment from fleetstate up)")
		}
		// The identity is the token's; an --agent or --role (or
		// $FLEET_AGENT, $FLEET_ROLE) that says otherwise is a mistake.
		urls := splitURLs(*connect)
		if len(urls) == 0 {
			return fmt.Errorf("mcp: --connect %q names no URL: give a daemon's URL, or several separated by commas", *connect)
		}
		if err := checkTokenIdentity(ctx, urls, token, *agent, *role); err != nil {
			return err
		}
		p, err := mcpadapter.NewFailoverProxy(ctx, urls, token, &mcpadapter.ProxyOptions{Version: version, Logger: log})
		if err != nil {
			return fmt.Errorf("mcp: %v", err)
		}
		defer p.Close()
		return serveStdio(ctx, p.Server(), mcpadapter.Identity{}, stdin, stdout, stderr)
	}
	id := mcpadapter.Identity{}
	if *agent != "" || *role != "" {
		r, err := mcpadapter.ParseRole(*role)
		if err != nil {
			return fmt.Errorf("--role: %w", err)
		}
		if err := fleetstate.ValidateAgentName(*agent); err != nil {
			return fmt.Errorf("--agent: %w", err)
		}
		id = mcpadapter.Identity{Agent: *agent, Role: r}
	}
	// On a fleet in NATS a stdio server serves the store; the fleet is
	// its daemons'.
	if nf.url != "" {
		if *dir != "" {
			return errors.New("mcp: --dir and --nats: a fleet on NATS keeps its files there; give one or the other")
		}
		if err := nf.check(false); err != nil {
			return err
		}
		st, closeFleet, err := natsStdio(ctx, &nf, log)
		if err != nil {
			return err
		}
		defer closeFleet()
		return serveAdapterStdio(ctx, st, id, stdin, stdout, stderr)
	}
	// A stdio server runs the fleet of its directory only for a named
	// agent and only if no other process owns it; otherwise it serves the
	// store, and its fleet tools say where the fleet is.
	var st *state
	var err error
	if !id.Anonymous() {
		rvOpts.Addr = fmt.Sprintf("stdio server of %s %s (fleetstate mcp)", id.Role, id.Agent)
		st, err = openState(*dir, log, rvOpts)
		if fleetstate.CodeOf(err) == fleetstate.CodeFleetOwned {
			st, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	if st == nil {
		opts, err := storeOptions()
		if err != nil {
			return err
		}
		store, err := fleetstate.Open(nil, *dir, opts)
		if err != nil {
			return err
		}
		if st, err = openStoreOnly(*dir, fleetElsewhere(store,
			"no daemon serves this state directory's fleet: start one with fleetstate serve, then reach it with fleetstate mcp --connect URL and a token in $FLEET_TOKEN")); err != nil {
			return err
		}
	}
	if st.rv != nil {
		defer st.rv.Close()
		if id.Role == mcpadapter.RoleMember {
			if err := st.rv.AddMember(id.Agent, nil); err != nil {
				return err
			}
		}
		pruneMembers(st.rv)
	}
	return serveAdapterStdio(ctx, st, id, stdin, stdout, stderr)
}

// serveAdapterStdio serves st's adapter over stdin and stdout until stdin
// ends or ctx is done. The adapter's own stdio server decodes a tool call
// once and runs calls in parallel; it leaves the rest of the protocol to
// mcp-go.
func serveAdapterStdio(ctx context.Context, st *state, id mcpadapter.Identity, stdin io.Reader, stdout, stderr io.Writer) error {
	srv := st.adapter.NewServer("fleetstate", version)
	err := st.adapter.ServeStdio(ctx, srv, id, stdin, stdout, &mcpadapter.StdioOptions{ErrorLog: stdioErrorLog(stderr)})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// serveStdio serves srv, the proxy's, over stdin and stdout until stdin
// ends or ctx is done. Blocking tools get enough workers not to starve each
// other.
func serveStdio(ctx context.Context, srv *server.MCPServer, id mcpadapter.Identity, stdin io.Reader, stdout, stderr io.Writer) error {
	s := server.NewStdioServer(srv)
	server.WithErrorLogger(stdioErrorLog(stderr))(s)
	server.WithWorkerPoolSize(100)(s)
	server.WithQueueSize(1000)(s)
	server.WithStdioContextFunc(func(ctx context.Context) context.Context {
		return mcpadapter.ContextWithIdentity(ctx, id)
	})(s)
	err := s.Listen(ctx, stdin, stdout)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// stdioErrorLog is where a stdio server logs its transport's errors.
func stdioErrorLog(stderr io.Writer) *log.Logger {
	return log.New(stderr, "fleetstate: ", log.LstdFlags)
}

// serveConfig is what the flags of serve say.
type serveConfig struct {
	addr, dir, rosterPath, notifyCmd    string
	anonymous                           bool
	idle, header, sessionTTL, tokenPoll time.Duration
	conns, perToken, sessions           int
	rvOpts                              *fleetstate.RendezvousOptions
	nats                                natsFlags
	// embed runs node in the daemon (--nats-node) and keeps the fleet
	// there.
	embed bool
	node  natsNodeFlags
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := newFlagSet("serve")
	var c serveConfig
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7333", "address to listen on (loopback unless told otherwise)")
	fs.StringVar(&c.dir, "dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	fs.BoolVar(&c.anonymous, "anonymous", false, "let callers without a token use the store tools (never the fleet tools)")
	fs.StringVar(&c.rosterPath, "roster", "", "a roster file naming the fleet's agents and their tmux panes")
	fs.DurationVar(&c.idle, "idle-timeout", idleTimeout, "close a keep-alive connection idle this long")
	fs.DurationVar(&c.header, "header-timeout", headerTimeout, "bound on reading a request's headers")
	fs.IntVar(&c.conns, "max-conns", maxConns, "connections served at once; more wait for one to close (0: no limit)")
	fs.IntVar(&c.perToken, "max-sessions-per-token", mcpadapter.DefaultMaxSessionsPerToken, "live MCP sessions per token holder (anonymous callers share one count; -1: no limit)")
	fs.IntVar(&c.sessions, "max-sessions", mcpadapter.DefaultMaxSessions, "live MCP sessions in all (-1: no limit)")
	fs.DurationVar(&c.sessionTTL, "session-ttl", sessionIdleTTL, "forget an MCP session idle this long")
	fs.DurationVar(&c.tokenPoll, "token-poll", mcpadapter.DefaultTokenPoll, "how often the token file is looked at for added and revoked tokens")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	fs.StringVar(&c.notifyCmd, "notify", "", "a shell command run with the event as JSON on its standard input when a member asks, turns BLOCKED, a detached ticket finishes or a turn fails")
	c.rvOpts = rendezvousFlags(fs)
	c.nats.add(fs, true)
	fs.BoolVar(&c.embed, "nats-node", false, "run a NATS server with JetStream inside this daemon, as fleetstate nats does (its flags here start with --nats-: --nats-addr, --nats-store-dir, --nats-cluster, --nats-routes, ...), and keep the fleet there, reached in process; other daemons reach the fleet at its --nats-addr")
	c.node.add(fs, "nats-")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q: serve takes flags only", fs.Arg(0))
	}
	for name, d := range map[string]time.Duration{"--idle-timeout": c.idle, "--header-timeout": c.header, "--session-ttl": c.sessionTTL, "--token-poll": c.tokenPoll} {
		if d <= 0 {
			return fmt.Errorf("%s %v: must be positive", name, d)
		}
	}
	var err error
	if log, err = newLogger(stderr, *logLevel, *logFormat); err != nil {
		return err
	}
	if c.conns < 0 {
		return fmt.Errorf("--max-conns %d: must be positive, or 0 for no limit", c.conns)
	}
	for name, n := range map[string]int{"--max-sessions-per-token": c.perToken, "--max-sessions": c.sessions} {
		if n == 0 || n < -1 {
			return fmt.Errorf("%s %d: must be positive, or -1 for no limit", name, n)
		}
	}
	if c.embed && c.nats.url != "" {
		return errors.New("serve: --nats-node and --nats: a daemon with its own node keeps the fleet there; the other daemons name that node's --nats-addr in their --nats")
	}
	if (c.nats.url != "" || c.embed) && c.dir != "" {
		return errors.New("serve: --dir and --nats: a fleet on NATS keeps its whole state there; give one or the other")
	}
	if err := c.nats.check(c.embed); err != nil {
		return err
	}
	// Listen first, so that the ownership of the directory can say where
	// the fleet is served.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	if c.conns > 0 {
		ln = newLimitListener(ln, c.conns, log)
	}
	if c.embed {
		return serveNATSNode(ctx, c, ln, log)
	}
	if c.nats.url != "" {
		return serveNATS(ctx, c, ln, log)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	c.rvOpts.Addr = url
	st, err := openState(c.dir, log, c.rvOpts)
	if err != nil {
		ln.Close()
		return ownedHint(err)
	}
	panes := map[string]*tmux.Pane{}
	if c.rosterPath != "" {
		ro, err := loadRoster(c.rosterPath, st.store.Dir())
		if err == nil {
			panes, err = ro.apply(st.rv)
		}
		if err != nil {
			st.rv.Close()
			ln.Close()
			return err
		}
	}
	fh, err := startFleetHTTP(ctx, st, c, log, func(agent string) fleetstate.Member {
		if p := panes[agent]; p != nil {
			return p
		}
		return nil
	}, reportTo(st.rv, panes))
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: fh.mux, ReadHeaderTimeout: c.header, IdleTimeout: c.idle,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("fleetstate: serving MCP", "url", url, "dir", st.store.Dir(), "anonymous", c.anonymous)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		fh.close()
		return err
	case <-ctx.Done():
	}
	log.Info("fleetstate: shutting down")
	fh.close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}

// fleetHTTP is what serves one rendezvous over HTTP: the MCP handler with
// its membership, the event stream, the dashboard, the event log and the
// notifications.
type fleetHTTP struct {
	mux     *http.ServeMux
	st      *state
	members *mcpadapter.Membership
	handler *mcpadapter.Handler
	dash    *mcpadapter.Dashboard
}

// startFleetHTTP serves st's rendezvous. port gives the member port of an
// agent whose token appears; onStatus takes the status reports of hooks.
// On an error it closes st's rendezvous.
func startFleetHTTP(ctx context.Context, st *state, c serveConfig, log *slog.Logger, port func(string) fleetstate.Member, onStatus func(mcpadapter.Identity, fleetstate.Status) error) (*fleetHTTP, error) {
	pruneMembers(st.rv)
	// The token file is the roster of identities, read live: a token added
	// makes a member at once (with its roster pane, if it has one), a
	// token revoked ends its holder's streams, sessions and turns.
	members, err := mcpadapter.WatchMembership(st.tokens, st.rv, &mcpadapter.MembershipOptions{
		Poll: c.tokenPoll, Logger: log, Port: port,
	})
	if err != nil {
		st.rv.Close()
		return nil, err
	}
	srv := st.adapter.NewServer("fleetstate", version)
	handler := st.adapter.HTTPHandler(srv, mcpadapter.HTTPOptions{Tokens: st.tokens, Anonymous: c.anonymous,
		OnStatus: onStatus, SessionIdleTTL: c.sessionTTL,
		MaxSessionsPerToken: c.perToken, MaxSessions: c.sessions, Membership: members})
	// What happens in the fleet: one structured log line per event, the
	// notification command, and the event stream for views.
	operator, err := mcpadapter.NewOperatorToken(st.store)
	if err != nil {
		members.Close()
		st.rv.Close()
		handler.Close()
		return nil, err
	}
	logSub, _ := st.rv.Subscribe(4096)
	go logEvents(log, logSub)
	if c.notifyCmd != "" {
		notifySub, _ := st.rv.Subscribe(256)
		go notify(ctx, log, c.notifyCmd, notifySub)
	}
	dash := mcpadapter.NewDashboard(st.rv, &mcpadapter.DashboardOptions{Operator: operator, Tokens: st.tokens, Version: version})
	mux := http.NewServeMux()
	mux.Handle(mcpadapter.EventsPath, mcpadapter.EventsHandler(st.rv, mcpadapter.EventsOptions{Tokens: st.tokens, Operator: operator, Authorize: dash.Authorized}))
	mux.Handle(mcpadapter.DashboardPath, dash)
	mux.Handle("/", handler)
	return &fleetHTTP{mux: mux, st: st, members: members, handler: handler, dash: dash}, nil
}

// close stops serving the rendezvous and closes it. The membership stops
// first, so that nothing is added or removed while the rest closes.
// Closing the rendezvous then returns every blocked call (a lead's send
// with its ticket), and closing the handler ends the listening streams, so
// that an HTTP shutdown does not wait on them.
func (fh *fleetHTTP) close() {
	fh.members.Close()
	fh.st.rv.Close()
	fh.handler.Close()
	fh.dash.Close()
}
