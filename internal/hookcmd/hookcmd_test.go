package hookcmd_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/hookcmd"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/spf13/afero"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const operator = "fso_operator-token-of-the-hook-test"

type fleet struct {
	rv    *fleetstate.Rendezvous
	srv   *httptest.Server
	token string
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := mcpadapter.OpenTokens(st)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{rv: rv}
	if f.token, err = tokens.Add("scout", mcpadapter.RoleMember); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(mcpadapter.PermissionHandler(rv, mcpadapter.PermissionOptions{Tokens: tokens, Operator: operator}))
	t.Cleanup(func() {
		rv.Close()
		f.srv.Close()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return f
}

const request = `{"session_id":"s1","tool_use_id":"t1","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf build"},"cwd":"/src"}`

// hook runs the command with args against url and returns what it printed.
func hook(t *testing.T, url, token string, args ...string) (stdout string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := hookcmd.Run(context.Background(), append([]string{"permission"}, args...), hookcmd.Env{URL: url, Token: token},
		strings.NewReader(request), &out, &errOut); err != nil {
		t.Fatalf("hook: %v", err)
	}
	t.Logf("stderr: %s", errOut.String())
	return out.String()
}

// decideWhenPending decides the first request to become pending.
func decideWhenPending(t *testing.T, rv *fleetstate.Rendezvous, d fleetstate.Decision) {
	t.Helper()
	go func() {
		for range 5000 {
			if p := rv.PermissionRequests(); len(p) > 0 {
				_ = rv.DecidePermission("operator", p[0].ID, d)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
}

func TestHookAllow(t *testing.T) {
	f := newFleet(t)
	decideWhenPending(t, f.rv, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow})
	got := hook(t, f.srv.URL+"/mcp", f.token)
	want := `{"hookSpecificOutput":{"decision":{"behavior":"allow"},"hookEventName":"PermissionRequest"}}` + "\n"
	if got != want {
		t.Fatalf("stdout %q; want %q", got, want)
	}
}

func TestHookDenyWithMessage(t *testing.T) {
	f := newFleet(t)
	decideWhenPending(t, f.rv, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: "build is shared"})
	got := hook(t, f.srv.URL, f.token)
	want := `{"hookSpecificOutput":{"decision":{"behavior":"deny","message":"build is shared"},"hookEventName":"PermissionRequest"}}` + "\n"
	if got != want {
		t.Fatalf("stdout %q; want %q", got, want)
	}
}

// Undecided, refused, or no daemon: nothing on stdout, so the agent's
// own prompt shows.
func TestHookPrintsNothingWithoutADecision(t *testing.T) {
	f := newFleet(t)
	if got := hook(t, f.srv.URL, f.token, "--timeout", "100ms"); got != "" {
		t.Errorf("undecided: stdout %q; want nothing", got)
	}
	if got := hook(t, f.srv.URL, "fsm_not-a-token", "--timeout", "1s"); got != "" {
		t.Errorf("refused: stdout %q; want nothing", got)
	}
	dead := "http://" + fleettest.DeadAddr(t)
	if got := hook(t, dead, f.token, "--timeout", "500ms"); got != "" {
		t.Errorf("no daemon: stdout %q; want nothing", got)
	}
	if got := hook(t, "", f.token); got != "" {
		t.Errorf("no $FLEET_URL: stdout %q; want nothing", got)
	}
}

// A daemon that answers 503 for a while (an owner restarting, a daemon
// not yet serving) gets the request once it serves, and the hook its
// decision.
func TestHookRetriesWhileTheDaemonRestarts(t *testing.T) {
	f := newFleet(t)
	var calls atomic.Int32
	inner := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r)
	})
	decideWhenPending(t, f.rv, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow})
	if got := hook(t, f.srv.URL, f.token, "--timeout", "20s"); !strings.Contains(got, `"behavior":"allow"`) {
		t.Fatalf("stdout %q; want the allow", got)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("%d calls; want 3 refused and 1 answered", n)
	}
}

func TestHookBadArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"status"}, {"permission", "--timeout", "0s"}, {"permission", "extra"}} {
		var out, errOut bytes.Buffer
		if err := hookcmd.Run(context.Background(), args, hookcmd.Env{}, strings.NewReader(request), &out, &errOut); err == nil {
			t.Errorf("hook %q: no error", args)
		}
		if out.Len() != 0 {
			t.Errorf("hook %q printed %q on stdout", args, out.String())
		}
	}
}
