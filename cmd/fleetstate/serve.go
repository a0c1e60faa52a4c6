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
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/daemon/proxy"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

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

// rendezvousFlags adds the flags of the rendezvous bounds to fs.
func rendezvousFlags(fs *flag.FlagSet, o *fleetstate.RendezvousOptions) {
	fs.DurationVar(&o.SendTimeout, "send-timeout", fleetstate.DefaultSendTimeout, "bound of a blocking fleet_send")
	fs.DurationVar(&o.AskTimeout, "ask-timeout", fleetstate.DefaultAskTimeout, "window of a member's fleet_ask")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", fleetstate.DefaultReadyTimeout, "how long a message waits for its member to be ready")
	fs.DurationVar(&o.RejoinTimeout, "rejoin-timeout", fleetstate.DefaultRejoinTimeout, "after a restart, how long a member with an open turn has to come back")
	fs.DurationVar(&o.PresenceWindow, "presence-window", fleetstate.DefaultPresenceWindow, "how long a member whose connection went keeps its open turn and question; negative: none")
	fs.DurationVar(&o.HoldReturned, "hold-returned", daemon.DefaultHoldReturned, "how long an outcome a lead's call returned stays on its ticket when the lead neither acks it nor calls again on that connection")
}

// natsFlags are the flags that put a command on a fleet in NATS.
type natsFlags struct{ daemon.NATSConfig }

func (n *natsFlags) add(fs *flag.FlagSet, daemon bool) {
	fs.StringVar(&n.URL, "nats", os.Getenv("FLEET_NATS"), "keep the fleet in NATS JetStream at these server URLs, comma-separated (default $FLEET_NATS)")
	fs.StringVar(&n.Fleet, "fleet", envOr("FLEET_NAME", fleetnats.DefaultFleet), "with --nats: the fleet's name; daemons with the same --nats and --fleet serve one fleet")
	fs.StringVar(&n.CredsFile, "nats-creds", "", "with --nats: a NATS credentials file")
	fs.IntVar(&n.Replicas, "replicas", 0, "with --nats: replication factor of the fleet's streams and buckets when they are created (default 3 on a cluster of 3 or more servers, else 1)")
	if daemon {
		fs.StringVar(&n.Advertise, "advertise", "", "with --nats: the URL other daemons reach this one at (default http://ADDR/mcp)")
		fs.DurationVar(&n.LeaseTTL, "lease", fleetnats.DefaultLeaseTTL, "with --nats: how long a dead owner's lease outlives it, before another daemon takes the fleet over")
	}
}

// check checks the flags of a fleet on NATS, if the command is on one:
// --nats given, or embedded, a daemon with its own node.
func (n *natsFlags) check(embedded bool) error {
	if n.URL == "" && !embedded {
		return nil
	}
	if err := fleetnats.ValidateFleetName(n.Fleet); err != nil {
		return fmt.Errorf("--fleet: %v", err)
	}
	if n.Replicas < 0 || n.Replicas > 5 {
		return fmt.Errorf("--replicas %d: want 1 to 5", n.Replicas)
	}
	if n.LeaseTTL < 0 {
		return fmt.Errorf("--lease %v: must be positive", n.LeaseTTL)
	}
	if n.Advertise != "" {
		u, err := url.Parse(n.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--advertise %q: want an http:// or https:// URL", n.Advertise)
		}
	}
	return nil
}

func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := newFlagSet("mcp")
	dir := fs.String("dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	agent := fs.String("agent", os.Getenv("FLEET_AGENT"), "the caller's agent name (default $FLEET_AGENT)")
	role := fs.String("role", os.Getenv("FLEET_ROLE"), "the caller's role, lead or member (default $FLEET_ROLE)")
	connect := fs.String("connect", "", "forward every tool to the daemon at this URL, authenticated by $FLEET_TOKEN; several comma-separated URLs of one fleet's daemons fail over between them")
	var nf natsFlags
	nf.add(fs, false)
	cfg := daemon.Config{Logger: log, ErrorLog: stdioErrorLog(stderr), Version: version}
	rendezvousFlags(fs, &cfg.Rendezvous)
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
		p, err := proxy.NewFailover(ctx, urls, token, &proxy.Options{Version: version, Logger: log})
		if err != nil {
			return fmt.Errorf("mcp: %v", err)
		}
		defer p.Close()
		return serveStdio(ctx, p.Server(), stdin, stdout, stderr)
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
	if nf.URL != "" {
		if *dir != "" {
			return errors.New("mcp: --dir and --nats: a fleet on NATS keeps its files there; give one or the other")
		}
		if err := nf.check(false); err != nil {
			return err
		}
		cfg.NATS = &nf.NATSConfig
	} else {
		opts, err := storeOptions()
		if err != nil {
			return err
		}
		cfg.Dir, cfg.SyncWrites = *dir, opts != nil && opts.SyncWrites
	}
	d, err := daemon.New(cfg)
	if err != nil {
		return err
	}
	return d.ServeStdio(ctx, id, stdin, stdout)
}

// serveStdio serves srv, the proxy's, over stdin and stdout until stdin
// ends or ctx is done. Blocking tools get enough workers not to starve each
// other.
func serveStdio(ctx context.Context, srv *server.MCPServer, stdin io.Reader, stdout, stderr io.Writer) error {
	s := server.NewStdioServer(srv)
	server.WithErrorLogger(stdioErrorLog(stderr))(s)
	server.WithWorkerPoolSize(100)(s)
	server.WithQueueSize(1000)(s)
	server.WithStdioContextFunc(func(ctx context.Context) context.Context {
		return mcpadapter.ContextWithIdentity(ctx, mcpadapter.Identity{})
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

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := newFlagSet("serve")
	var c daemon.Config
	addr := fs.String("addr", "127.0.0.1:7333", "address to listen on (loopback unless told otherwise)")
	fs.StringVar(&c.Dir, "dir", "", "state directory (default $FLEET_STATE_DIRECTORY or ./.ai-fleet-state)")
	fs.BoolVar(&c.Anonymous, "anonymous", false, "let callers without a token use the store tools (never the fleet tools)")
	fs.StringVar(&c.Roster, "roster", "", "a roster file naming the fleet's agents and their tmux panes")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", daemon.DefaultIdleTimeout, "close a keep-alive connection idle this long")
	fs.DurationVar(&c.HeaderTimeout, "header-timeout", daemon.DefaultHeaderTimeout, "bound on reading a request's headers")
	fs.IntVar(&c.MaxConns, "max-conns", daemon.DefaultMaxConns, "connections served at once; more wait for one to close (0: no limit)")
	fs.IntVar(&c.MaxSessionsPerToken, "max-sessions-per-token", mcphttp.DefaultMaxSessionsPerToken, "live MCP sessions per token holder (anonymous callers share one count; -1: no limit)")
	fs.IntVar(&c.MaxSessions, "max-sessions", mcphttp.DefaultMaxSessions, "live MCP sessions in all (-1: no limit)")
	fs.DurationVar(&c.SessionTTL, "session-ttl", daemon.DefaultSessionTTL, "forget an MCP session idle this long")
	fs.DurationVar(&c.TokenPoll, "token-poll", auth.DefaultTokenPoll, "how often the token file is looked at for added and revoked tokens")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	fs.StringVar(&c.Notify, "notify", "", "a shell command run with the event as JSON on its standard input when a member asks, turns BLOCKED, a detached ticket finishes or a turn fails")
	rendezvousFlags(fs, &c.Rendezvous)
	var nf natsFlags
	nf.add(fs, true)
	embed := fs.Bool("nats-node", false, "run a NATS server with JetStream inside this daemon, as fleetstate nats does (its flags here start with --nats-: --nats-addr, --nats-store-dir, --nats-cluster, --nats-routes, ...), and keep the fleet there, reached in process; other daemons reach the fleet at its --nats-addr")
	var node natsNodeFlags
	node.add(fs, "nats-")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q: serve takes flags only", fs.Arg(0))
	}
	for name, d := range map[string]time.Duration{"--idle-timeout": c.IdleTimeout, "--header-timeout": c.HeaderTimeout, "--session-ttl": c.SessionTTL, "--token-poll": c.TokenPoll} {
		if d <= 0 {
			return fmt.Errorf("%s %v: must be positive", name, d)
		}
	}
	var err error
	if c.Logger, err = newLogger(stderr, *logLevel, *logFormat); err != nil {
		return err
	}
	switch {
	case c.MaxConns < 0:
		return fmt.Errorf("--max-conns %d: must be positive, or 0 for no limit", c.MaxConns)
	case c.MaxConns == 0:
		c.MaxConns = -1 // no limit
	}
	for name, n := range map[string]int{"--max-sessions-per-token": c.MaxSessionsPerToken, "--max-sessions": c.MaxSessions} {
		if n == 0 || n < -1 {
			return fmt.Errorf("%s %d: must be positive, or -1 for no limit", name, n)
		}
	}
	if *embed && nf.URL != "" {
		return errors.New("serve: --nats-node and --nats: a daemon with its own node keeps the fleet there; the other daemons name that node's --nats-addr in their --nats")
	}
	if (nf.URL != "" || *embed) && c.Dir != "" {
		return errors.New("serve: --dir and --nats: a fleet on NATS keeps its whole state there; give one or the other")
	}
	if err := nf.check(*embed); err != nil {
		return err
	}
	if *embed {
		if nf.Node, err = node.options(); err != nil {
			return err
		}
	}
	if nf.URL != "" || *embed {
		c.NATS = &nf.NATSConfig
	} else {
		opts, err := storeOptions()
		if err != nil {
			return err
		}
		c.SyncWrites = opts != nil && opts.SyncWrites
	}
	c.Version = version
	d, err := daemon.New(c)
	if err != nil {
		return err
	}
	// Listen first, so that the ownership of the directory can say where
	// the fleet is served.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if err := d.Serve(ctx, ln); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// newLogger returns the daemon's logger on w: level debug, info, warn or
// error; format text or json.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
