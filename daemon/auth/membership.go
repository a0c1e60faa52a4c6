package auth

import (
	"log/slog"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/fleetstate/fleetstate"
)

// DefaultTokenPoll is how often a [Membership] looks at the token file. The
// file is tiny and a look is one stat (the file is read only when its size
// or modification time changed), so polling is cheaper than it sounds and
// needs no file-notification machinery, which would also miss changes on
// network file systems; five looks a second end a revoked token's streams
// well within a second.
const DefaultTokenPoll = 200 * time.Millisecond

// MembershipOptions configure a [Membership]. A nil *MembershipOptions
// means the defaults.
type MembershipOptions struct {
	// Poll is how often the token file is looked at. Zero means
	// DefaultTokenPoll.
	Poll time.Duration
	// Port returns the port of a member added because its token appeared
	// (a roster's pane, say); nil, or a nil result, makes a member that
	// pulls its messages.
	Port func(agent string) fleetstate.Member
	// Logger receives a warning when the token file cannot be read. Nil
	// means slog.Default().
	Logger *slog.Logger
}

// Membership keeps the rendezvous in step with the token file, which is
// the roster of the fleet's identities, read live:
//
//   - an agent that gets a member token is a member at once (known, not
//     ready until its first call, as for a member known at start), so that
//     a message to it queues instead of failing with ERR_UNKNOWN_MEMBER; a
//     member already registered (with a pane, say) is left as it is;
//   - an agent whose last member token is revoked is removed (see
//     [fleetstate.Rendezvous.RemoveMember]: its queued and open turns end
//     failed with reason member_removed);
//   - every identity that loses its last token is reported to the HTTP
//     handlers that watch it (see daemon/mcphttp's Options.Membership), which end its
//     requests and its MCP sessions.
//
// A Membership is safe for concurrent use. Close stops it.
type Membership struct {
	tokens *Tokens
	rv     *fleetstate.Rendezvous
	opt    MembershipOptions

	syncMu  sync.Mutex                   // serializes Sync
	known   map[mcpadapter.Identity]bool // guarded by syncMu; the identities of the last Sync
	version uint64                       // guarded by syncMu; of the token entries known comes from
	failed  bool                         // guarded by syncMu; the last Sync could not read the file

	mu   sync.Mutex
	subs map[*func(mcpadapter.Identity)]struct{} // guarded by mu

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// WatchMembership applies the token file to rv at once (every member token
// makes a member) and then watches it until Close. rv may be nil: only the
// revocations are then reported.
func WatchMembership(tokens *Tokens, rv *fleetstate.Rendezvous, opts *MembershipOptions) (*Membership, error) {
	m := &Membership{tokens: tokens, rv: rv, known: map[mcpadapter.Identity]bool{},
		subs: map[*func(mcpadapter.Identity)]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	if opts != nil {
		m.opt = *opts
	}
	if m.opt.Poll <= 0 {
		m.opt.Poll = DefaultTokenPoll
	}
	if m.opt.Logger == nil {
		m.opt.Logger = slog.Default()
	}
	if err := m.Sync(); err != nil {
		return nil, err
	}
	go m.watch()
	return m, nil
}

func (m *Membership) watch() {
	defer close(m.done)
	t := time.NewTicker(m.opt.Poll)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			_ = m.Sync() // logged by Sync
		}
	}
}

// Close stops watching. It is idempotent.
func (m *Membership) Close() error {
	m.closeOnce.Do(func() {
		close(m.stop)
		<-m.done
	})
	return nil
}

// Sync reads the token file now, if it changed, and applies what changed
// since the last Sync. The watcher calls it every Poll.
func (m *Membership) Sync() error { return m.apply(m.tokens.identities) }

// Resync is Sync for a call that named a member the rendezvous does not
// know, which another process may have given a token a moment ago: the
// token file is looked at again, read from its source (the bucket on
// NATS, rather than the watch's copy), and what changed is applied, so
// that the call, made again, finds the member. Calls at once share one
// look; a flood of unknown names makes at most one look at a time (see
// the adapter's [Options].Resync).
func (m *Membership) Resync() error {
	seen := m.tokens.rechecks.Load()
	return m.apply(func() (map[mcpadapter.Identity]bool, uint64, error) { return m.tokens.recheckedIdentities(seen) })
}

// apply applies the identities that look returns, with their version,
// if they changed since the last apply.
func (m *Membership) apply(look func() (map[mcpadapter.Identity]bool, uint64, error)) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	cur, version, err := look()
	if err != nil {
		// A file that cannot be read changes nothing here (the handler
		// refuses every token meanwhile); said once, not every Poll.
		if !m.failed {
			m.opt.Logger.Warn("fleetstate: the token file cannot be read; membership unchanged until it can", "err", err)
		}
		m.failed = true
		return err
	}
	if !m.failed && version == m.version {
		// The file did not change: nothing to apply, and no walk over
		// every member and identity at every Poll.
		return nil
	}
	m.failed = false
	var present map[string]bool
	if m.rv != nil {
		present = map[string]bool{}
		for _, mi := range m.rv.Members() {
			present[mi.Name] = true
		}
	}
	for id := range cur {
		if m.known[id] || id.Role != mcpadapter.RoleMember || m.rv == nil || present[id.Agent] {
			continue
		}
		var port fleetstate.Member
		if m.opt.Port != nil {
			port = m.opt.Port(id.Agent)
		}
		if err := m.rv.AddMember(id.Agent, port); err != nil {
			m.opt.Logger.Warn("fleetstate: a new member token makes no member", "agent", id.Agent, "err", err)
		}
	}
	var gone []mcpadapter.Identity
	for id := range m.known {
		if !cur[id] {
			gone = append(gone, id)
		}
	}
	m.known, m.version = cur, version
	for _, id := range gone {
		// The member leaves the rendezvous first, so that its turns end
		// as member_removed rather than as member_gone when its streams
		// close.
		if id.Role == mcpadapter.RoleMember && m.rv != nil {
			if err := m.rv.RemoveMember(id.Agent); err != nil {
				m.opt.Logger.Warn("fleetstate: a revoked member stays", "agent", id.Agent, "err", err)
			}
		}
		for _, f := range m.subscribers() {
			f(id)
		}
	}
	return nil
}

func (m *Membership) subscribers() []func(mcpadapter.Identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]func(mcpadapter.Identity), 0, len(m.subs))
	for f := range m.subs {
		out = append(out, *f)
	}
	return out
}

// OnRevoke makes Sync call f with every identity that lost its last token,
// until the returned function is called.
func (m *Membership) OnRevoke(f func(mcpadapter.Identity)) (stop func()) {
	key := &f
	m.mu.Lock()
	m.subs[key] = struct{}{}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.subs, key)
		m.mu.Unlock()
	}
}
