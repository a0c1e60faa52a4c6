package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/textsafe"
)

// The transcripts of the turns are kept by the daemon, not by the page, so
// that a page opened (or reloaded) in the middle of a turn still shows the
// questions asked and answered before it: the snapshot of the fleet has
// only briefs and outcomes. They are read from the rendezvous's events like
// any view's, and bounded: the last maxTranscripts turns, the last
// maxTranscriptEntries entries of each, each entry's content clipped to
// maxTranscriptContent bytes. The page asks for them once it has its
// snapshot, with the snapshot's sequence number, and folds the events that
// follow into them itself, with the same bounds.
const (
	maxTranscripts       = 200
	maxTranscriptEntries = 50
	maxTranscriptContent = 4096
)

// transcriptEntry is one line of a turn's transcript.
type transcriptEntry struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // brief, question, answer, withdrawn, cancelled or outcome
	Content string    `json:"content,omitempty"`
	Clipped bool      `json:"clipped,omitempty"`
	// Outcome and Reason are an outcome entry's.
	Outcome fleetstate.OutcomeKind `json:"outcome,omitempty"`
	Reason  fleetstate.Reason      `json:"reason,omitempty"`
}

// transcript is one turn's.
type transcript struct {
	TurnID  string            `json:"turn_id"`
	Ticket  string            `json:"ticket,omitempty"`
	Member  string            `json:"member"`
	Lead    string            `json:"lead,omitempty"`
	Opened  time.Time         `json:"opened"`
	Entries []transcriptEntry `json:"entries"`
}

// transcriptView is what /dashboard/transcripts answers.
type transcriptView struct {
	// Seq is the sequence number of the last event folded in: the page
	// folds only later ones.
	Seq uint64 `json:"seq"`
	// Missed counts the events the dashboard lost to a full buffer: the
	// transcripts may lack entries.
	Missed uint64       `json:"missed,omitempty"`
	Turns  []transcript `json:"turns"` // oldest first
}

// transcripts folds a rendezvous's events into the transcripts of its
// turns.
type transcripts struct {
	sub  *fleetstate.Subscription
	done chan struct{} // closed when the folding goroutine returns

	mu      sync.Mutex
	seq     uint64                 // guarded by mu
	missed  uint64                 // guarded by mu
	turns   map[string]*transcript // guarded by mu; by turn ID
	order   []string               // guarded by mu; turn IDs, oldest first
	changed chan struct{}          // guarded by mu; closed and replaced when seq moves
}

// watchTranscripts starts folding rv's events, seeded with the briefs,
// questions and outcomes of its snapshot.
func watchTranscripts(rv *fleetstate.Rendezvous) *transcripts {
	sub, snap := rv.Subscribe(4096)
	t := &transcripts{sub: sub, done: make(chan struct{}), turns: map[string]*transcript{}, changed: make(chan struct{}), seq: snap.Seq}
	for _, tk := range snap.Tickets {
		tr := t.turn(tk.TurnID, tk.From, tk.Lead, tk.Ticket, tk.Created)
		tr.add(transcriptEntry{Time: tk.Created, Kind: "brief", Content: tk.Brief})
		switch {
		case tk.State == fleetstate.TicketQuestion:
			tr.add(transcriptEntry{Time: tk.Created, Kind: "question", Content: tk.Content})
		case tk.State == fleetstate.TicketDone:
			tr.add(transcriptEntry{Time: tk.Created, Kind: "outcome", Outcome: tk.Kind, Reason: tk.Reason, Content: tk.Content})
		}
	}
	go t.run()
	return t
}

func (t *transcripts) run() {
	defer close(t.done)
	for e := range t.sub.Events() {
		t.fold(e)
	}
}

// close stops the folding and waits for it.
func (t *transcripts) close() {
	t.sub.Close()
	<-t.done
}

// turn returns the transcript of turn id, made if new. t.mu must be held
// (or t not yet shared).
func (t *transcripts) turn(id, member, lead, ticket string, opened time.Time) *transcript {
	if tr, ok := t.turns[id]; ok {
		return tr
	}
	if len(t.order) >= maxTranscripts {
		delete(t.turns, t.order[0])
		t.order = t.order[1:]
	}
	tr := &transcript{TurnID: id, Member: member, Lead: lead, Ticket: ticket, Opened: opened, Entries: []transcriptEntry{}}
	t.turns[id] = tr
	t.order = append(t.order, id)
	return tr
}

// add appends e, clipped, dropping the oldest entry after the brief when
// the transcript is full.
func (tr *transcript) add(e transcriptEntry) {
	if len(e.Content) > maxTranscriptContent {
		e.Content, e.Clipped = textsafe.ClipBytes(e.Content, maxTranscriptContent), true
	}
	if len(tr.Entries) >= maxTranscriptEntries {
		tr.Entries = append(tr.Entries[:1], tr.Entries[2:]...)
	}
	tr.Entries = append(tr.Entries, e)
}

// fold applies one event.
func (t *transcripts) fold(e fleetstate.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.missed += e.Gap
	t.seq = e.Seq
	close(t.changed)
	t.changed = make(chan struct{})
	if e.TurnID == "" {
		return
	}
	entry := transcriptEntry{Time: e.Time, Content: e.Content}
	switch e.Kind {
	case fleetstate.EventQueued:
		entry.Kind = "brief"
	case fleetstate.EventAsked:
		entry.Kind = "question"
	case fleetstate.EventAnswered:
		entry.Kind = "answer"
	case fleetstate.EventWithdrawn:
		entry.Kind = "withdrawn"
	case fleetstate.EventCancelled:
		entry.Kind = "cancelled"
	case fleetstate.EventOutcome:
		// A question is its asked event already; a pending outcome is a
		// blocking call that gave up, not the turn's end.
		if e.Outcome == nil || e.Outcome.Kind == fleetstate.OutcomeQuestion || e.Outcome.Kind == fleetstate.OutcomePending {
			return
		}
		entry.Kind, entry.Outcome, entry.Reason, entry.Content = "outcome", e.Outcome.Kind, e.Outcome.Reason, e.Outcome.Content
	default:
		return
	}
	t.turn(e.TurnID, e.Member, e.Lead, e.Ticket, e.Time).add(entry)
}

// view returns a copy of the transcripts once they have folded the event
// numbered after, or when wait has passed or ctx is done, whichever comes
// first.
func (t *transcripts) view(ctx context.Context, after uint64, wait time.Duration) transcriptView {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.seq < after && ctx.Err() == nil {
		changed := t.changed
		t.mu.Unlock()
		select {
		case <-changed:
		case <-t.done:
			cancel() // no event will come
		case <-ctx.Done():
		}
		t.mu.Lock()
	}
	v := transcriptView{Seq: t.seq, Missed: t.missed, Turns: make([]transcript, 0, len(t.order))}
	for _, id := range t.order {
		tr := *t.turns[id]
		tr.Entries = append([]transcriptEntry(nil), tr.Entries...)
		v.Turns = append(v.Turns, tr)
	}
	return v
}
