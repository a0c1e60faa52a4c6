package fleetstate

import (
	"context"
	"strings"
	"sync"
)

// LocalMember is an in-memory [Member] port, for agents that run as
// goroutines in the orchestrator's process and for tests. Deliveries arrive
// on [LocalMember.Inbox]; the agent reports its status with
// [LocalMember.SetStatus] and its output with [LocalMember.Print], which is
// what the rendezvous reads as the pane tail when a turn ends without a
// reply.
//
// A new LocalMember is IDLE. It is safe for concurrent use.
type LocalMember struct {
	inbox chan string

	mu      sync.Mutex
	status  Status        // guarded by mu
	lines   []string      // guarded by mu; output since the last delivery
	gone    bool          // guarded by mu
	changed chan struct{} // guarded by mu; closed when status or gone changes, then replaced
}

// NewLocalMember returns an idle member whose inbox holds up to 16
// undelivered messages.
func NewLocalMember() *LocalMember {
	return &LocalMember{inbox: make(chan string, 16), status: StatusIdle, changed: make(chan struct{})}
}

// Inbox returns the channel on which deliveries arrive.
func (m *LocalMember) Inbox() <-chan string { return m.inbox }

// Deliver implements [Member]. It starts a new turn: the output kept for
// Tail is cleared.
func (m *LocalMember) Deliver(ctx context.Context, content string) error {
	m.mu.Lock()
	if m.gone {
		m.mu.Unlock()
		return ErrMemberGone
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

// Status implements [Member].
func (m *LocalMember) Status(context.Context) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return StatusUnknown, ErrMemberGone
	}
	return m.status, nil
}

// Tail implements [Member]: the last lines lines printed since the last
// delivery, and whether more were printed.
func (m *LocalMember) Tail(_ context.Context, lines int) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return "", false, ErrMemberGone
	}
	out := m.lines
	clipped := len(out) > lines
	if clipped {
		out = out[len(out)-lines:]
	}
	return strings.Join(out, "\n"), clipped, nil
}

// StatusChanged implements [StatusNotifier]: the rendezvous reads the
// status of a LocalMember when it changes, never on a timer.
func (m *LocalMember) StatusChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// notify wakes whoever waits on StatusChanged. m.mu must be held.
func (m *LocalMember) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// SetStatus sets the status the member reports.
func (m *LocalMember) SetStatus(s Status) {
	m.mu.Lock()
	m.status = s
	m.notify()
	m.mu.Unlock()
}

// Print adds text to the member's output, line by line.
func (m *LocalMember) Print(text string) {
	m.mu.Lock()
	m.lines = append(m.lines, strings.Split(strings.TrimRight(text, "\n"), "\n")...)
	m.mu.Unlock()
}

// Kill makes the member gone for good, as a pane that was closed: every
// later call of the port fails with [ErrMemberGone].
func (m *LocalMember) Kill() {
	m.mu.Lock()
	m.gone = true
	m.notify()
	m.mu.Unlock()
}
