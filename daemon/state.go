package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// state is what a daemon serves: the store, its rendezvous and tokens.
type state struct {
	store   *fleetstate.Store
	rv      *fleetstate.Rendezvous // nil when the fleet is served elsewhere
	tokens  *auth.Tokens
	adapter *mcpadapter.Adapter
	conns   *mcphttp.Connections // nil without rv
	// members keeps rv in step with tokens once rv is served over HTTP
	// (startFleetHTTP); nil before, and for a stdio server.
	members atomic.Pointer[auth.Membership]
	// leadsDecide: the fleet file lets leads decide permission requests.
	leadsDecide atomic.Bool
	// worktrees serves fleet_changes and fleet_merge when the fleet file
	// gives a member a work tree; nil otherwise.
	worktrees *worktrees
}

// resync is the adapter's Options.Resync: the membership's, if any.
func (s *state) resync() {
	if m := s.members.Load(); m != nil {
		_ = m.Resync() // logged by the membership; the call then answers as it is
	}
}

// openStore opens the store of the state directory on the disk and its
// tokens.
func (d *Daemon) openStore() (*fleetstate.Store, *auth.Tokens, error) {
	var opts *fleetstate.Options
	if d.cfg.SyncWrites {
		opts = &fleetstate.Options{SyncWrites: true}
	}
	store, err := fleetstate.Open(nil, d.cfg.Dir, opts)
	if err != nil {
		return nil, nil, err
	}
	tokens, err := auth.OpenTokens(store)
	return store, tokens, err
}

// openState opens the state directory and runs its fleet's rendezvous
// with opts.
func (d *Daemon) openState(opts *fleetstate.RendezvousOptions) (*state, error) {
	store, tokens, err := d.openStore()
	if err != nil {
		return nil, err
	}
	rv, err := d.newRendezvous(store, opts)
	if err != nil {
		return nil, err
	}
	return newState(store, rv, tokens, nil)
}

// newRendezvous runs the fleet's rendezvous on store with the daemon's
// settings over opts.
func (d *Daemon) newRendezvous(store *fleetstate.Store, opts *fleetstate.RendezvousOptions) (*fleetstate.Rendezvous, error) {
	o := *opts
	o.Logger = d.log
	// A caller holding a member token added while the server runs is a
	// member as soon as it calls (the membership adds it too, on its next
	// look at the token file).
	o.AddOnReady = true
	if o.HoldReturned <= 0 {
		o.HoldReturned = DefaultHoldReturned // and released per connection by the adapter
	}
	return fleetstate.NewRendezvous(store, &o)
}

// newState serves rv: every agent holding a member token is a member,
// known but not ready until its connection makes its first call, behind
// the port that port gives (nil, or a nil port: it pulls). On an error it
// closes rv.
func newState(store *fleetstate.Store, rv *fleetstate.Rendezvous, tokens *auth.Tokens, port func(string) fleetstate.Member) (*state, error) {
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
	s := &state{store: store, rv: rv, tokens: tokens, conns: mcphttp.NewConnections(rv)}
	s.adapter = mcpadapter.New(store, rv, &mcpadapter.Options{
		RolesConfigured: func() bool { return tokens.Len() > 0 },
		MarkReady:       true,
		Connections:     s.conns,
		Resync:          s.resync,
		LeadsDecide:     s.leadsDecide.Load,
	})
	return s, nil
}

// ownedHint turns an ErrFleetOwned of NewRendezvous into the daemon's
// error: the directory, the owner, the code and what to do. It wraps err,
// so that errors.Is(err, fleetstate.ErrFleetOwned) holds.
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
	return &hintError{err: err, msg: fmt.Sprintf("%s: the state directory %s is owned by %s; stop it, use another --dir, or reach its fleet with fleetstate mcp --connect %s",
		fleetstate.CodeFleetOwned, owned.Dir, who, url)}
}

// hintError is an error told in other words: what to do about it.
type hintError struct {
	err error
	msg string
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Unwrap() error { return e.err }

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

// ServeStdio serves MCP over in and out, to the one caller id, until in
// ends or ctx is done or Close is called; it returns nil then, and
// [ErrClosed] at once on a Daemon that was closed or served already.
//
// On the disk, it runs the fleet of the state directory for a named caller
// (a member is added to it) when no other process owns it; otherwise, and
// for an anonymous caller, it serves the store, and the fleet tools say
// where the fleet is served. On NATS it serves the store; the fleet is its
// daemons'. Config's HTTP fields, Roster and Notify are not used.
func (d *Daemon) ServeStdio(ctx context.Context, id mcpadapter.Identity, in io.Reader, out io.Writer) error {
	ctx, end, err := d.start(ctx)
	if err != nil {
		return err
	}
	defer end()
	var st *state
	switch {
	case d.cfg.NATS != nil:
		f, err := d.cfg.NATS.Connect(ctx, d.log, "fleetstate mcp")
		if err != nil {
			return err
		}
		defer f.Close()
		store := fleetstate.OpenBackend(f.Store(), &fleetstate.BackendOptions{Timeout: natsStoreTimeout})
		elsewhere := fleetElsewhere(store, "no daemon serves this fleet: start one with fleetstate serve --nats, then reach it with fleetstate mcp --connect URL and a token in $FLEET_TOKEN")
		st = &state{store: store}
		st.adapter = mcpadapter.New(store, nil, &mcpadapter.Options{FleetElsewhere: elsewhere})
	default:
		if st, err = d.openStdio(id); err != nil {
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
	// The adapter's own stdio server decodes a tool call once and runs
	// calls in parallel; it leaves the rest of the protocol to mcp-go.
	srv := st.adapter.NewServer("fleetstate", d.cfg.Version)
	err = st.adapter.ServeStdio(ctx, srv, id, in, out, &mcpadapter.StdioOptions{ErrorLog: d.cfg.ErrorLog})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// openStdio opens what a stdio server of the state directory serves to
// id: the fleet, or the store alone.
func (d *Daemon) openStdio(id mcpadapter.Identity) (*state, error) {
	if !id.Anonymous() {
		opts := d.cfg.Rendezvous
		opts.Addr = fmt.Sprintf("stdio server of %s %s (fleetstate mcp)", id.Role, id.Agent)
		st, err := d.openState(&opts)
		if fleetstate.CodeOf(err) != fleetstate.CodeFleetOwned {
			return st, err
		}
	}
	store, tokens, err := d.openStore()
	if err != nil {
		return nil, err
	}
	elsewhere := fleetElsewhere(store, "no daemon serves this state directory's fleet: start one with fleetstate serve, then reach it with fleetstate mcp --connect URL and a token in $FLEET_TOKEN")
	st := &state{store: store, tokens: tokens}
	st.adapter = mcpadapter.New(store, nil, &mcpadapter.Options{
		RolesConfigured: func() bool { return tokens.Len() > 0 },
		FleetElsewhere:  elsewhere,
	})
	return st, nil
}
