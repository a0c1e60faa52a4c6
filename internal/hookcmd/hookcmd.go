// Package hookcmd is `fleetstate hook`: the commands coding agents run
// from their hooks. `hook permission` is Claude Code's and Codex's
// PermissionRequest hook: it raises the agent's request in its fleet and
// prints the decision in the shape the agents read, or nothing, so that
// the agent's own prompt shows, when nobody decided in time or the daemon
// cannot be reached. It never allows by default.
package hookcmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/daemon/permission"
	"github.com/fleetstate/fleetstate/internal/cmdhelp"
)

// DefaultTimeout is how long `hook permission` waits for a decision.
const DefaultTimeout = 2 * time.Minute

// Bounds of the retries across an unreachable daemon or a restart of the
// fleet's owner: the first wait, the longest, and the slack given to each
// call past the request's window for the answer to travel.
const (
	retryFirst = 200 * time.Millisecond
	retryMax   = 2 * time.Second
	callSlack  = 5 * time.Second
)

// restartGrace is how long the hook goes on trying a daemon that
// answered it once and now refuses connections: a restart of the owner
// (killed, and brought back by up or a supervisor) closes its port for a
// moment. A daemon never reached is not waited for.
const restartGrace = 20 * time.Second

// Env is what the hook reads of its environment.
type Env struct {
	URL   string // $FLEET_URL: the daemon's MCP endpoint or base URL
	Token string // $FLEET_TOKEN: the agent's bearer token
}

// Run runs `fleetstate hook` with args (the words after "hook"). It
// returns an error only for a mistake in args; any trouble reaching a
// decision goes to stderr, and stdout stays empty.
func Run(ctx context.Context, args []string, env Env, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := cmdhelp.NewFlagSet("hook permission")
	timeout := fs.Duration("timeout", DefaultTimeout, "how long to wait for a decision before the agent's own prompt shows")
	if len(args) == 0 || args[0] != "permission" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return cmdhelp.Parse(fs, args, stdout)
		}
		return errors.New("hook: want a hook: fleetstate hook permission [--timeout D] (see fleetstate hook --help)")
	}
	if err := cmdhelp.Parse(fs, args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("hook permission: unexpected argument %q", fs.Arg(0))
	}
	if *timeout <= 0 || *timeout > fleetstate.MaxPermissionTimeout {
		return fmt.Errorf("hook permission: --timeout %v: want a duration above 0 and at most %v", *timeout, fleetstate.MaxPermissionTimeout)
	}
	d, ok := Permission(ctx, env, *timeout, stdin, stderr)
	if !ok {
		return nil
	}
	if err := json.NewEncoder(stdout).Encode(hookOutput(d)); err != nil {
		return err
	}
	// The agent goes on with its turn (the tool runs, or the model hears
	// of the denial), and no hook of its says so until the tool's use
	// ends: the status the request made BLOCKED is WORKING again.
	reportStatus(ctx, env, "working", stderr)
	return nil
}

// reportStatus tells the daemon the agent's status, as its status hook
// does; a failure is only said on stderr. The permission hook reports
// both of its statuses itself, in order: a status hook on the same event
// would run beside it, and its report could land last.
func reportStatus(ctx context.Context, env Env, status string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(ctx, statusWait)
	defer cancel()
	body, _ := json.Marshal(mcphttp.StatusReport{Status: status})
	url := strings.TrimRight(strings.TrimSuffix(env.URL, "/mcp"), "/") + mcphttp.StatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+env.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "fleetstate hook permission: report the status: %v\n", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}

// statusWait bounds a status report.
const statusWait = 2 * time.Second

// hookInput is the part of the agent's request the hook reads.
type hookInput struct {
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	Cwd       string          `json:"cwd"`
	SessionID string          `json:"session_id"`
	ToolUseID string          `json:"tool_use_id"` // sent by neither CLI today
	PromptID  string          `json:"prompt_id"`   // Claude Code: the prompt whose turn asks
	TurnID    string          `json:"turn_id"`     // Codex: the turn that asks
}

// key names the tool use the agent asks about, the same across a re-run
// of the hook, so that the request raised before and its decision are
// found again: the tool use's ID where the agent sends one; else the
// session, the turn (Claude Code's prompt, Codex's turn) and a digest of
// the tool and its input. A tool use asked about twice in one turn, with
// the same input, is one request. Without a session the key is random:
// one run of the hook, one request.
func (in hookInput) key() string {
	switch {
	case in.SessionID == "":
		var b [16]byte
		_, _ = rand.Read(b[:])
		return "hook-" + hex.EncodeToString(b[:])
	case in.ToolUseID != "":
		return in.SessionID + "/" + in.ToolUseID
	}
	var input bytes.Buffer
	if json.Compact(&input, in.ToolInput) != nil {
		input.Write(in.ToolInput)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(in.ToolName), input.Bytes()} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return in.SessionID + "/" + in.PromptID + in.TurnID + "/" + hex.EncodeToString(h.Sum(nil)[:16])
}

// hookOutput is the decision in the shape Claude Code and Codex read.
func hookOutput(d fleetstate.Decision) any {
	dec := map[string]string{"behavior": string(d.Behavior)}
	if d.Behavior == fleetstate.BehaviorDeny && d.Message != "" {
		dec["message"] = d.Message
	}
	return map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PermissionRequest",
		"decision":      dec,
	}}
}

// Permission raises the request read from stdin and waits at most
// timeout for its decision; ok is false when there is none to print:
// undecided, refused, or no daemon listening at the URL (said at once).
// It retries while the daemon is restarting or not yet the fleet's
// owner, with the same key, so that the request raised before, and a
// decision made on it, are found again.
func Permission(ctx context.Context, env Env, timeout time.Duration, stdin io.Reader, stderr io.Writer) (fleetstate.Decision, bool) {
	say := func(format string, args ...any) {
		fmt.Fprintf(stderr, "fleetstate hook permission: "+format+"\n", args...)
	}
	var in hookInput
	if err := json.NewDecoder(io.LimitReader(stdin, 1<<20)).Decode(&in); err != nil {
		say("no request on standard input: %v", err)
		return fleetstate.Decision{}, false
	}
	if env.Token == "" || env.URL == "" {
		say("$FLEET_TOKEN or $FLEET_URL is not set: not in a fleet")
		return fleetstate.Decision{}, false
	}
	// The agent waits on the request: BLOCKED, as a status hook on
	// PermissionRequest would report it.
	reportStatus(ctx, env, "blocked", stderr)
	key := in.key()
	url := strings.TrimRight(strings.TrimSuffix(env.URL, "/mcp"), "/") + permission.Path
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(callSlack))
	defer cancel()
	wait := retryFirst
	var seen time.Time // when a daemon last answered, or took the connection
	for {
		left := time.Until(deadline)
		if left <= 0 {
			say("no decision within %v", timeout)
			return fleetstate.Decision{}, false
		}
		// Not json.Marshal, which would escape the input's <, > and &
		// (a shell command's redirections) for HTML.
		var body bytes.Buffer
		enc := json.NewEncoder(&body)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(permission.HookRequest{ToolName: in.ToolName, ToolInput: in.ToolInput, Cwd: in.Cwd,
			SessionID: in.SessionID, Key: key, TimeoutMS: max(left.Milliseconds(), 1)})
		d, status, err := post(ctx, url, env.Token, body.Bytes())
		refused := errors.Is(err, syscall.ECONNREFUSED)
		if !refused {
			seen = time.Now()
		}
		switch {
		case err == nil && status == http.StatusOK:
			return d, true
		case err == nil && status == http.StatusNoContent:
			say("nobody decided within %v", timeout)
			return fleetstate.Decision{}, false
		case err == nil && status < 500:
			say("the daemon refused the request (%s)", http.StatusText(status))
			return fleetstate.Decision{}, false
		case ctx.Err() != nil:
			say("no decision within %v", timeout)
			return fleetstate.Decision{}, false
		case refused && seen.IsZero():
			// Nobody listens there: no daemon serves the fleet, and the
			// agent asks as usual at once rather than after the window.
			say("no daemon at %s (%v): the agent asks as usual", env.URL, err)
			return fleetstate.Decision{}, false
		case refused && time.Since(seen) > restartGrace:
			say("the daemon at %s went away and has not come back for %v (%v): the agent asks as usual", env.URL, restartGrace, err)
			return fleetstate.Decision{}, false
		}
		// A daemon closing, restarting or not yet the fleet's owner: try
		// again until the window ends.
		t := time.NewTimer(min(wait, max(time.Until(deadline), 0)))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
	}
}

// post makes one call of the permission endpoint.
func post(ctx context.Context, url, token string, body []byte) (fleetstate.Decision, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fleetstate.Decision{}, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fleetstate.Decision{}, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fleetstate.Decision{}, resp.StatusCode, nil
	}
	var hd permission.HookDecision
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&hd); err != nil {
		return fleetstate.Decision{}, 0, err
	}
	if hd.Decision.Behavior != fleetstate.BehaviorAllow && hd.Decision.Behavior != fleetstate.BehaviorDeny {
		return fleetstate.Decision{}, http.StatusUnprocessableEntity, nil // never pass on what is not a decision
	}
	return hd.Decision, http.StatusOK, nil
}
