package hookcmd_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"
	"go.uber.org/goleak"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/daemon/permission"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/hookcmd"
	"github.com/fleetstate/fleetstate/mcpadapter"
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
	tokens, err := auth.OpenTokens(st)
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
	f.srv = httptest.NewServer(permission.NewHandler(rv, permission.Options{Tokens: tokens, Operator: operator}))
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

// The request reaches the fleet with its input as the agent sent it:
// `>`, `<` and `&` of a shell command are not escaped (the views escape
// text themselves, and showed \\u003e for a redirection).
func TestHookKeepsTheInputAsSent(t *testing.T) {
	f := newFleet(t)
	const input = `{"command":"echo a > b && sort < b"}`
	got := make(chan string, 1)
	go func() {
		for range 5000 {
			if p := f.rv.PermissionRequests(); len(p) > 0 {
				got <- string(p[0].Input)
				_ = f.rv.DecidePermission("operator", p[0].ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow})
				return
			}
			time.Sleep(time.Millisecond)
		}
		got <- "no request"
	}()
	req := strings.Replace(request, `{"command":"rm -rf build"}`, input, 1)
	var out, errOut bytes.Buffer
	if err := hookcmd.Run(context.Background(), []string{"permission"}, hookcmd.Env{URL: f.srv.URL, Token: f.token},
		strings.NewReader(req), &out, &errOut); err != nil {
		t.Fatalf("hook: %v", err)
	}
	if in := <-got; in != input {
		t.Errorf("the fleet got the input %s; want %s", in, input)
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
		if r.URL.Path != permission.Path {
			http.NotFound(w, r) // the status report after the decision
			return
		}
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

// TestHookWaitsForARestartedDaemon: a daemon that answered and then
// refuses connections for a moment (its owner killed and started again on
// the same address) is tried again; the request, raised again with its
// key, gets the decision. Before, the first refused connection ended the
// hook as if no daemon had ever been there.
func TestHookWaitsForARestartedDaemon(t *testing.T) {
	f := newFleet(t)
	addr := f.srv.Listener.Addr().String()
	inner := f.srv.Config.Handler
	down := make(chan struct{})
	var once sync.Once
	front := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != permission.Path {
			http.NotFound(w, r)
			return
		}
		// The first call finds a daemon that is going away.
		once.Do(func() { close(down) })
		http.Error(w, "closing", http.StatusServiceUnavailable)
	})}
	f.srv.Close() // the fleet's handler is served below, on the same address
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go front.Serve(ln)
	back := make(chan *http.Server, 1)
	go func() {
		<-down
		front.Close() // the port refuses connections from here
		time.Sleep(time.Second)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			back <- nil
			return
		}
		srv := &http.Server{Handler: inner}
		back <- srv
		_ = srv.Serve(ln)
	}()
	decideWhenPending(t, f.rv, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow})
	got := hook(t, "http://"+addr, f.token, "--timeout", "20s")
	if srv := <-back; srv != nil {
		srv.Close()
	} else {
		t.Fatal("the address could not be listened on again")
	}
	if !strings.Contains(got, `"behavior":"allow"`) {
		t.Fatalf("stdout %q; want the allow from the daemon back on its address", got)
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

// What the CLIs send their PermissionRequest hook: no tool_use_id, so the
// request is named by the session, the turn and the tool's input.
const (
	claudeRequest = `{"session_id":"c4b9af88","transcript_path":"/t.jsonl","cwd":"/src","prompt_id":"48a75633","permission_mode":"default","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"echo one > one.txt","description":"write one"}}`
	codexRequest  = `{"session_id":"01a24500","turn_id":"01a24501","transcript_path":"/r.jsonl","cwd":"/src","hook_event_name":"PermissionRequest","model":"m","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"echo one > one.txt && echo wrote-one","description":"write"}}`
)

// TestHookRerunIsTheSameRequest: the agent runs the hook again for the
// same tool use (two hooks of one event, or a re-run after a restart):
// without a tool_use_id from either CLI, both runs are one request, and
// one decision answers both.
func TestHookRerunIsTheSameRequest(t *testing.T) {
	for name, req := range map[string]string{"claude": claudeRequest, "codex": codexRequest} {
		t.Run(name, func(t *testing.T) {
			f := newFleet(t)
			var calls atomic.Int32
			inner := f.srv.Config.Handler
			f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				inner.ServeHTTP(w, r)
			})
			outs := make(chan string, 2)
			for range 2 {
				go func() {
					var out, errOut bytes.Buffer
					_ = hookcmd.Run(context.Background(), []string{"permission", "--timeout", "30s"}, hookcmd.Env{URL: f.srv.URL, Token: f.token},
						strings.NewReader(req), &out, &errOut)
					outs <- out.String()
				}()
			}
			deadline := time.Now().Add(20 * time.Second)
			for (calls.Load() < 2 || len(f.rv.PermissionRequests()) == 0) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
			}
			pending := f.rv.PermissionRequests()
			if len(pending) != 1 {
				t.Fatalf("%d requests pending; want 1 for one tool use", len(pending))
			}
			if err := f.rv.DecidePermission("operator", pending[0].ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if got := <-outs; !strings.Contains(got, `"behavior":"allow"`) {
					t.Errorf("stdout %q; want the allow", got)
				}
			}
		})
	}
}

// TestHookKeyTellsToolUsesApart: another input, turn or session is
// another tool use.
func TestHookKeyTellsToolUsesApart(t *testing.T) {
	keys := map[string]string{}
	for name, req := range map[string]string{
		"claude":               claudeRequest,
		"codex":                codexRequest,
		"claude, other input":  strings.Replace(claudeRequest, "one > one.txt", "two > two.txt", 1),
		"claude, other turn":   strings.Replace(claudeRequest, "48a75633", "48a75634", 1),
		"codex, other session": strings.Replace(codexRequest, `"01a24500"`, `"01a24509"`, 1),
	} {
		k := hookcmd.KeyOf([]byte(req))
		if other, dup := keys[k]; dup {
			t.Errorf("%s and %s have one key %q", name, other, k)
		}
		keys[k] = name
		if again := hookcmd.KeyOf([]byte(req)); again != k {
			t.Errorf("%s: key %q, then %q", name, k, again)
		}
	}
}

// TestHookWithoutDaemonReturnsAtOnce: nothing listens at $FLEET_URL: the
// hook prints nothing and gives up at once, naming the daemon it could
// not reach, instead of holding the agent for its whole window.
func TestHookWithoutDaemonReturnsAtOnce(t *testing.T) {
	dead := "http://" + fleettest.DeadAddr(t) + "/mcp"
	done := make(chan struct{})
	var out, errOut bytes.Buffer
	go func() {
		defer close(done)
		_ = hookcmd.Run(context.Background(), []string{"permission", "--timeout", "10m"}, hookcmd.Env{URL: dead, Token: "fst_x"},
			strings.NewReader(claudeRequest), &out, &errOut)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // far below the 10-minute window
		t.Fatal("the hook still waits for an absent daemon")
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q; want nothing", out.String())
	}
	if !strings.Contains(errOut.String(), dead) || !strings.Contains(errOut.String(), "no daemon") {
		t.Errorf("stderr %q; want it to name %s", errOut.String(), dead)
	}
}

// TestHookReportsItsStatuses: the agent waits on its request, then goes
// on with its turn, and no hook of the agent's says so (a status hook on
// the same event would run beside this one, in no order): the hook
// reports BLOCKED before it asks and WORKING after a decision, in that
// order, with the agent's token; undecided, only BLOCKED, and the agent's
// own prompt, which its Notification hook or the screen reports, follows.
func TestHookReportsItsStatuses(t *testing.T) {
	f := newFleet(t)
	reports := make(chan string, 4)
	inner := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mcphttp.StatusPath {
			body, _ := io.ReadAll(r.Body)
			reports <- r.Header.Get("Authorization") + " " + string(body)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		inner.ServeHTTP(w, r)
	})
	decideWhenPending(t, f.rv, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow})
	if got := hook(t, f.srv.URL, f.token); !strings.Contains(got, `"behavior":"allow"`) {
		t.Fatalf("stdout %q; want the allow", got)
	}
	for _, status := range []string{"blocked", "working"} {
		select {
		case got := <-reports:
			if want := "Bearer " + f.token + ` {"status":"` + status + `"}`; got != want {
				t.Errorf("status report %q; want %q", got, want)
			}
		default:
			t.Fatalf("no %s report", status)
		}
	}
	g := newFleet(t)
	g.srv.Config.Handler = f.srv.Config.Handler // another fleet's request, never decided
	if got := hook(t, g.srv.URL, g.token, "--timeout", "100ms"); got != "" || len(reports) != 1 || <-reports != "Bearer "+g.token+` {"status":"blocked"}` {
		t.Errorf("undecided: stdout %q; want nothing, and only the blocked report", got)
	}
}
