package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/usage"

	"github.com/fleetstate/fleetstate"
)

// runStatus reports an agent's status to the daemon: the status given as an
// argument, or, without one, the status a hook event on standard input
// stands for. Coding-agent CLIs run it from their lifecycle hooks.
func runStatus(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("status")
	agentName := fs.String("agent", os.Getenv("FLEET_AGENT"), "the reporting agent (must be the token's)")
	url := fs.String("url", envOr("FLEET_URL", "http://127.0.0.1:7333"), "the daemon's base URL ($FLEET_URL)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	token := os.Getenv("FLEET_TOKEN")
	if token == "" {
		return errors.New("status: $FLEET_TOKEN is not set: set it to the agent's token (fleetstate token add, or the agent's environment from fleetstate up)")
	}
	var st fleetstate.Status
	var used *mcphttp.UsageReport
	var rd usage.Reader
	var transcript string
	// settled reports whether the transcript holds the model call that
	// fired the hook; nil: it need not be read again.
	var settled func(d usage.ByModel) bool
	switch fs.NArg() {
	case 1:
		s, err := fleetstate.ParseStatus(fs.Arg(0))
		if err != nil || s == fleetstate.StatusUnknown {
			return fmt.Errorf("status: %q is not idle, working or blocked", fs.Arg(0))
		}
		st = s
	case 0:
		var ev agent.HookEvent
		if err := json.NewDecoder(io.LimitReader(stdin, 1<<20)).Decode(&ev); err != nil {
			return fmt.Errorf("status: no status given and no hook event on standard input: %v", err)
		}
		name, ok := agent.StatusOfHook(ev)
		if !ok {
			return nil // an event that says nothing of the status
		}
		st, _ = fleetstate.ParseStatus(name)
		if ev.Transcript != "" && agent.UsageMayHaveGrown(ev) {
			// The whole transcript's total, each time: the daemon counts
			// what it adds, so nothing is counted twice.
			if total, err := rd.Read(ev.Transcript); err != nil {
				fmt.Fprintf(stderr, "fleetstate status: usage not reported: %v\n", err)
			} else {
				transcript = ev.Transcript
				used = &mcphttp.UsageReport{Source: usageSource(transcript), Usage: total.Sum(), Models: total}
				switch id := ev.ToolUseID; {
				case !agent.IsCodex(ev):
					settled = func(d usage.ByModel) bool { return len(d) > 0 }
				case id != "" && !rd.Recorded(transcript, id):
					settled = func(usage.ByModel) bool { return rd.Recorded(transcript, id) }
				}
			}
		}
	default:
		return errors.New("status: want one status: idle, working or blocked")
	}
	post := func(r mcphttp.StatusReport) error {
		body, _ := json.Marshal(r)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(strings.TrimSuffix(*url, "/mcp"), "/")+mcphttp.StatusPath, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("status: no daemon at %s (%v): start one with fleetstate serve or fleetstate up, or set --url / $FLEET_URL", *url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("status: the daemon answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
		}
		return nil
	}
	if err := post(mcphttp.StatusReport{Agent: *agentName, Status: strings.ToLower(st.String()), Usage: used}); err != nil || settled == nil {
		return err
	}
	// Claude Code writes the model call that fired the hook (the one that
	// asked for the tool, the turn's last) to its transcript after the
	// hook starts, and Codex may write that call's usage record as the
	// hook starts: read on until it is there, for a bounded while, so that
	// it counts now, while the turn it belongs to is open.
	deadline := time.Now().Add(usageSettle)
	for time.Now().Before(deadline) {
		time.Sleep(usagePoll)
		d, err := rd.Read(transcript)
		if err != nil {
			continue
		}
		used.Models.Add(d)
		if settled(d) {
			used.Usage = used.Models.Sum()
			return post(mcphttp.StatusReport{Agent: *agentName, Usage: used})
		}
	}
	return nil
}

// How long, and how often, the status hook reads the transcript again
// for the model call that fired it: Claude Code's comes 40 to 80 ms after
// the hook starts on a quiet machine, and more than 300 ms was seen under
// two full test runs.
const (
	usageSettle = 2 * time.Second
	usagePoll   = 15 * time.Millisecond
)

// usageSource names a transcript as a usage source: its path, or the
// path's digest where the path is longer than a source may be.
func usageSource(path string) string {
	if len(path) <= usage.MaxSource {
		return path
	}
	sum := sha256.Sum256([]byte(path))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// daemonBase returns the base URL of a daemon from its MCP endpoint.
func daemonBase(url string) string {
	return strings.TrimRight(strings.TrimSuffix(url, "/mcp"), "/")
}

// checkTokenIdentity asks the daemons at urls, in order, who token is,
// and refuses an --agent or --role that says otherwise. The first daemon
// that answers decides; one that cannot be reached, or fails with a 5xx,
// passes the question to the next.
func checkTokenIdentity(ctx context.Context, urls []string, token, agent, role string) error {
	var first error
	for _, url := range urls {
		answered, err := checkTokenIdentityAt(ctx, url, token, agent, role)
		if answered {
			return err
		}
		if first == nil {
			first = err
		}
	}
	if len(urls) > 1 {
		return fmt.Errorf("%v; and no other daemon of --connect answers", first)
	}
	return first
}

// checkTokenIdentityAt is checkTokenIdentity of one daemon. It reports
// whether the daemon answered, so that its error is the final word.
func checkTokenIdentityAt(ctx context.Context, url, token, agent, role string) (answered bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, daemonBase(url)+mcphttp.StatusPath, nil)
	if err != nil {
		return true, fmt.Errorf("mcp: --connect %s: %v", url, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("mcp: no daemon at %s (%v): start one with fleetstate serve or fleetstate up, or fix --connect", url, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusUnauthorized:
		return true, fmt.Errorf("mcp: the daemon at %s refuses the token in $FLEET_TOKEN (unknown or revoked): make one with fleetstate token add", url)
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode < 500, fmt.Errorf("mcp: %s does not answer as a fleetstate daemon (%s: %s): check --connect", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	var who struct{ Agent, Role string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&who); err != nil || who.Agent == "" {
		return true, fmt.Errorf("mcp: %s does not say whose the token is: is it a fleetstate daemon of this version?", url)
	}
	if agent != "" && agent != who.Agent {
		return true, fmt.Errorf("mcp: --agent %s (or $FLEET_AGENT) contradicts the token in $FLEET_TOKEN, which is %s %s's: drop --agent, or use %s's token", agent, who.Role, who.Agent, agent)
	}
	if role != "" && role != who.Role {
		return true, fmt.Errorf("mcp: --role %s (or $FLEET_ROLE) contradicts the token in $FLEET_TOKEN, which is %s %s's: drop --role, or use a %s token", role, who.Role, who.Agent, role)
	}
	return true, nil
}

// splitURLs splits the --connect list at its commas, dropping blanks.
func splitURLs(list string) []string {
	var urls []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}
