package fleetmem

import (
	"context"
	"strings"
	"sync"

	"github.com/fleetstate/fleetstate"
)

// Member is an in-memory [fleetstate.Member] port, for agents that run as
// goroutines in the orchestrator's process and for tests, as package tmux
// is the port of a terminal pane. Deliveries arrive on [Member.Inbox]; the
// agent reports its status with [Member.SetStatus] and its output with
// [Member.Print], which is what the rendezvous reads as the pane tail
// when a turn ends without a reply.
//
// A new Member is IDLE. It is safe for concurrent use.
type Member struct {
	inbox chan string

	mu         sync.Mutex
	status     fleetstate.Status // guarded by mu
	question   string            // guarded by mu; with status BLOCKED, what the member is asked
	lines      []string          // guarded by mu; output since the last delivery
	gone       bool              // guarded by mu
	changed    chan struct{}     // guarded by mu; closed when status or gone changes, then replaced
	interrupts int               // guarded by mu
}

// NewMember returns an idle member whose inbox holds up to 16
// undelivered messages.
func NewMember() *Member {
	return &Member{inbox: make(chan string, 16), status: fleetstate.StatusIdle, changed: make(chan struct{})}
}

// Inbox returns the channel on which deliveries arrive.
func (m *Member) Inbox() <-chan string { return m.inbox }

// Deliver implements [fleetstate.Member]. It starts a new turn: the output kept for
// Tail is cleared.
func (m *Member) Deliver(ctx context.Context, content string) error {
	m.mu.Lock()
	if m.gone {
		m.mu.Unlock()
		return fleetstate.ErrMemberGone
	}
	m.lines = nil
	m.mu.Unlock()
	select {
	case m.inbox <- content:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Status implements [fleetstate.Member].
func (m *Member) Status(context.Context) (fleetstate.Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return fleetstate.StatusUnknown, fleetstate.ErrMemberGone
	}
	return m.status, nil
}

// Tail implements [fleetstate.Member]: the last lines lines printed since the last
// delivery, and whether more were printed.
func (m *Member) Tail(_ context.Context, lines int) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return "", false, fleetstate.ErrMemberGone
	}
	out := m.lines
	clipped := len(out) > lines
	if clipped {
		out = out[len(out)-lines:]
	}
	return strings.Join(out, "\n"), clipped, nil
}

// StatusChanged implements [fleetstate.StatusNotifier]: the rendezvous reads the
// status of a Member when it changes, never on a timer.
func (m *Member) StatusChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// notify wakes whoever waits on StatusChanged. m.mu must be held.
func (m *Member) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// SetStatus sets the status the member reports, with no question.
func (m *Member) SetStatus(s fleetstate.Status) { m.Ask(s, "") }

// Ask sets the status the member reports and, for BLOCKED, the question
// it waits on ([fleetstate.Questioner]), as a coding agent at a
// permission prompt: the rendezvous delivers nothing to it meanwhile.
func (m *Member) Ask(s fleetstate.Status, question string) {
	m.mu.Lock()
	m.status, m.question = s, question
	m.notify()
	m.mu.Unlock()
}

// Question implements [fleetstate.Questioner].
func (m *Member) Question() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.status != fleetstate.StatusBlocked {
		return ""
	}
	return m.question
}

// Interrupt implements [fleetstate.Interrupter]: it counts the
// interruptions, which [Member.Interrupts] reports.
func (m *Member) Interrupt(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return fleetstate.ErrMemberGone
	}
	m.interrupts++
	return nil
}

// Interrupts reports how many times the rendezvous interrupted the
// member's work: once for each of its open turns that a lead cancelled.
func (m *Member) Interrupts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.interrupts
}

// Print adds text to the member's output, line by line.
func (m *Member) Print(text string) {
	m.mu.Lock()
	m.lines = append(m.lines, strings.Split(strings.TrimRight(text, "\n"), "\n")...)
	m.mu.Unlock()
}

// Kill makes the member gone for good, as a pane that was closed: every
// later call of the port fails with [fleetstate.ErrMemberGone].
func (m *Member) Kill() {
	m.mu.Lock()
	m.gone = true
	m.notify()
	m.mu.Unlock()
}
