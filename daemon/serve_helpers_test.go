package daemon_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The helpers of the tests moved here from cmd/fleetstate, which ran
// `fleetstate serve` and `fleetstate token` as processes: the daemon is
// embedded with the configuration serve would give it, and the token file
// is changed as the token command changes it.

// serveConfig is the configuration `fleetstate serve --dir dir` gives the
// daemon, every other flag at its default (cmd/fleetstate/serve.go); a
// test sets the bounds it would give as flags.
func serveConfig(dir string) daemon.Config {
	return daemon.Config{
		Dir:                 dir,
		IdleTimeout:         daemon.DefaultIdleTimeout,
		HeaderTimeout:       daemon.DefaultHeaderTimeout,
		MaxConns:            daemon.DefaultMaxConns,
		MaxSessionsPerToken: mcphttp.DefaultMaxSessionsPerToken,
		MaxSessions:         mcphttp.DefaultMaxSessions,
		SessionTTL:          daemon.DefaultSessionTTL,
		TokenPoll:           auth.DefaultTokenPoll,
		Rendezvous: fleetstate.RendezvousOptions{
			SendTimeout:   fleetstate.DefaultSendTimeout,
			AskTimeout:    fleetstate.DefaultAskTimeout,
			ReadyTimeout:  fleetstate.DefaultReadyTimeout,
			RejoinTimeout: fleetstate.DefaultRejoinTimeout,
			HoldReturned:  daemon.DefaultHoldReturned,
		},
		Version: "test",
	}
}

// startDaemon embeds a daemon of cfg on 127.0.0.1 on a free port and
// returns its MCP URL; the test's cleanup closes it.
func startDaemon(t *testing.T, cfg daemon.Config) string {
	t.Helper()
	_, url := embed(t, cfg)
	return url
}

// openTokens opens the store of dir, creating it, and its token file, as
// `fleetstate token` does in a process of its own.
func openTokens(t *testing.T, dir string) *auth.Tokens {
	t.Helper()
	store, err := fleetstate.Open(nil, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.OpenTokens(store)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// addToken issues a token to agent with role, lead or member, as
// `fleetstate token add --dir dir` does, and returns it.
func addToken(t *testing.T, dir, agent, role string) string {
	t.Helper()
	r, err := mcpadapter.ParseRole(role)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := openTokens(t, dir).Add(agent, r)
	if err != nil {
		t.Fatalf("token add %s: %v", agent, err)
	}
	return tok
}

// addTokens issues a token to each agent with its role and returns the
// tokens by agent.
func addTokens(t *testing.T, dir string, agents map[string]string) map[string]string {
	t.Helper()
	tokens := make(map[string]string, len(agents))
	for agent, role := range agents {
		tokens[agent] = addToken(t, dir, agent, role)
	}
	return tokens
}

// revokeToken revokes the tokens of agent, as `fleetstate token revoke
// --dir dir` does, and returns once the daemon is bound to refuse them:
// a token revoked by another writer of the file is refused from
// auth.TokenRecheck after the change on (a request that starts in
// between is one of those in progress at the revocation). The command's
// process took longer than that to exit.
func revokeToken(t *testing.T, dir, agent string) {
	t.Helper()
	if _, err := openTokens(t, dir).Revoke(agent); err != nil {
		t.Fatalf("token revoke %s: %v", agent, err)
	}
	time.Sleep(auth.TokenRecheck)
}

// modernRequest returns the headers and body of a JSON-RPC request of
// protocol 2026-07-28, which needs no session.
func modernRequest(id int, method string, params map[string]any) (map[string]string, []byte) {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "0"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	h := map[string]string{
		"Content-Type":         "application/json",
		"Accept":               "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28",
		"Mcp-Method":           method,
	}
	if name, ok := params["name"].(string); ok {
		h["Mcp-Name"] = name
	}
	return h, body
}

// rpcReply is a JSON-RPC response.
type rpcReply struct {
	Result *struct {
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// tryCall calls a tool and reports a failure of the call itself as an
// error rather than failing the test.
func tryCall(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, false, err
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, false, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, false, err
	}
	return out, res.IsError, nil
}
