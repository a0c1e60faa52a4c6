package mcpadapter

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fleetstate/fleetstate"
)

func ann(title string, readOnly, destructive, idempotent bool) mcp.ToolAnnotation {
	f := false
	return mcp.ToolAnnotation{Title: title, ReadOnlyHint: &readOnly, DestructiveHint: &destructive,
		IdempotentHint: &idempotent, OpenWorldHint: &f}
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

func out(props map[string]any, required ...string) map[string]any {
	return map[string]any{"properties": props, "required": required}
}

// okOut is the output schema of a tool that answers {ok: true} or an error.
func okOut() map[string]any {
	return out(map[string]any{"ok": map[string]any{"type": "boolean"}}, "ok")
}

// okResult is the result of such a tool's call whose error is err.
func okResult(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return map[string]bool{"ok": true}, nil
}

// Arguments of the tools. Every field is a pointer, so that decodeArgs
// tells a missing argument from a zero one.
type (
	newSessionArgs struct {
		Name *string `json:"name"`
	}
	noArgs  struct{}
	putArgs struct {
		AgentName *string `json:"agent_name"`
		FileName  *string `json:"file_name"`
		Content   *string `json:"content"`
		Overwrite *bool   `json:"overwrite"`
	}
	getArgs struct {
		ID *string `json:"id"`
	}
	listArgs struct {
		SessionID *string `json:"session_id"`
		AgentName *string `json:"agent_name"`
	}
	sendArgs struct {
		To      *string `json:"to"`
		TurnID  *string `json:"turn_id"`
		Content *string `json:"content"`
		Wait    *bool   `json:"wait"`
	}
	nextArgs struct {
		WaitS     *float64 `json:"wait_s"`
		AfterTurn *string  `json:"after_turn"`
	}
	askArgs struct {
		Question *string `json:"question"`
		Default  *string `json:"default"`
		TurnID   *string `json:"turn_id"`
	}
	replyArgs struct {
		Content     *string  `json:"content"`
		TurnID      *string  `json:"turn_id"`
		UsageSource *string  `json:"usage_source"`
		Model       *string  `json:"model"`
		Input       *float64 `json:"input_tokens"`
		Output      *float64 `json:"output_tokens"`
		CacheRead   *float64 `json:"cache_read_tokens"`
		CacheWrite  *float64 `json:"cache_write_tokens"`
	}
	pollArgs struct {
		Ticket *string  `json:"ticket"`
		WaitS  *float64 `json:"wait_s"`
		Limit  *float64 `json:"limit"`
		Cursor *string  `json:"cursor"`
	}
	cancelArgs struct {
		Ticket *string `json:"ticket"`
		TurnID *string `json:"turn_id"`
	}
	ackArgs struct {
		Ticket *string `json:"ticket"`
	}
	approveArgs struct {
		ID       *string `json:"id"`
		Behavior *string `json:"behavior"`
		Message  *string `json:"message"`
	}
)

// fileEntry is one file of a list result.
type fileEntry struct {
	ID        string `json:"id"`
	AgentName string `json:"agent_name"`
	FileName  string `json:"file_name"`
	Size      int64  `json:"size"`
	Modified  string `json:"modified"`
}

func (a *Adapter) storeTools() []tool {
	return []tool{
		{
			name: "new_session",
			description: "Start a new session and make it the current one; the previous session is archived and its files stay readable by ID. " +
				"Returns the new session's id (a UUID).",
			access:      lifecycle,
			input:       []field{{name: "name", kind: "string", desc: "a label for the session", required: true}},
			output:      out(map[string]any{"id": str("the session ID")}, "id"),
			annotations: ann("Start a session", false, false, false),
			newArgs:     func() any { return new(newSessionArgs) },
			call: func(_ context.Context, _ Identity, args any) (any, error) {
				s, err := a.store.NewSession(*args.(*newSessionArgs).Name)
				if err != nil {
					return nil, err
				}
				return map[string]string{"id": s.ID}, nil
			},
		},
		{
			name:        "get_session",
			description: "Return the current session's id and name. Fails with ERR_NO_ACTIVE_SESSION before the first new_session.",
			access:      anyone,
			output:      out(map[string]any{"id": str("the session ID"), "name": str("the session's name")}, "id", "name"),
			annotations: ann("Current session", true, false, true),
			newArgs:     func() any { return new(noArgs) },
			call: func(context.Context, Identity, any) (any, error) {
				s, err := a.store.CurrentSession()
				if err != nil {
					return nil, err
				}
				return map[string]string{"id": s.ID, "name": s.Name}, nil
			},
		},
		{
			name: "clean_sessions",
			description: "Remove every session, every stored file and all pending fleet work (tickets, queued messages), " +
				"leaving no current session; files the store did not make stay. Cannot be undone.",
			access:      lifecycle,
			output:      out(map[string]any{"success": map[string]any{"type": "boolean"}}, "success"),
			annotations: ann("Remove all sessions", false, true, true),
			newArgs:     func() any { return new(noArgs) },
			call: func(context.Context, Identity, any) (any, error) {
				clean := a.store.Clean
				if a.rv != nil {
					clean = a.rv.Clean
				}
				if err := clean(); err != nil {
					return nil, err
				}
				return map[string]bool{"success": true}, nil
			},
		},
		{
			name: "put",
			description: "Store a file in the current session under agent_name. file_name is a relative path such as notes.md or src/plan/steps.txt. " +
				"Fails with ERR_FILE_EXISTS if the file exists and overwrite is not true. Returns the file's id " +
				"(fsm::file::SESSION::AGENT::FILE), which any agent can pass to get.",
			access: anyone,
			input: []field{
				{name: "agent_name", kind: "string", desc: "the agent the file belongs to (a member may only use its own name)", required: true},
				{name: "file_name", kind: "string", desc: "relative path of the file, folders separated by /", required: true},
				{name: "content", kind: "string", desc: "the file's content", required: true},
				{name: "overwrite", kind: "boolean", desc: "replace an existing file (default false)"},
			},
			output:      out(map[string]any{"id": str("the file ID")}, "id"),
			annotations: ann("Store a file", false, true, false),
			newArgs:     func() any { return new(putArgs) },
			call: func(_ context.Context, id Identity, args any) (any, error) {
				p := args.(*putArgs)
				if id.Role == RoleMember && *p.AgentName != id.Agent {
					return nil, &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "put",
						Err: errorf("member %s may only write under its own agent name", id.Agent)}
				}
				fid, err := a.store.Put(*p.AgentName, *p.FileName, []byte(*p.Content), p.Overwrite != nil && *p.Overwrite)
				if err != nil {
					return nil, err
				}
				return map[string]string{"id": fid.String()}, nil
			},
		},
		{
			name: "get",
			description: "Return the content of the file with this id, from any session still on disk. Errors: ERR_CAN_ONLY_RETRIEVE_FILES " +
				"(not a file id), ERR_SESSION_NOT_VALID, ERR_AGENT_NOT_VALID, ERR_FILE_NOT_FOUND.",
			access:      anyone,
			input:       []field{{name: "id", kind: "string", desc: "a file id as put returned it: fsm::file::SESSION::AGENT::FILE", required: true}},
			output:      out(map[string]any{"content": str("the file's content")}, "content"),
			annotations: ann("Read a file", true, false, true),
			newArgs:     func() any { return new(getArgs) },
			call: func(_ context.Context, _ Identity, args any) (any, error) {
				fid, err := fleetstate.ParseFileID(*args.(*getArgs).ID)
				if err != nil {
					return nil, err
				}
				data, err := a.store.Get(fid)
				if err != nil {
					return nil, err
				}
				return map[string]string{"content": string(data)}, nil
			},
		},
		{
			name:        "list",
			description: "List the files of a session (the current one by default), optionally of one agent, with their ids, sizes and modification times.",
			access:      anyone,
			input: []field{
				{name: "session_id", kind: "string", desc: "a session ID (default: the current session)"},
				{name: "agent_name", kind: "string", desc: "only this agent's files"},
			},
			output: out(map[string]any{"files": map[string]any{"type": "array", "items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"id": str("the file ID"), "agent_name": str(""), "file_name": str(""),
					"size":     map[string]any{"type": "integer", "description": "bytes"},
					"modified": str("modification time, RFC 3339"),
				},
				"required": []string{"id", "agent_name", "file_name", "size", "modified"},
			}}}, "files"),
			annotations: ann("List files", true, false, true),
			newArgs:     func() any { return new(listArgs) },
			call: func(_ context.Context, _ Identity, args any) (any, error) {
				l := args.(*listArgs)
				files, err := a.store.List(deref(l.SessionID), deref(l.AgentName))
				if err != nil {
					return nil, err
				}
				entries := make([]fileEntry, len(files))
				for i, f := range files {
					entries[i] = fileEntry{ID: f.ID.String(), AgentName: f.ID.Agent(), FileName: f.ID.Name(),
						Size: f.Size, Modified: f.ModTime.UTC().Format(time.RFC3339Nano)}
				}
				return map[string]any{"files": entries}, nil
			},
		},
	}
}

// outcomeProps describe an outcome's fields; the values of outcome, reason
// and state are the library's lists, so the schema cannot drift from it.
var outcomeProps = map[string]any{
	"outcome": enum("how the turn ended, or pending", fleetstate.OutcomeKinds()),
	"turn_id": str("the turn; answer a question with fleet_send{turn_id, content}"),
	"ticket":  str("collect the outcome later with fleet_poll, then fleet_ack"),
	"from":    str("the member"),
	"content": str("the reply, the question, or the member's pane tail"),
	"partial": map[string]any{"type": "boolean", "description": "content was clipped to the scrape window"},
	"reason":  enum("why the turn failed", fleetstate.Reasons()),
	"state":   enum("where the ticket's turn stands", fleetstate.TicketStates()),
	"returned": map[string]any{"type": "boolean",
		"description": "a call of yours already returned this outcome; it is kept only in case that response was lost"},
}

// enum describes a string property whose values are values.
func enum[S ~string](desc string, values []S) map[string]any {
	e := make([]string, len(values))
	for i, v := range values {
		e[i] = string(v)
	}
	return map[string]any{"type": "string", "description": desc, "enum": e}
}

func (a *Adapter) fleetTools() []tool {
	rv := a.rv
	return []tool{
		{
			name: "fleet_send",
			description: "Lead only. Send work to a member and wait for the outcome: {outcome: reply|question|turn_done|pending|failed}. " +
				"Use {to, content} to open a new turn, or {turn_id, content} to answer the member's question in that turn (never answer by name: that opens a new turn). " +
				"With wait:false it returns {outcome: pending, ticket} at once. A blocking call returns before 60 s: if the member is not done it returns pending " +
				"with a ticket; collect it with fleet_poll.",
			access: leadOnly,
			input: []field{
				{name: "to", kind: "string", desc: "the member to send to (new turn)"},
				{name: "turn_id", kind: "string", desc: "the turn whose question this answers"},
				{name: "content", kind: "string", desc: "the message or the answer", required: true},
				{name: "wait", kind: "boolean", desc: "block for the outcome (default true); only with to"},
			},
			output:      out(outcomeProps, "outcome"),
			annotations: ann("Delegate to a member", false, false, false),
			newArgs:     func() any { return new(sendArgs) },
			call: func(ctx context.Context, id Identity, args any) (any, error) {
				s := args.(*sendArgs)
				// Which arguments are present is the decoding's to check;
				// the rest is the library's.
				switch {
				case (s.To == nil) == (s.TurnID == nil):
					return nil, invalid("give exactly one of to (a new turn) or turn_id (an answer)")
				case s.TurnID != nil && s.Wait != nil:
					return nil, invalid("wait goes with to, not with turn_id")
				}
				return rv.Delegate(ctx, id.Agent, fleetstate.SendRequest{To: deref(s.To), TurnID: deref(s.TurnID),
					Content: *s.Content, Detached: s.Wait != nil && !*s.Wait})
			},
		},
		{
			name: "fleet_next",
			description: "Member only. Wait up to wait_s seconds (default " + secs(fleetstate.DefaultNextWait) + ") for your next message and return {turn_id, from, content}, " +
				"or {outcome: none} if none came. Calling it ends your previous turn if you did not reply to it.",
			access: memberOnly,
			input: []field{
				{name: "wait_s", kind: "number", desc: "seconds to wait (default " + secs(fleetstate.DefaultNextWait) + ", at most " + secs(fleetstate.DefaultMaxWait) + ")", min: zero()},
				{name: "after_turn", kind: "string", desc: "the turn_id you took last (\"\" for none): sent again after its answer was lost, the call gets " +
					"the turn handed to the lost one instead of ending it; named on every call, a late duplicate of an old call is refused (ERR_SUPERSEDED)"},
			},
			output:      out(map[string]any{"turn_id": str(""), "from": str("the lead"), "content": str("the message"), "outcome": str("none when no message came")}),
			annotations: ann("Take the next message", false, false, false),
			newArgs:     func() any { return new(nextArgs) },
			call: func(ctx context.Context, id Identity, args any) (any, error) {
				a := args.(*nextArgs)
				wait := fleetstate.DefaultNextWait
				if a.WaitS != nil {
					wait = seconds(*a.WaitS)
				}
				var msg fleetstate.Message
				var ok bool
				var err error
				if a.AfterTurn != nil {
					msg, ok, err = rv.NextAfter(ctx, id.Agent, *a.AfterTurn, wait)
				} else {
					msg, ok, err = rv.Next(ctx, id.Agent, wait)
				}
				if err != nil {
					return nil, err
				}
				if !ok {
					return map[string]string{"outcome": "none"}, nil
				}
				return msg, nil
			},
		},
		{
			name: "fleet_ask",
			description: "Member only. Ask the lead a question in your current turn and wait for the answer: {answer, timed_out}. " +
				"The lead has about " + secs(fleetstate.DefaultAskTimeout) + " s; then you get your default (timed_out: true). Give a default you can live with.",
			access: memberOnly,
			input: []field{
				{name: "question", kind: "string", desc: "the question", required: true},
				{name: "default", kind: "string", desc: "the answer to use if the lead does not answer in time"},
				{name: "turn_id", kind: "string", desc: "the turn_id fleet_next gave you: the question is then asked in that turn only"},
			},
			output:      out(map[string]any{"answer": str(""), "timed_out": map[string]any{"type": "boolean"}}, "answer", "timed_out"),
			annotations: ann("Ask the lead", false, false, false),
			newArgs:     func() any { return new(askArgs) },
			call: func(ctx context.Context, id Identity, args any) (any, error) {
				q := args.(*askArgs)
				text, timedOut, err := rv.AskTurn(ctx, id.Agent, deref(q.TurnID), *q.Question, deref(q.Default))
				if err != nil {
					return nil, err
				}
				return map[string]any{"answer": text, "timed_out": timedOut}, nil
			},
		},
		{
			name: "fleet_reply",
			description: "Member only. Reply to the lead and end your current turn. Pass the turn_id fleet_next gave you, so that the reply lands on that turn only. " +
				"Fails with ERR_NO_OPEN_TURN if that turn (or, without turn_id, any turn) is not open, ERR_TURN_CANCELLED if the lead cancelled it.",
			access: memberOnly,
			input: []field{
				{name: "content", kind: "string", desc: "your reply: the report the lead asked for", required: true},
				{name: "turn_id", kind: "string", desc: "the turn_id fleet_next gave you"},
				{name: "usage_source", kind: "string", desc: "if your host does not report your model's usage itself: what counts the tokens below (your process, say); they are its running totals, and a total sent twice counts once"},
				{name: "model", kind: "string", desc: "with usage_source: the model the tokens went to, as the fleet's prices name it"},
				{name: "input_tokens", kind: "number", desc: "with usage_source: input tokens used so far", min: zero()},
				{name: "output_tokens", kind: "number", desc: "with usage_source: output tokens used so far", min: zero()},
				{name: "cache_read_tokens", kind: "number", desc: "with usage_source: input tokens read from a cache so far", min: zero()},
				{name: "cache_write_tokens", kind: "number", desc: "with usage_source: input tokens written to a cache so far", min: zero()},
			},
			output:      okOut(),
			annotations: ann("Reply to the lead", false, false, false),
			newArgs:     func() any { return new(replyArgs) },
			call: func(_ context.Context, id Identity, args any) (any, error) {
				ra := args.(*replyArgs)
				reps, err := ra.reports()
				if err != nil {
					return nil, err
				}
				return okResult(rv.ReplyTurnUsage(id.Agent, deref(ra.TurnID), *ra.Content, reps...))
			},
		},
		{
			name: "fleet_poll",
			description: "Lead only. With ticket: that ticket's outcome and state (queued, working, question, done). Without: {tickets: [...], next_cursor?}, " +
				"your tickets oldest first, at most limit (default " + pageLimits + ") a page; pass next_cursor as cursor for the next page. " +
				"wait_s (at most " + secs(fleetstate.DefaultMaxWait) + ") waits for news first. A finished outcome stays until fleet_ack (one a call returned, until your next call).",
			access: leadOnly,
			input: []field{
				{name: "ticket", kind: "string", desc: "one ticket (default: all of yours, a page at a time)"},
				{name: "wait_s", kind: "number", desc: "seconds to wait for a change (default 0)", min: zero()},
				{name: "limit", kind: "number", desc: "without ticket: the most tickets in this page (default " + pageLimits + ")", min: zero()},
				{name: "cursor", kind: "string", desc: "without ticket: next_cursor of the page before"},
			},
			output: out(func() map[string]any {
				p := map[string]any{
					"tickets":     map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": outcomeProps}},
					"next_cursor": str("present when more tickets remain: pass it as cursor"),
				}
				for k, v := range outcomeProps {
					p[k] = v
				}
				return p
			}()),
			annotations: ann("Collect detached work", true, false, true),
			newArgs:     func() any { return new(pollArgs) },
			call: func(ctx context.Context, id Identity, args any) (any, error) {
				p := args.(*pollArgs)
				var wait time.Duration
				if p.WaitS != nil {
					wait = seconds(*p.WaitS)
				}
				if p.Ticket != nil {
					if p.Limit != nil || p.Cursor != nil {
						return nil, invalid("limit and cursor page the tickets; they do not go with ticket")
					}
					return rv.Poll(ctx, id.Agent, *p.Ticket, wait)
				}
				limit := 0
				if p.Limit != nil {
					limit = int(min(*p.Limit, fleetstate.MaxPollLimit))
				}
				return rv.PollPage(ctx, id.Agent, wait, deref(p.Cursor), limit)
			},
		},
		{
			name:        "fleet_ack",
			description: "Lead only. Drop a finished ticket and its outcome once you have read it. ERR_TICKET_OPEN if its turn has not ended.",
			access:      leadOnly,
			input:       []field{{name: "ticket", kind: "string", desc: "the ticket", required: true}},
			output:      okOut(),
			annotations: ann("Acknowledge a ticket", false, true, false),
			newArgs:     func() any { return new(ackArgs) },
			call: func(_ context.Context, id Identity, args any) (any, error) {
				return okResult(rv.Ack(id.Agent, *args.(*ackArgs).Ticket))
			},
		},
		{
			name: "fleet_cancel",
			description: "Lead only. Cancel a turn that is still queued or open, by {ticket} or {turn_id}: it ends {outcome: failed, reason: cancelled}. " +
				"A queued message is never delivered; a member working on it is told on its next call for that turn (ERR_TURN_CANCELLED). " +
				"Cancelling a turn that already ended returns how it ended.",
			access: leadOnly,
			input: []field{
				{name: "ticket", kind: "string", desc: "the ticket of the turn"},
				{name: "turn_id", kind: "string", desc: "or the turn's ID"},
			},
			output:      out(outcomeProps, "outcome"),
			annotations: ann("Cancel a turn", false, true, true),
			newArgs:     func() any { return new(cancelArgs) },
			call: func(_ context.Context, id Identity, args any) (any, error) {
				c := args.(*cancelArgs)
				if (c.Ticket == nil) == (c.TurnID == nil) {
					return nil, invalid("give exactly one of ticket or turn_id")
				}
				return rv.Cancel(id.Agent, deref(c.Ticket)+deref(c.TurnID)) // one of them is empty
			},
		},
		{
			name: "fleet_members",
			description: "Lead only. The members you can send to: {members: [{name, ready, status, queued}]}. Only ready members take work. " +
				"Where the fleet file lets leads decide, also {permissions: [...]}, the members' pending permission requests (see fleet_approve).",
			access: leadOnly,
			output: out(map[string]any{"members": map[string]any{"type": "array", "items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name": str(""), "ready": map[string]any{"type": "boolean"},
					"status": str("IDLE, WORKING, BLOCKED, UNKNOWN, or PULL for members that call fleet_next"),
					"queued": map[string]any{"type": "integer"},
				},
			}}, "permissions": map[string]any{"type": "array", "items": permissionSchema}}, "members"),
			annotations: ann("List members", true, false, true),
			newArgs:     func() any { return new(noArgs) },
			call: func(_ context.Context, id Identity, _ any) (any, error) {
				if a.mayDecide(id) {
					return map[string]any{"members": rv.Members(), "permissions": pending(rv)}, nil
				}
				return map[string]any{"members": rv.Members()}, nil
			},
		},
		a.approveTool(),
	}
}

// secs spells a default bound in whole seconds for a tool's description.
func secs(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// pageLimits spells the default and the most tickets of a page.
var pageLimits = strconv.Itoa(fleetstate.DefaultPollLimit) + ", at most " + strconv.Itoa(fleetstate.MaxPollLimit)

// seconds converts a wait in seconds; the rendezvous caps it further, this
// only keeps huge values from overflowing.
func seconds(s float64) time.Duration {
	return time.Duration(min(s, 3600) * float64(time.Second))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// reports returns the usage a reply carries, nil for none: counts are
// whole numbers, and need their source.
func (a *replyArgs) reports() ([]fleetstate.UsageReport, error) {
	counts := [...]*float64{a.Input, a.Output, a.CacheRead, a.CacheWrite}
	if a.UsageSource == nil {
		if a.Model != nil || counts != [4]*float64{} {
			return nil, invalid("token counts and model need usage_source")
		}
		return nil, nil
	}
	var n [4]int64
	for i, v := range counts {
		if v != nil && (*v != math.Trunc(*v) || *v > 1<<53) {
			return nil, invalid("token counts are whole numbers up to 2^53")
		} else if v != nil {
			n[i] = int64(*v)
		}
	}
	u := fleetstate.Usage{Input: n[0], Output: n[1], CacheRead: n[2], CacheWrite: n[3]}
	return []fleetstate.UsageReport{{Source: *a.UsageSource, Model: deref(a.Model), Total: u}}, nil
}
