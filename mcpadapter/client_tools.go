package mcpadapter

import (
	"context"
	"time"

	"github.com/fleetstate/fleetstate"
)

// Typed calls of the tools. Each returns the library's types; a tool's
// error result is a [*ToolError], whose code [fleetstate.CodeOf] and
// errors.As with a *[fleetstate.Error] read.

// NewSession starts a session named name (new_session).
func (c *Client) NewSession(ctx context.Context, name string) (fleetstate.Session, error) {
	var out struct{ ID string }
	err := c.Call(ctx, "new_session", map[string]any{"name": name}, &out)
	return fleetstate.Session{ID: out.ID, Name: name}, err
}

// CurrentSession returns the current session (get_session).
func (c *Client) CurrentSession(ctx context.Context) (fleetstate.Session, error) {
	var out struct{ ID, Name string }
	err := c.Call(ctx, "get_session", nil, &out)
	return fleetstate.Session{ID: out.ID, Name: out.Name}, err
}

// Clean removes every session and all pending fleet work (clean_sessions).
func (c *Client) Clean(ctx context.Context) error {
	return c.Call(ctx, "clean_sessions", nil, nil)
}

// Put stores content as agent's file name in the current session (put).
func (c *Client) Put(ctx context.Context, agent, name string, content []byte, overwrite bool) (fleetstate.FileID, error) {
	var out struct{ ID string }
	if err := c.Call(ctx, "put", map[string]any{"agent_name": agent, "file_name": name,
		"content": string(content), "overwrite": overwrite}, &out); err != nil {
		return fleetstate.FileID{}, err
	}
	return fleetstate.ParseFileID(out.ID)
}

// Get returns the content of the file id (get).
func (c *Client) Get(ctx context.Context, id fleetstate.FileID) ([]byte, error) {
	var out struct{ Content string }
	if err := c.Call(ctx, "get", map[string]any{"id": id.String()}, &out); err != nil {
		return nil, err
	}
	return []byte(out.Content), nil
}

// List lists the files of a session (empty: the current one), of one
// agent if agent is not empty (list).
func (c *Client) List(ctx context.Context, sessionID, agent string) ([]fleetstate.FileInfo, error) {
	args := map[string]any{}
	if sessionID != "" {
		args["session_id"] = sessionID
	}
	if agent != "" {
		args["agent_name"] = agent
	}
	var out struct{ Files []fileEntry }
	if err := c.Call(ctx, "list", args, &out); err != nil {
		return nil, err
	}
	files := make([]fleetstate.FileInfo, len(out.Files))
	for i, f := range out.Files {
		id, err := fleetstate.ParseFileID(f.ID)
		if err != nil {
			return nil, err
		}
		mod, err := time.Parse(time.RFC3339Nano, f.Modified)
		if err != nil {
			return nil, &fleetstate.Error{Code: fleetstate.CodeInternal, Op: "list", Err: err}
		}
		files[i] = fleetstate.FileInfo{ID: id, Size: f.Size, ModTime: mod}
	}
	return files, nil
}

// Send opens a turn of member to with content and waits for its outcome,
// as [fleetstate.Rendezvous.Send] does (fleet_send).
func (c *Client) Send(ctx context.Context, to, content string) (fleetstate.Outcome, error) {
	return c.outcome(ctx, "fleet_send", map[string]any{"to": to, "content": content})
}

// SendDetached opens a turn of member to and returns its pending outcome
// with a ticket at once (fleet_send with wait false).
func (c *Client) SendDetached(ctx context.Context, to, content string) (fleetstate.Outcome, error) {
	return c.outcome(ctx, "fleet_send", map[string]any{"to": to, "content": content, "wait": false})
}

// Answer answers the question asked in turn turnID and waits for the
// turn's next outcome (fleet_send with turn_id).
func (c *Client) Answer(ctx context.Context, turnID, content string) (fleetstate.Outcome, error) {
	return c.outcome(ctx, "fleet_send", map[string]any{"turn_id": turnID, "content": content})
}

// Poll returns where a ticket stands, waiting up to wait for news
// (fleet_poll with ticket).
func (c *Client) Poll(ctx context.Context, ticket string, wait time.Duration) (fleetstate.Outcome, error) {
	return c.outcome(ctx, "fleet_poll", map[string]any{"ticket": ticket, "wait_s": wait.Seconds()})
}

// PollPage returns a page of at most limit of the lead's tickets after
// cursor (zero limit: the server's default), waiting up to wait for news
// (fleet_poll without ticket).
func (c *Client) PollPage(ctx context.Context, wait time.Duration, cursor string, limit int) (fleetstate.TicketPage, error) {
	args := map[string]any{"wait_s": wait.Seconds()}
	if cursor != "" {
		args["cursor"] = cursor
	}
	if limit > 0 {
		args["limit"] = limit
	}
	var p fleetstate.TicketPage
	err := c.Call(ctx, "fleet_poll", args, &p)
	return p, err
}

// PollAll returns every ticket of the lead, page after page; only the
// first page waits up to wait for news.
func (c *Client) PollAll(ctx context.Context, wait time.Duration) ([]fleetstate.Outcome, error) {
	var all []fleetstate.Outcome
	cursor := ""
	for {
		p, err := c.PollPage(ctx, wait, cursor, 0)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Tickets...)
		if p.Next == "" {
			return all, nil
		}
		cursor, wait = p.Next, 0
	}
}

// Ack drops a finished ticket (fleet_ack).
func (c *Client) Ack(ctx context.Context, ticket string) error {
	return c.Call(ctx, "fleet_ack", map[string]any{"ticket": ticket}, nil)
}

// Cancel cancels the turn of a ticket and returns how it ended
// (fleet_cancel with ticket).
func (c *Client) Cancel(ctx context.Context, ticket string) (fleetstate.Outcome, error) {
	return c.outcome(ctx, "fleet_cancel", map[string]any{"ticket": ticket})
}

// CancelTurn cancels a turn by its ID (fleet_cancel with turn_id).
func (c *Client) CancelTurn(ctx context.Context, turnID string) (fleetstate.Outcome, error) {
	return c.outcome(ctx, "fleet_cancel", map[string]any{"turn_id": turnID})
}

// Members lists the members a lead can send to (fleet_members).
func (c *Client) Members(ctx context.Context) ([]fleetstate.MemberInfo, error) {
	var out struct{ Members []fleetstate.MemberInfo }
	err := c.Call(ctx, "fleet_members", nil, &out)
	return out.Members, err
}

// Next takes a member's next message, waiting up to wait for one; ok is
// false when none came (fleet_next). A wait of zero returns at once, as
// [fleetstate.Rendezvous.Next] does; the server caps long waits.
func (c *Client) Next(ctx context.Context, wait time.Duration) (msg fleetstate.Message, ok bool, err error) {
	return c.next(ctx, map[string]any{"wait_s": max(wait.Seconds(), 0)})
}

// NextAfter is Next sent again after a Next whose answer was lost:
// afterTurn is the turn the member took last ("" for none), and a turn
// handed to the lost call is handed again (see
// [fleetstate.Rendezvous.NextAfter]).
func (c *Client) NextAfter(ctx context.Context, afterTurn string, wait time.Duration) (msg fleetstate.Message, ok bool, err error) {
	return c.next(ctx, map[string]any{"wait_s": max(wait.Seconds(), 0), "after_turn": afterTurn})
}

func (c *Client) next(ctx context.Context, args map[string]any) (msg fleetstate.Message, ok bool, err error) {
	var out struct {
		fleetstate.Message
		Outcome string `json:"outcome"`
	}
	if err := c.Call(ctx, "fleet_next", args, &out); err != nil {
		return fleetstate.Message{}, false, err
	}
	if out.Outcome == "none" {
		return fleetstate.Message{}, false, nil
	}
	return out.Message, true, nil
}

// Ask asks the lead a question in the member's current turn and waits for
// the answer, or def when the window passes (fleet_ask).
func (c *Client) Ask(ctx context.Context, question, def string) (answer string, timedOut bool, err error) {
	return c.AskTurn(ctx, "", question, def)
}

// AskTurn is Ask bound to turn turnID (fleet_ask with turn_id); an empty
// turnID means the current turn.
func (c *Client) AskTurn(ctx context.Context, turnID, question, def string) (answer string, timedOut bool, err error) {
	args := map[string]any{"question": question, "default": def}
	if turnID != "" {
		args["turn_id"] = turnID
	}
	var out struct {
		Answer   string `json:"answer"`
		TimedOut bool   `json:"timed_out"`
	}
	err = c.Call(ctx, "fleet_ask", args, &out)
	return out.Answer, out.TimedOut, err
}

// Reply replies to the lead and ends the member's current turn
// (fleet_reply).
func (c *Client) Reply(ctx context.Context, content string) error {
	return c.ReplyTurn(ctx, "", content)
}

// ReplyTurn is Reply bound to turn turnID (fleet_reply with turn_id); an
// empty turnID means the current turn.
func (c *Client) ReplyTurn(ctx context.Context, turnID, content string) error {
	return c.ReplyUsage(ctx, turnID, content, fleetstate.UsageReport{})
}

// ReplyUsage is ReplyTurn that also reports, before the turn ends, what
// the member's model calls used so far as rep counts them (see
// [fleetstate.Rendezvous.ReportUsage]); an empty rep.Source reports
// nothing.
func (c *Client) ReplyUsage(ctx context.Context, turnID, content string, rep fleetstate.UsageReport) error {
	args := map[string]any{"content": content}
	if turnID != "" {
		args["turn_id"] = turnID
	}
	if u := rep.Total; rep.Source != "" {
		args["usage_source"] = rep.Source
		args["input_tokens"], args["output_tokens"] = u.Input, u.Output
		args["cache_read_tokens"], args["cache_write_tokens"], args["model"] = u.CacheRead, u.CacheWrite, rep.Model
	}
	return c.Call(ctx, "fleet_reply", args, nil)
}

func (c *Client) outcome(ctx context.Context, tool string, args map[string]any) (fleetstate.Outcome, error) {
	var o fleetstate.Outcome
	if err := c.Call(ctx, tool, args, &o); err != nil {
		return fleetstate.Outcome{}, err
	}
	return o, nil
}
