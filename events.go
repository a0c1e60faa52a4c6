package fleetstate

import (
	"sort"
	"time"
)

// What happens in a fleet is published once, as typed events: logs,
// terminal views, dashboards and notifications all read the same stream,
// never the rendezvous's private state.
//
// Each subscriber has a bounded buffer. The rendezvous never waits for a
// subscriber: when one's buffer is full, the event is dropped for it, and
// the next event it does get says in Gap how many it missed (as NATS
// counts a slow consumer's drops). A subscriber that sees a gap takes a new
// Snapshot if it needs the whole picture.

// EventKind names what happened.
type EventKind string

// Event kinds.
const (
	EventQueued        EventKind = "queued"         // a message was queued for a member: a new turn and ticket
	EventDelivered     EventKind = "delivered"      // the message left for the member: its turn is open
	EventStatus        EventKind = "status"         // the status read through a member's port changed
	EventAsked         EventKind = "asked"          // the member asked a question in its turn
	EventAnswered      EventKind = "answered"       // the lead answered it
	EventWithdrawn     EventKind = "withdrawn"      // a question's window passed without an answer
	EventOutcome       EventKind = "outcome"        // the turn ended; Outcome says how
	EventAcked         EventKind = "acked"          // the ticket is gone: acked, or its outcome released after a call returned it
	EventCancelled     EventKind = "cancelled"      // the lead cancelled the turn (an outcome event follows)
	EventReady         EventKind = "ready"          // the member became ready: its connection is up
	EventGone          EventKind = "gone"           // the member is no longer ready
	EventMemberAdded   EventKind = "member_added"   // a member was registered
	EventMemberRemoved EventKind = "member_removed" // a member was removed (its token revoked)
	// Permission requests: Permission is the request.
	EventPermissionRequested EventKind = "permission_requested" // a member asks to use a tool
	EventPermissionDecided   EventKind = "permission_decided"   // someone, or a rule, decided: Permission.Decision says how, By who, Content the message
	EventPermissionExpired   EventKind = "permission_expired"   // it ended undecided: Content says why, By "timeout" or "clean"
	// Merges of a member's work tree, which the rendezvous does not make
	// but announces ([Rendezvous.Announce]): By asked, Content says more.
	EventMergeRequested EventKind = "merge_requested" // By asked to merge Member's branch
	EventMerged         EventKind = "merged"          // it was merged: Content names the commit
	EventMergeRefused   EventKind = "merge_refused"   // it was refused, changing nothing: Content says why
	// EventUsage: the member's usage grew (see [Rendezvous.ReportUsage]);
	// Usage is its total now, TurnID its open turn, if any.
	EventUsage EventKind = "usage"
	// Budget events (see [Rendezvous.SetBudget]): Member names the
	// budget's member, "" for the fleet's; Budget tells it and its spend.
	EventBudgetSet       EventKind = "budget_set"       // set, raised, lowered or removed (Budget nil)
	EventBudgetWarning   EventKind = "budget_warning"   // the spend crossed the budget's warning share
	EventBudgetExhausted EventKind = "budget_exhausted" // the spend reached the limit: no new turn starts
)

// Event is one thing that happened in the fleet. Fields that do not apply
// to its kind are empty.
type Event struct {
	Seq     uint64    `json:"seq"` // 1, 2, … in the order the rendezvous published them
	Time    time.Time `json:"time"`
	Kind    EventKind `json:"kind"`
	Member  string    `json:"member,omitempty"`
	Lead    string    `json:"lead,omitempty"`
	TurnID  string    `json:"turn_id,omitempty"`
	Ticket  string    `json:"ticket,omitempty"`
	Content string    `json:"content,omitempty"` // the brief, the question or the answer
	// ContentBytes, set where a stream clipped Content or Outcome.Content, is its full length in bytes.
	ContentBytes int      `json:"content_bytes,omitempty"`
	Status       string   `json:"status,omitempty"`  // of a status event
	Outcome      *Outcome `json:"outcome,omitempty"` // of an outcome event
	// Held is set on an outcome event when the outcome went to the ticket
	// rather than to a call of the lead waiting for it: a detached
	// ticket finished, or a blocking call gave up.
	Held bool `json:"held,omitempty"`
	// Permission is the request of a permission event.
	Permission *PermissionRequest `json:"permission,omitempty"`
	// By names who or what ended a permission request: "operator", a lead, "rule …", "timeout" or "clean".
	By string `json:"by,omitempty"`
	// Usage is the member's usage of a usage event, and Cost and
	// Unpriced what it costs, as in [MemberInfo].
	Usage    *Usage   `json:"usage,omitempty"`
	Cost     *float64 `json:"cost,omitempty"`
	Unpriced bool     `json:"unpriced,omitempty"`
	// Budget is the budget of a budget event, with its spend.
	Budget *BudgetState `json:"budget,omitempty"`
	// Gap counts the events this subscriber missed just before this one,
	// because its buffer was full.
	Gap uint64 `json:"gap,omitempty"`
}

// DefaultEventBuffer is the buffer of a subscription given none.
const DefaultEventBuffer = 256

// Subscription receives the events of a rendezvous. Close it when done;
// Close of the rendezvous closes it too.
type Subscription struct {
	r      *Rendezvous
	ch     chan Event
	gap    uint64 // guarded by Rendezvous.mu: events dropped since the last one sent
	closed bool   // guarded by Rendezvous.mu
}

// Events returns the channel of events, closed when the subscription or the
// rendezvous is closed.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Close ends the subscription. It is idempotent.
func (s *Subscription) Close() {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.unsubscribe(s)
}

// TicketInfo is a ticket as an operator's view shows it.
type TicketInfo struct {
	Lead    string    `json:"lead"`
	Brief   string    `json:"brief"`
	Created time.Time `json:"created"`
	Outcome           // where it stands, as Poll says
	// Waited: a call of the lead is blocked on the ticket's turn (PollAll
	// leaves such a ticket out).
	Waited bool `json:"waited,omitempty"`
	// News: a question or an outcome the lead has not been shown.
	News bool `json:"news,omitempty"`
	// Handed: a call returned the outcome, which is held only in case
	// that response was lost.
	Handed bool `json:"handed,omitempty"`
	// BriefBytes and ContentBytes are set when Brief or Content is
	// clipped (a view sent over the network clips its snapshot): the
	// text's full length, in bytes. Zero means the text is whole.
	BriefBytes   int `json:"brief_bytes,omitempty"`
	ContentBytes int `json:"content_bytes,omitempty"`
}

// Snapshot is the state of the fleet at one instant: what a view shows
// before the events that follow it.
type Snapshot struct {
	Seq     uint64       `json:"seq"` // of the last event published before it
	Members []MemberInfo `json:"members"`
	Tickets []TicketInfo `json:"tickets"` // every lead's, oldest first
	// Permissions are the pending permission requests, oldest first.
	Permissions []PermissionRequest `json:"permissions,omitempty"`
}

// Subscribe returns a subscription to every event published from now on,
// with a buffer of buffer events (DefaultEventBuffer when zero or less),
// and a snapshot of the fleet taken at the same instant, so that the
// snapshot and the events together miss nothing.
func (r *Rendezvous) Subscribe(buffer int) (*Subscription, Snapshot) {
	if buffer <= 0 {
		buffer = DefaultEventBuffer
	}
	s := &Subscription{r: r, ch: make(chan Event, buffer)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		s.closed = true
		close(s.ch)
	} else {
		r.subs[s] = struct{}{}
	}
	return s, r.snapshot()
}

// Snapshot returns the state of the fleet now.
func (r *Rendezvous) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot()
}

func (r *Rendezvous) snapshot() Snapshot {
	snap := Snapshot{Seq: r.evSeq, Members: r.memberInfos(), Tickets: []TicketInfo{}, Permissions: r.perms.Pending()}
	for _, t := range r.tickets {
		snap.Tickets = append(snap.Tickets, TicketInfo{Lead: t.Lead, Brief: t.Brief, Created: t.Created, Outcome: t.view(),
			Waited: t.waiter != nil, News: !t.seen && (t.State == TicketDone || t.State == TicketQuestion), Handed: t.handed})
	}
	sort.Slice(snap.Tickets, func(i, j int) bool { return snap.Tickets[i].Created.Before(snap.Tickets[j].Created) })
	return snap
}

// publish sends e to every subscriber that has room, and counts a gap for
// the others. It never blocks. r.mu must be held.
func (r *Rendezvous) publish(e Event) {
	r.evSeq++
	if len(r.subs) == 0 {
		return // no one to read the clock for
	}
	e.Seq, e.Time = r.evSeq, time.Now().UTC()
	for s := range r.subs {
		e.Gap = s.gap
		select {
		case s.ch <- e:
			s.gap = 0
		default:
			s.gap++
		}
	}
}

// Announce publishes e, of a kind the rendezvous does not make itself (a
// merge's), to the subscribers; its Seq, Time and Gap are set as for any.
func (r *Rendezvous) Announce(e Event) error {
	if e.Kind != EventMergeRequested && e.Kind != EventMerged && e.Kind != EventMergeRefused {
		return newError(CodeInvalidArgument, "announce", "%q is not an event to announce", e.Kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return &Error{Code: CodeClosed, Op: "announce"}
	}
	r.publish(e)
	return nil
}

// publishTurn publishes an event of kind about turn t. r.mu must be held.
func (r *Rendezvous) publishTurn(kind EventKind, t *turn, content string) {
	r.publish(Event{Kind: kind, Member: t.Member, Lead: t.Lead, TurnID: t.ID, Ticket: t.Ticket, Content: content})
}

// unsubscribe removes s and closes its channel. r.mu must be held.
func (r *Rendezvous) unsubscribe(s *Subscription) {
	if s.closed {
		return
	}
	s.closed = true
	delete(r.subs, s)
	close(s.ch)
}
