package fleetwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/worktree"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Actions is how the view acts on the fleet: each method is one call
// made on behalf of whoever watches (the operator, or the lead whose
// token the view shows), and what it changes comes back as events on the
// stream like any other. The transport is the implementation's:
// [MCPActions] calls the daemon's MCP tools.
type Actions interface {
	// Answer answers the question asked in turn turnID. It may block
	// until the turn's next outcome; the view cancels ctx once the
	// stream shows the answer, so that the outcome stays on the ticket
	// for its lead.
	Answer(ctx context.Context, turnID, text string) error
	// Cancel cancels the turn of a ticket that is queued or open.
	Cancel(ctx context.Context, ticket string) error
	// Send sends a member a task, detached, and returns its ticket.
	Send(ctx context.Context, member, brief string) (ticket string, err error)
}

// Decider is implemented by [Actions] that can decide a pending
// permission request: allow it, or deny it with a message.
type Decider interface {
	Decide(ctx context.Context, id string, allow bool, message string) error
}

// actionTimeout bounds an action: above the daemon's own bound on a
// blocking call (just under 60 s), so that the daemon ends it first.
const actionTimeout = 70 * time.Second

// MCPActions acts through the daemon's MCP tools with the credentials of
// the source: a new MCP session per action, so that it follows a daemon
// that restarted elsewhere. The daemon decides whether those
// credentials may act (a lead's token may, for its own turns). The zero
// value has no source and refuses every action.
type MCPActions struct {
	Source Source
	// Refused, if set, is the error shown when the daemon refuses the
	// source's credentials for tool calls (401): the fix, in words.
	Refused string
}

// call calls f with a client of the daemon, closed when f returns.
func (a MCPActions) call(ctx context.Context, f func(*mcpadapter.Client) error) error {
	if a.Source == nil {
		return errors.New("fleetwatch: no daemon to act on")
	}
	base, token, err := a.Source()
	if err != nil {
		return err
	}
	c, err := mcpadapter.Dial(ctx, base+"/mcp", token, "fleetstate-watch")
	if errors.Is(err, transport.ErrAuthorizationRequired) && a.Refused != "" {
		return errors.New(a.Refused)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// Answer answers with fleet_send {turn_id, content}.
func (a MCPActions) Answer(ctx context.Context, turnID, text string) error {
	return a.call(ctx, func(c *mcpadapter.Client) error {
		_, err := c.Answer(ctx, turnID, text)
		return err
	})
}

// Cancel cancels with fleet_cancel {ticket}.
func (a MCPActions) Cancel(ctx context.Context, ticket string) error {
	return a.call(ctx, func(c *mcpadapter.Client) error {
		_, err := c.Cancel(ctx, ticket)
		return err
	})
}

// Send sends with fleet_send {to, content, wait: false}.
func (a MCPActions) Send(ctx context.Context, member, brief string) (ticket string, err error) {
	err = a.call(ctx, func(c *mcpadapter.Client) error {
		o, err := c.SendDetached(ctx, member, brief)
		ticket = o.Ticket
		return err
	})
	return ticket, err
}

// Decide allows or denies the permission request id (fleet_approve): the
// daemon lets the operator decide, and a lead where the fleet file says
// leads decide.
func (a MCPActions) Decide(ctx context.Context, id string, allow bool, message string) error {
	args := map[string]any{"id": id, "behavior": "deny"}
	if allow {
		args["behavior"] = "allow"
	}
	if message != "" {
		args["message"] = message
	}
	return a.call(ctx, func(c *mcpadapter.Client) error { return c.Call(ctx, "fleet_approve", args, nil) })
}

// Changes reads member's work tree with fleet_changes {member}. A member
// the daemon knows no work tree of (ERR_INVALID_ARGUMENT, or
// ERR_UNKNOWN_MEMBER for one not in the fleet file), and a daemon that
// serves no work trees (it has no such tool), are [ErrNoWorktree].
func (a MCPActions) Changes(ctx context.Context, member string) (worktree.Changes, error) {
	var ch worktree.Changes
	err := a.call(ctx, func(c *mcpadapter.Client) error {
		err := c.Call(ctx, "fleet_changes", map[string]any{"member": member}, &ch)
		switch fleetstate.CodeOf(err) {
		case fleetstate.CodeInvalidArgument, fleetstate.CodeUnknownMember:
			return fmt.Errorf("%w: %w", ErrNoWorktree, err)
		}
		if errors.Is(err, mcp.ErrInvalidParams) {
			return fmt.Errorf("%w: %w", ErrNoWorktree, err)
		}
		return err
	})
	return ch, err
}

// Merge merges member's branch with fleet_merge {member, commit}: at
// commit, the one the person saw, when not empty.
func (a MCPActions) Merge(ctx context.Context, member, commit string) (daemon.Merge, error) {
	var r daemon.Merge
	args := map[string]any{"member": member}
	if commit != "" {
		args["commit"] = commit
	}
	err := a.call(ctx, func(c *mcpadapter.Client) error {
		return c.Call(ctx, "fleet_merge", args, &r)
	})
	return r, err
}

var (
	_ Actions   = MCPActions{}
	_ Decider   = MCPActions{}
	_ Worktrees = MCPActions{}
)

// Request is a pending permission request as a snapshot carries it, in
// its "permissions" list: a member's agent asks whether it may use a tool.
// Input may be clipped there, and InputBytes then gives its whole length.
type Request = fleetstate.PermissionRequest

// question is a ticket's question waiting for an answer.
func questions(tickets []fleetstate.TicketInfo) []fleetstate.TicketInfo {
	var qs []fleetstate.TicketInfo
	for _, t := range tickets {
		if t.State == fleetstate.TicketQuestion {
			qs = append(qs, t)
		}
	}
	return qs
}
