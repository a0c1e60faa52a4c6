package fleetstate

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/permit"
	"github.com/fleetstate/fleetstate/internal/usage"
)

// Defaults of the rendezvous bounds. A blocking send answers before the
// usual MCP client limit of 60 s; an ask answers before the send that waits
// on it; the readiness gate fails before the send does, so a send to a
// member that never mounts reports member_not_ready itself.
const (
	DefaultSendTimeout  = 58 * time.Second
	DefaultAskTimeout   = 55 * time.Second
	DefaultReadyTimeout = 45 * time.Second
	DefaultMaxWait      = 55 * time.Second
	// DefaultNextWait is how long fleet_next without wait_s waits: under
	// the 60 s an MCP client waits for a result, and under DefaultMaxWait.
	// Next itself takes its wait as given; a wait of zero returns at once.
	DefaultNextWait     = 50 * time.Second
	DefaultPollInterval = 500 * time.Millisecond
	DefaultPickupGrace  = 3 * time.Second
	DefaultPortTimeout  = 10 * time.Second
	DefaultTailLines    = 200
	DefaultNudgeLimit   = 1
	// A reconnecting client comes back within seconds; a proxy whose
	// daemon died is on the next one within a second.
	DefaultRejoinTimeout  = 30 * time.Second
	DefaultPresenceWindow = 10 * time.Second
)

// DefaultExhaustedPatterns returns the patterns, matched case-insensitively
// against a member's pane tail, that mean its backend cannot work: spent
// credit, usage limits, rejected keys. The slice is a fresh copy.
func DefaultExhaustedPatterns() []string { return agent.ExhaustedPatterns() }

// RendezvousOptions configure a [Rendezvous]. A nil *RendezvousOptions, and
// every zero field, means the documented default.
type RendezvousOptions struct {
	// SendTimeout bounds a blocking send (and the wait of an answer) before
	// it returns a pending outcome with a ticket. Default DefaultSendTimeout.
	SendTimeout time.Duration
	// AskTimeout is the window of a member's question, after which the
	// member gets its default answer. Default DefaultAskTimeout.
	AskTimeout time.Duration
	// ReadyTimeout is how long a message waits for its member to become
	// ready before it fails with member_not_ready. Default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// MaxWait caps the wait of Next and Poll. Default DefaultMaxWait.
	MaxWait time.Duration
	// PollInterval is how often the status of a member with a port is read.
	// Default DefaultPollInterval.
	PollInterval time.Duration
	// PickupGrace is how long after a delivery is typed an idle member is
	// taken to have done a whole turn between two status reads, rather than
	// not to have started. Default DefaultPickupGrace.
	PickupGrace time.Duration
	// PortTimeout bounds each call to a member's port. Default DefaultPortTimeout.
	PortTimeout time.Duration
	// TailLines is the scrape window, in lines, of the pane tail read when
	// a turn ends without a reply. Default DefaultTailLines.
	TailLines int
	// ExhaustedPatterns are regular expressions, matched case-insensitively
	// against a pane tail, that mean the member's backend is spent. Nil means
	// [DefaultExhaustedPatterns]; an empty non-nil slice turns the check off.
	ExhaustedPatterns []string
	// NudgeLimit is how many times a lead with a port is nudged about one
	// finished detached ticket. Default DefaultNudgeLimit; negative turns
	// nudges off.
	NudgeLimit int
	// RejoinTimeout bounds how long a member that held an open turn before
	// a restart counts as ready without showing up: when it passes with no
	// call and no stream of the member, the turn ends member_gone. Default
	// DefaultRejoinTimeout.
	RejoinTimeout time.Duration
	// PresenceWindow is how long a pulling member keeps its open turn, and its
	// question, once its connection is gone (see [Rendezvous.Disconnect]).
	// Default DefaultPresenceWindow; negative ends the turn at once.
	PresenceWindow time.Duration
	// HoldReturned, if positive, keeps the outcome that a call of a lead
	// returned on its ticket until Ack or for HoldReturned, instead of
	// until the lead's next call. A server whose leads call over several
	// connections sets it, and acks such an outcome when the connection
	// that carried it calls again (the MCP adapter does): a call on one
	// connection says nothing of what another connection received, and a
	// connection that cannot be told apart from others is covered by the
	// hold alone. The hold's end is in the turn's record: a restart keeps
	// what is left of it, and at least RejoinTimeout.
	HoldReturned time.Duration
	// AddOnReady makes [Rendezvous.SetReady] of a name that is not a
	// registered member add it as a member that pulls its messages
	// (as AddMember with a nil port) before marking it ready: a server
	// whose callers are authenticated as members (by a token added while
	// it runs, say) lets them take work as soon as they call. Without it,
	// SetReady of an unknown name fails with [ErrUnknownMember].
	AddOnReady bool
	// Addr says where this process serves the fleet, such as the daemon's
	// URL. It is written beside the ownership of the state directory, so
	// that a second process refused with ErrFleetOwned can name it.
	Addr string
	// Journal, when not nil, keeps the turns instead of the store's state
	// directory, and makes this rendezvous the fleet's owner in its stead
	// (the caller obtained it as the owner; Addr is then not used). Close
	// closes it. Use it with a store opened with [OpenBackend] on the same
	// engine, so that the fleet's whole state lives there.
	Journal Journal
	// Logger receives what the rendezvous cannot return to a caller, such
	// as a failure to persist a state change. Nil means slog.Default().
	Logger *slog.Logger
}

// Rendezvous is where a lead hands work to member agents and gets their
// answers back. Every message opens a turn; every turn ends in one
// [Outcome]. See the package documentation for the flows, and for the
// ownership and restarts: what must not be lost is in the journal before
// the call that made it returns, and the next owner restores it.
//
// A Rendezvous is safe for concurrent use. Close releases every blocked call
// and stops the goroutines that watch members.
type Rendezvous struct {
	store   *Store
	j       *journal // the only writer of the state on disk; guarded by mu
	opt     RendezvousOptions
	exhaust agent.Exhausted
	log     *slog.Logger
	done    chan struct{}   // closed by Close
	ctx     context.Context // parent of calls to ports; cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// Pools of what each round trip would otherwise allocate: the timers
	// of Send and Next, lead's waiters, and the takers of parked Nexts.
	timers, waiters, takers sync.Pool

	// wmu serialises the writers of the journal: every call that may write
	// takes it before mu. A call on the hot path (Send, Next, Reply, Ack)
	// writes with wmu held and mu released, so that a slow disk holds up
	// the other writers only, never polls, member lists or the lock.
	wmu     sync.Mutex
	mu      sync.Mutex
	closed  bool                       // guarded by mu
	members map[string]*member         // guarded by mu; by name
	turns   map[string]*turn           // guarded by mu; by turn ID
	tickets map[string]*turn           // guarded by mu; by ticket ID
	leads   map[string]*lead           // guarded by mu; by name
	seq     int64                      // guarded by mu; order of queued messages
	freeing []*turn                    // guarded by mu and wmu; forgotten turns whose slots unlockW frees
	spare   []*turn                    // guarded by wmu; the emptied backing array of freeing, for reuse
	subs    map[*Subscription]struct{} // guarded by mu; see events.go
	evSeq   uint64                     // guarded by mu; of the last event published
	perms   permit.Desk                // guarded by mu; permission requests, see rendezvous_permission.go
	policy  PermissionPolicy           // guarded by mu
	budgets map[string]*budget         // guarded by mu; by member, "" for the fleet's; see rendezvous_budget.go
	prices  usage.Prices               // guarded by mu; of budgets in cost
	renewal *time.Timer                // guarded by mu; wakes the held members when a daily budget renews
}

// member is the rendezvous's view of one member agent. All fields are
// guarded by Rendezvous.mu.
type member struct {
	name       string
	registered bool   // AddMember was called; restored turns may name others
	port       Member // nil: the member pulls its messages with Next
	ready      bool
	queue      []*turn // FIFO of undelivered turns
	open       *turn   // the turn delivered and not yet ended
	took       string  // the turn delivered last, open or ended; "" before one (or a restart without an open turn)
	gate       gate
	status     Status        // the last status read through the port, UNKNOWN included
	question   string        // with status BLOCKED, what the port says the member is asked
	kick       chan struct{} // capacity 1: wakes the watcher of a port member
	watching   bool          // a goroutine watches the port; at most one ever does
	rejoin     *time.Timer   // after a restart: ends the open turn if the member does not come back
	cancelled  string        // the last open turn the lead cancelled, until the member takes another
	takers     []*taker      // Next calls parked on an empty FIFO, oldest first; see newTurn
	usage      usage.Ledger  // see ReportUsage
}

// taker is a member's Next parked on an empty FIFO. Whoever takes it off
// member.takers (under Rendezvous.mu) sends on ch exactly once: a send
// that claims it, the message, delivered and written, or nothing (ok
// false) if its record could not be written; a wake, nothing, so that the
// Next looks again. ch has capacity 1, so the sender never blocks; a Next
// that gives up after its taker was taken off waits for that one send,
// which comes at once or, from a claiming send, when its write ends.
type taker struct{ ch chan take }

type take struct {
	msg Message
	ok  bool
}

// claim takes the oldest Next parked on m, if a new message may go to it at
// once: m pulls, has no open turn and nothing queued ahead. r.mu must be held.
func (m *member) claim() *taker {
	if m.port != nil || m.open != nil || len(m.queue) > 0 || len(m.takers) == 0 {
		return nil
	}
	tk := m.takers[0]
	n := copy(m.takers, m.takers[1:])
	m.takers[n] = nil
	m.takers = m.takers[:n]
	return tk
}

// unpark takes tk off m's parked Nexts. If a send claimed it first, unpark
// waits for what the send hands over (at most the length of one write)
// and returns it. r.mu must not be held.
func (r *Rendezvous) unpark(m *member, tk *taker) take {
	r.mu.Lock()
	for i, x := range m.takers {
		if x == tk {
			n := i + copy(m.takers[i:], m.takers[i+1:])
			m.takers[n] = nil
			m.takers = m.takers[:n]
			r.mu.Unlock()
			return take{}
		}
	}
	r.mu.Unlock()
	return <-tk.ch
}

// lead is the rendezvous's view of one lead, guarded by Rendezvous.mu.
type lead struct {
	changed chan struct{} // closed when one of the lead's tickets changes; nil until a poll waits on it
	port    Member        // the lead's own pane, for nudges; may be nil
	gate    gate
	nudges  []*turn // finished tickets not yet nudged about
	kick    chan struct{}
	watch   bool    // a goroutine watches the port; at most one ever does
	handed  []*turn // outcomes a call of the lead returned, held until its next call
}

// Status is the state of a member's terminal or process as its [Member]
// port reads it.
type Status int

// Statuses. IDLE and BLOCKED are deliverable; WORKING counts as the pickup
// of a delivered message; UNKNOWN is neither: a pane whose state cannot be
// read is never written to.
const (
	StatusUnknown Status = iota
	StatusIdle
	StatusWorking
	StatusBlocked
)

var statusNames = [...]string{"UNKNOWN", "IDLE", "WORKING", "BLOCKED"}

// String returns the status in upper case, as the protocol spells it.
func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return "UNKNOWN"
	}
	return statusNames[s]
}

// ParseStatus parses a status in any case: "idle", "WORKING", …
func ParseStatus(s string) (Status, error) {
	for i, n := range statusNames {
		// Equal lengths keep folding to ASCII: the Kelvin sign is not K.
		if len(s) == len(n) && strings.EqualFold(s, n) {
			return Status(i), nil
		}
	}
	return StatusUnknown, newError(CodeInvalidArgument, "parse status", "%s is not IDLE, WORKING, BLOCKED or UNKNOWN", quote(s))
}

// deliverable reports whether a message may be written to a member in
// this status.
func (s Status) deliverable() bool { return s == StatusIdle || s == StatusBlocked }

// Member is the port through which the rendezvous reaches a member's
// terminal or process: package fleetmem implements it in memory, package
// tmux for a terminal pane. Each call is bounded by the context.
type Member interface {
	// Deliver hands content to the member as its next prompt. It is
	// called only while Status reports IDLE or BLOCKED.
	Deliver(ctx context.Context, content string) error
	// Status reads the member's current status. An error reads as UNKNOWN; an
	// error matching ErrMemberGone means the member is gone for good.
	Status(ctx context.Context) (Status, error)
	// Tail returns at most lines lines of what the member printed in its
	// current turn, and whether there was more than that.
	Tail(ctx context.Context, lines int) (text string, clipped bool, err error)
}

// OutcomeKind says how a turn ended, or where it stands.
type OutcomeKind string

// Outcome kinds.
const (
	OutcomeReply    OutcomeKind = "reply"     // the member replied
	OutcomeQuestion OutcomeKind = "question"  // the member asks; answer by turn ID
	OutcomeTurnDone OutcomeKind = "turn_done" // the turn ended without a reply; Content is the pane tail
	OutcomePending  OutcomeKind = "pending"   // not finished; collect it with the ticket
	OutcomeFailed   OutcomeKind = "failed"    // the turn failed; Reason says why
)

// OutcomeKinds returns every [OutcomeKind], in a fresh slice: the values a
// schema of outcomes lists.
func OutcomeKinds() []OutcomeKind {
	return []OutcomeKind{OutcomeReply, OutcomeQuestion, OutcomeTurnDone, OutcomePending, OutcomeFailed}
}

// Reason names why a turn failed.
type Reason string

// Failure reasons.
const (
	ReasonBackendExhausted Reason = "backend_exhausted" // spent credit, usage limit or bad key in the pane
	ReasonEchoedBrief      Reason = "echoed_brief"      // the pane shows only the brief: the member never started
	ReasonMemberNotReady   Reason = "member_not_ready"  // the member did not become ready in time
	ReasonMemberGone       Reason = "member_gone"       // the member's pane, process or connection went away mid-turn
	ReasonSessionCleaned   Reason = "session_cleaned"   // the sessions were cleaned while the turn was open
	ReasonMemberRemoved    Reason = "member_removed"    // the member was removed (its token revoked) before the turn ended
	ReasonCancelled        Reason = "cancelled"         // the lead cancelled the turn
	ReasonBudgetExhausted  Reason = "budget_exhausted"  // the member crossed a budget that stops turns (Budget.Stop)
)

// Reasons returns every failure [Reason], in a fresh slice.
func Reasons() []Reason {
	return []Reason{ReasonBackendExhausted, ReasonEchoedBrief, ReasonMemberNotReady, ReasonMemberGone,
		ReasonSessionCleaned, ReasonMemberRemoved, ReasonCancelled, ReasonBudgetExhausted}
}

// TicketState says where a ticket's turn stands.
type TicketState string

// Ticket states.
const (
	TicketQueued   TicketState = "queued"   // waiting in the member's FIFO
	TicketWorking  TicketState = "working"  // delivered, no outcome yet
	TicketQuestion TicketState = "question" // the member waits for an answer
	TicketDone     TicketState = "done"     // ended; the outcome is held until acked
)

// TicketStates returns every [TicketState], in a fresh slice.
func TicketStates() []TicketState {
	return []TicketState{TicketQueued, TicketWorking, TicketQuestion, TicketDone}
}

// Outcome is what a lead learns about a turn. Its JSON form is the protocol's.
type Outcome struct {
	Kind    OutcomeKind `json:"outcome"`
	TurnID  string      `json:"turn_id,omitempty"`
	Ticket  string      `json:"ticket,omitempty"`
	From    string      `json:"from,omitempty"` // the member
	Content string      `json:"content,omitempty"`
	Partial bool        `json:"partial,omitempty"` // Content was clipped to the scrape window
	Reason  Reason      `json:"reason,omitempty"`
	State   TicketState `json:"state,omitempty"` // set by Poll and on pending outcomes
	// Returned is set by Poll on a finished ticket whose outcome a call of the
	// lead already returned: it is held only in case that response was lost.
	Returned bool `json:"returned,omitempty"`
	// Usage, on the outcome that ends a turn, is what the member reported
	// using while the turn was open (see [Rendezvous.ReportUsage]); nil if
	// nothing.
	Usage *Usage `json:"usage,omitempty"`
}

// terminal reports whether o ends its turn.
func (o Outcome) terminal() bool {
	return o.Kind == OutcomeReply || o.Kind == OutcomeTurnDone || o.Kind == OutcomeFailed
}

// Message is a message as a member receives it.
type Message struct {
	TurnID  string `json:"turn_id"`
	From    string `json:"from"`
	Content string `json:"content"`
}

// Usage counts the tokens of a member's model calls: input not read from
// the cache, output, and the input read from and written to the cache.
type Usage = usage.Tokens

// UsageReport is a running total of a member's model calls, as one source
// counts them (see [Rendezvous.ReportUsage]).
type UsageReport struct {
	// Source is what counts the calls: a transcript's path, a process;
	// any name of at most 1 KiB.
	Source string `json:"source"`
	// Model is the model the calls went to, as the prices name it (see
	// [Rendezvous.SetPrices]); "" if not known. At most 256 bytes.
	Model string `json:"model,omitempty"`
	// Total is what the source counted of the model so far.
	Total Usage `json:"total"`
}

// MemberInfo describes a member for a lead.
type MemberInfo struct {
	Name   string `json:"name"`
	Ready  bool   `json:"ready"`
	Status string `json:"status"` // last status read, or "PULL" for members without a port
	Queued int    `json:"queued"` // messages waiting in its FIFO
	// OpenTurn is the member's open turn, if it has one, and OpenSince
	// when it was delivered.
	OpenTurn  string    `json:"open_turn,omitempty"`
	OpenSince time.Time `json:"open_since,omitzero"`
	Question  string    `json:"question,omitempty"` // what a BLOCKED member is asked; see [Questioner]
	// Usage is what the member reported using over the fleet's life (see
	// [Rendezvous.ReportUsage]).
	Usage Usage `json:"usage"`
	// Cost is what Usage costs at the fleet's prices (see
	// [Rendezvous.SetPrices]), if it has prices; it leaves out the calls
	// of models with no price, and Unpriced says there were some.
	Cost     *float64 `json:"cost,omitempty"`
	Unpriced bool     `json:"unpriced,omitempty"`
	// Budget is the member's own budget, if it has one, with its spend.
	Budget *BudgetState `json:"budget,omitempty"`
}

// NewRendezvous returns a rendezvous whose state lives in store's state
// directory, restoring what an earlier one left there. It fails with
// [ErrFleetOwned] while another rendezvous, in any process, owns the fleet.
func NewRendezvous(store *Store, opts *RendezvousOptions) (*Rendezvous, error) {
	var o RendezvousOptions
	if opts != nil {
		o = *opts
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.SendTimeout, DefaultSendTimeout)
	def(&o.AskTimeout, DefaultAskTimeout)
	def(&o.ReadyTimeout, DefaultReadyTimeout)
	def(&o.MaxWait, DefaultMaxWait)
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.PickupGrace, DefaultPickupGrace)
	def(&o.PortTimeout, DefaultPortTimeout)
	def(&o.RejoinTimeout, DefaultRejoinTimeout)
	if o.PresenceWindow == 0 {
		o.PresenceWindow = DefaultPresenceWindow
	}
	if o.TailLines <= 0 {
		o.TailLines = DefaultTailLines
	}
	if o.NudgeLimit == 0 {
		o.NudgeLimit = DefaultNudgeLimit
	}
	if o.ExhaustedPatterns == nil {
		o.ExhaustedPatterns = DefaultExhaustedPatterns()
	}
	r := &Rendezvous{
		store:   store,
		opt:     o,
		log:     o.Logger,
		done:    make(chan struct{}),
		members: make(map[string]*member),
		turns:   make(map[string]*turn),
		tickets: make(map[string]*turn),
		leads:   make(map[string]*lead),
		subs:    make(map[*Subscription]struct{}),
		budgets: make(map[string]*budget),
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	exhaust, err := agent.CompileExhausted(o.ExhaustedPatterns)
	if err != nil {
		return nil, newError(CodeInvalidArgument, "new rendezvous", "%v", err)
	}
	r.exhaust = exhaust
	if r.j, err = openJournal(store, o.Journal, o.Addr, r.log.Error); err != nil {
		return nil, err
	}
	if err := r.restore(); err != nil {
		r.j.Close()
		return nil, err
	}
	return r, nil
}

// restore takes up the turns an earlier rendezvous left on disk. A member
// that held an open turn counts as ready, since its client is about to
// reconnect, for at most RejoinTimeout; a question keeps what is left of
// its window; queued messages wait for their member as new ones do; an
// outcome a call of the lead returned keeps what is left of its hold, at
// least RejoinTimeout; any other finished turn is held until acked.
func (r *Rendezvous) restore() error {
	l, err := r.j.load()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restorePermissions(l.perms)
	now := time.Now()
	for _, t := range l.turns {
		r.turns[t.ID] = t
		r.tickets[t.Ticket] = t
		r.seq = max(r.seq, t.Seq)
		m := r.member(t.Member)
		switch t.State {
		case TicketQueued:
			m.queue = append(m.queue, t)
		case TicketDone:
			if t.HeldUntil != nil {
				// Returned before the restart, and held in case that
				// response was lost: until the hold's end, and in any case
				// for RejoinTimeout, the time the lead has to reconnect.
				t.handed = true
				r.armHold(t, max(t.HeldUntil.Sub(now), r.opt.RejoinTimeout))
			}
		case TicketWorking, TicketQuestion:
			if m.open != nil {
				// Two open turns of one member: a record from before
				// one owner. Only one can be answered.
				r.emit(t, Outcome{Kind: OutcomeFailed, Reason: ReasonMemberGone,
					Content: "the turn was found open beside another turn of the member after a restart"})
				continue
			}
			m.open, m.took = t, t.ID
			if t.State == TicketQuestion {
				r.armQuestionWindow(t, now)
			}
		}
	}
	r.restoreUsage(l.usages)
	r.restoreBudgets(l.budgets, l.prices)
	for _, m := range r.members {
		if m.open != nil {
			m.ready = true
			r.armRejoin(m, r.opt.RejoinTimeout, "of a restart")
		}
		for _, t := range m.queue {
			r.armReadyTimer(m, t)
		}
	}
	return nil
}

// armRejoin ends m's open turn, and its readiness, if the member does not show
// up within d: after a restart (RejoinTimeout), or after its connection went
// (PresenceWindow); since says after what. r.mu must be held.
func (r *Rendezvous) armRejoin(m *member, d time.Duration, since string) {
	m.stopRejoin()
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		r.lockW()
		defer r.unlockW()
		if r.closed || m.rejoin != tm {
			return
		}
		m.rejoin = nil
		if t := m.open; t != nil && m.port == nil {
			_ = r.endTurn(m, t, Outcome{Kind: OutcomeFailed, Reason: ReasonMemberGone,
				Content: "the member did not come back within " + d.String() + " " + since}, saveNow)
		}
		r.setReady(m, false)
	})
	m.rejoin = tm
}

// stopRejoin notes that m showed up. r.mu must be held.
func (m *member) stopRejoin() { stopTimer(&m.rejoin) }

// Close releases every blocked call with [ErrClosed] (a lead's blocked send
// also gets its ticket, and the turn stays on disk for the next
// Rendezvous), stops watching members and waits for its goroutines to end.
// Close is idempotent.
func (r *Rendezvous) Close() error { return r.shutdown(false) }

// shutdown is Close; with crashed, it leaves the disk as a process killed
// at this instant would (for tests of restarts): it only gives up the
// ownership, as the operating system does for a dead process.
func (r *Rendezvous) shutdown(crashed bool) error {
	r.lockW()
	if r.closed {
		r.unlockW()
		return nil
	}
	r.closed = true
	close(r.done)
	r.cancel()
	for _, t := range r.turns {
		t.stopTimers()
		if w := t.waiter; w != nil {
			t.waiter = nil
			w.ch <- result{o: t.view(), err: &Error{Code: CodeClosed, Op: "send"}}
		}
		if a := t.asker; a != nil {
			t.asker = nil
			a <- answer{err: &Error{Code: CodeClosed, Op: "ask"}}
		}
	}
	for _, m := range r.members {
		m.stopRejoin()
	}
	r.perms.Stop()
	if r.renewal != nil {
		r.renewal.Stop()
	}
	for s := range r.subs {
		r.unsubscribe(s)
	}
	if crashed {
		r.j.Crash()
	} else {
		r.j.Close()
	}
	r.unlockW()
	r.wg.Wait()
	return nil
}

// AddMember registers a member. With a nil port the member pulls its
// messages with [Rendezvous.Next]; otherwise the rendezvous delivers
// through the port, reading its status every PollInterval. A member is not
// ready until [Rendezvous.SetReady] says so (or, for a pulling member, until
// its first Next). Adding a member again replaces its port.
func (r *Rendezvous) AddMember(name string, port Member) error {
	if err := r.lockOpen("add member", name); err != nil {
		return err
	}
	defer r.mu.Unlock()
	r.register(r.member(name), port)
	return nil
}

// register makes m a registered member delivered to through port (nil: it
// pulls). r.mu must be held, and r not closed.
func (r *Rendezvous) register(m *member, port Member) {
	if !m.registered {
		r.publish(Event{Kind: EventMemberAdded, Member: m.name})
	}
	m.registered = true
	startWatch := port != nil && !m.watching
	m.port = port
	m.gate = gate{}
	if m.open != nil {
		// A turn restored from disk was delivered before a restart: treat
		// it as just delivered, so that a pane found idle past the grace
		// has its turn triaged instead of left open for ever.
		m.gate.delivered(time.Now())
	}
	for _, t := range m.queue {
		r.armReadyTimer(m, t)
	}
	if startWatch {
		m.watching = true
		r.wg.Add(1)
		go r.watchMember(m)
	}
	m.wake()
}

// SetReady marks a member ready (its connection is up: it can be
// delivered to) or not ready. Messages to a member that is not ready wait
// at most ReadyTimeout for it. With [RendezvousOptions].AddOnReady, making
// ready a name that is not a member adds it as a member that pulls.
func (r *Rendezvous) SetReady(name string, ready bool) error {
	const op = "set ready"
	if ready && r.opt.AddOnReady {
		if err := checkAgentName(op, name); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, err := r.registered(op, name)
	if CodeOf(err) == CodeUnknownMember && ready && r.opt.AddOnReady {
		m, err = r.member(name), nil
		r.register(m, nil)
	}
	if err != nil {
		return err
	}
	r.setReady(m, ready)
	return nil
}

// setReady changes readiness and the readiness timers of queued turns. A
// member made ready has shown up. r.mu must be held.
func (r *Rendezvous) setReady(m *member, ready bool) {
	if ready {
		m.stopRejoin()
	}
	if m.ready == ready {
		return
	}
	m.ready = ready
	if ready {
		r.publish(Event{Kind: EventReady, Member: m.name})
	} else {
		r.publish(Event{Kind: EventGone, Member: m.name})
	}
	for _, t := range m.queue {
		if ready {
			t.stopReadyTimer()
		} else {
			r.armReadyTimer(m, t)
		}
	}
	m.wake()
}

// SetLeadPort gives a lead a port to its own pane, through which it is
// nudged when a detached ticket finishes. A nil port removes it.
func (r *Rendezvous) SetLeadPort(name string, port Member) error {
	if err := r.lockOpen("set lead port", name); err != nil {
		return err
	}
	defer r.mu.Unlock()
	l := r.lead(name)
	startWatch := port != nil && !l.watch
	l.port = port
	l.gate = gate{}
	if startWatch {
		l.watch = true
		r.wg.Add(1)
		go r.watchLead(name, l)
	}
	return nil
}

// Members describes the registered members, sorted by name.
func (r *Rendezvous) Members() []MemberInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.memberInfos()
}

// memberInfos is Members. r.mu must be held.
func (r *Rendezvous) memberInfos() []MemberInfo {
	out := make([]MemberInfo, 0, len(r.members))
	for _, m := range r.members {
		if !m.registered {
			continue
		}
		st := "PULL"
		if m.port != nil {
			st = m.status.String()
		}
		info := MemberInfo{Name: m.name, Ready: m.ready, Status: st, Queued: len(m.queue), Question: m.question, Usage: m.usage.Total(),
			Budget: r.budgetState(m.name, r.budgets[m.name])}
		info.Cost, info.Unpriced = r.costOf(m)
		if t := m.open; t != nil {
			info.OpenTurn = t.ID
			if t.Opened != nil {
				info.OpenSince = *t.Opened
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RemoveMember unregisters a member, as when its credentials are revoked.
// Its queued messages and its open turn end at once, failed with reason
// member_removed (a blocked Ask returns [ErrNoOpenTurn]); it is no longer
// listed, and sends to it, like its own calls, get [ErrUnknownMember] until
// it is added again. The turns that a restart restored for a member not
// registered since end the same way. Removing a member the rendezvous
// knows nothing of does nothing.
func (r *Rendezvous) RemoveMember(name string) error {
	r.lockW()
	defer r.unlockW()
	if r.closed {
		return &Error{Code: CodeClosed, Op: "remove member"}
	}
	m := r.members[name]
	if m == nil {
		return nil
	}
	const why = "the member was removed from the fleet"
	m.stopRejoin()
	for _, t := range m.queue {
		t.stopReadyTimer()
		r.emit(t, Outcome{Kind: OutcomeFailed, Reason: ReasonMemberRemoved, Content: why})
	}
	m.queue = nil
	if t := m.open; t != nil {
		_ = r.endTurn(m, t, Outcome{Kind: OutcomeFailed, Reason: ReasonMemberRemoved, Content: why}, saveNow)
	}
	m.registered, m.port, m.ready, m.gate, m.status = false, nil, false, gate{}, StatusUnknown
	r.publish(Event{Kind: EventMemberRemoved, Member: name})
	m.wake()
	return nil
}

// Unregistered returns, sorted, the members that have turns restored from
// disk but were not added since: after a restart, the caller removes those
// that are no longer members ([Rendezvous.RemoveMember]), so that their
// turns end at once rather than at the bounds.
func (r *Rendezvous) Unregistered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, m := range r.members {
		if !m.registered && (m.open != nil || len(m.queue) > 0) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// lockW takes the writers' lock, then the rendezvous's.
func (r *Rendezvous) lockW() {
	r.wmu.Lock()
	r.mu.Lock()
}

// unlockW lets both go, freeing the slots of the turns forgotten
// meanwhile in between: that writing needs no lock but the writers'.
func (r *Rendezvous) unlockW() {
	freeing := r.freeing
	r.freeing = nil
	r.mu.Unlock()
	r.release(freeing)
	r.j.Settle()
	r.wmu.Unlock()
}

// write runs fn, which writes the journal, with r.mu released: first the
// slots of forgotten turns are freed, so fn may reuse them. Only writers,
// whom r.wmu keeps out, change what fn relies on meanwhile; readers go on.
// r.mu and r.wmu must be held.
func (r *Rendezvous) write(fn func() error) error {
	freeing := r.freeing
	r.freeing = nil
	r.mu.Unlock()
	defer r.mu.Lock()
	r.release(freeing)
	return fn()
}

// release frees the slots of forgotten turns ts, and keeps ts's array for
// the next ones. r.wmu must be held.
func (r *Rendezvous) release(ts []*turn) {
	for i, t := range ts {
		r.j.Forget(t.ID, "a finished turn")
		ts[i] = nil
	}
	if ts != nil {
		r.spare = ts[:0]
	}
}

// member returns the member named, creating an unregistered one.
// r.mu must be held.
func (r *Rendezvous) member(name string) *member {
	m := r.members[name]
	if m == nil {
		m = &member{name: name, kick: make(chan struct{}, 1)}
		r.members[name] = m
	}
	return m
}

// lockOpen checks name and locks r.mu, left unlocked on an error.
func (r *Rendezvous) lockOpen(op, name string) error {
	if err := checkAgentName(op, name); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return &Error{Code: CodeClosed, Op: op}
	}
	return nil
}

// registered returns the registered member named. r.mu must be held.
func (r *Rendezvous) registered(op, name string) (*member, error) {
	if r.closed {
		return nil, &Error{Code: CodeClosed, Op: op}
	}
	m := r.members[name]
	if m == nil || !m.registered {
		return nil, newError(CodeUnknownMember, op, "%s", quote(name))
	}
	return m, nil
}

// lead returns the lead named, creating it. r.mu must be held.
func (r *Rendezvous) lead(name string) *lead {
	l := r.leads[name]
	if l == nil {
		l = &lead{kick: make(chan struct{}, 1)}
		r.leads[name] = l
	}
	return l
}

// changed tells waiting polls of lead that one of its tickets changed.
// r.mu must be held.
func (r *Rendezvous) changed(name string) {
	l := r.lead(name)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// changes returns a channel closed when one of l's tickets next changes.
// It is made only when a poll is about to wait on it: most changes have
// nobody waiting. r.mu must be held.
func (l *lead) changes() <-chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// wake tells whoever waits on the member that its state changed: the
// pulling Nexts parked on it, which look again, or the watcher of its
// port. r.mu must be held.
func (m *member) wake() {
	for i, tk := range m.takers {
		tk.ch <- take{} // nothing handed: look again
		m.takers[i] = nil
	}
	m.takers = m.takers[:0]
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Clean cleans the fleet's state directory as [Store.Clean] does (every
// session, stored file and archive) and, in the same step, drops every turn,
// ticket and queued message. Calls blocked on a turn return: a lead's send gets
// a failed outcome with reason session_cleaned, a member's ask [ErrNoOpenTurn].
// Members stay registered. What else the directory holds stays.
func (r *Rendezvous) Clean() error {
	const op = "clean sessions"
	r.lockW()
	defer r.unlockW()
	if r.closed {
		return &Error{Code: CodeClosed, Op: op}
	}
	for _, t := range r.turns {
		t.stopTimers()
		if a := t.asker; a != nil {
			t.asker = nil
			a <- answer{err: newError(CodeNoOpenTurn, "ask", "the sessions were cleaned")}
		}
		if w := t.waiter; w != nil {
			t.waiter = nil
			w.ch <- result{o: Outcome{Kind: OutcomeFailed, Reason: ReasonSessionCleaned, TurnID: t.ID, From: t.Member}}
		}
	}
	for _, m := range r.members {
		m.queue, m.open, m.gate, m.cancelled = nil, nil, gate{}, ""
		m.stopRejoin()
		m.wake()
	}
	for name, l := range r.leads {
		l.nudges, l.handed = nil, nil
		r.changed(name)
	}
	clear(r.turns)
	clear(r.tickets)
	r.cleanPermissions()
	if err := withOp("reset", r.j.Reset()); err != nil {
		return err
	}
	return r.store.clean(op)
}

// Wake makes the rendezvous read the status of member, or of the lead
// named, now rather than at the next poll: call it when a status source
// learns of a change, such as an agent's hook reporting one.
func (r *Rendezvous) Wake(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.members[name]; m != nil {
		m.wake()
	}
	if l := r.leads[name]; l != nil {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}
