package fleetstatetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
)

// ---- permission requests ---------------------------------------------------

type decided struct {
	d   fleetstate.Decision
	ok  bool
	err error
}

// ask raises member's permission request in a goroutine.
func (f *fleet) ask(ctx context.Context, member string, req fleetstate.PermissionRequest) <-chan decided {
	ch := make(chan decided, 1)
	r := f.r
	go func() {
		d, ok, err := r.RequestPermission(ctx, member, req)
		ch <- decided{d, ok, err}
	}()
	return ch
}

// pending waits for the fleet's pending requests to settle and returns
// the one request it wants there.
func (f *fleet) pending() fleetstate.PermissionRequest {
	f.t.Helper()
	synctest.Wait()
	got := f.r.PermissionRequests()
	if len(got) != 1 {
		f.t.Fatalf("pending permission requests = %+v; want one", got)
	}
	return got[0]
}

func bashRequest(command, key string) fleetstate.PermissionRequest {
	return fleetstate.PermissionRequest{Key: key, Tool: "Bash", Input: `{"command":"` + command + `"}`, Cwd: "/src", Timeout: time.Minute}
}

// An allowed request returns the decision, with who made it; the request,
// listed and in the snapshot while pending, is published as requested and
// decided.
func testPermissionAllow(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		sub, _ := f.r.Subscribe(0)
		defer sub.Close()
		got := f.ask(context.Background(), "scout", bashRequest("ls", "k1"))
		p := f.pending()
		if p.Member != "scout" || p.Tool != "Bash" || p.Input != `{"command":"ls"}` || p.Cwd != "/src" || p.ID == "" ||
			p.Deadline.Sub(p.Asked) != time.Minute || p.Decision != nil {
			t.Fatalf("pending request = %+v", p)
		}
		if snap := f.r.Snapshot(); len(snap.Permissions) != 1 || snap.Permissions[0].ID != p.ID {
			t.Fatalf("snapshot's permissions = %+v; want the pending request", snap.Permissions)
		}
		if err := f.r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow}); err != nil {
			t.Fatal(err)
		}
		res := <-got
		if res.err != nil || !res.ok || res.d.Behavior != fleetstate.BehaviorAllow || res.d.By != "operator" {
			t.Fatalf("RequestPermission = %+v, %v, %v; want allow by operator", res.d, res.ok, res.err)
		}
		if left := f.r.PermissionRequests(); len(left) != 0 {
			t.Fatalf("pending after the decision = %+v; want none", left)
		}
		var kinds []fleetstate.EventKind
		var last fleetstate.Event
		for len(kinds) < 2 {
			last = <-sub.Events()
			if last.Permission == nil || last.Permission.ID != p.ID || last.Permission.Tool != "Bash" || last.Permission.Input != `{"command":"ls"}` {
				t.Fatalf("event %+v; want one of the request, with its tool and input", last)
			}
			kinds = append(kinds, last.Kind)
		}
		if kinds[0] != fleetstate.EventPermissionRequested || kinds[1] != fleetstate.EventPermissionDecided {
			t.Fatalf("events %v; want requested, decided", kinds)
		}
		if d := last.Permission.Decision; last.By != "operator" || d == nil || d.Behavior != fleetstate.BehaviorAllow {
			t.Fatalf("decided event by %q, decision %+v; want allow by operator", last.By, d)
		}
	})
}

// A denial carries its message to the agent.
func testPermissionDenyWithMessage(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		got := f.ask(context.Background(), "scout", bashRequest("rm -rf build", ""))
		p := f.pending()
		d := fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: "build is shared; clean your own"}
		if err := f.r.DecidePermission("lead", p.ID, d); err != nil {
			t.Fatal(err)
		}
		res := <-got
		if res.err != nil || !res.ok || res.d.Behavior != fleetstate.BehaviorDeny || res.d.Message != d.Message || res.d.By != "lead" {
			t.Fatalf("RequestPermission = %+v, %v, %v; want deny by lead with the message", res.d, res.ok, res.err)
		}
	})
}

// A request nobody decides within its window ends undecided: never an
// allow. Its ID is then unknown.
func testPermissionTimeoutUndecided(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		sub, _ := f.r.Subscribe(0)
		defer sub.Close()
		req := bashRequest("make", "")
		req.Timeout = 30 * time.Second
		start := time.Now()
		got := f.ask(context.Background(), "scout", req)
		p := f.pending()
		res := <-got
		if e := <-sub.Events(); e.Kind != fleetstate.EventPermissionRequested {
			t.Fatalf("event %+v; want the request", e)
		}
		if e := <-sub.Events(); e.Kind != fleetstate.EventPermissionExpired || e.By != "timeout" || e.Content == "" || e.Permission.Tool != "Bash" {
			t.Fatalf("event %+v; want it expired by timeout, saying why, with the request", e)
		}
		if res.err != nil || res.ok || res.d.Behavior != "" {
			t.Fatalf("RequestPermission past its window = %+v, %v, %v; want undecided", res.d, res.ok, res.err)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("undecided after %v; want the window, 30s", d)
		}
		if left := f.r.PermissionRequests(); len(left) != 0 {
			t.Fatalf("pending past the window = %+v; want none", left)
		}
		err := f.r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow})
		wantCode(t, err, fleetstate.CodeUnknownRequest)
	})
}

// A request survives a restart of the owner within its window: the new
// owner lists it, a decision is kept, and the caller's retry with the
// same key gets it. A decision made before the restart, which the cut
// call never carried, is kept for the retry too.
func testPermissionDecidedAfterRestart(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		first := f.ask(context.Background(), "scout", bashRequest("go test", "session-1/tool-1"))
		p := f.pending()
		f.restart(nil)
		if res := <-first; !errors.Is(res.err, fleetstate.ErrClosed) {
			t.Fatalf("call cut by the restart = %+v; want %s", res, fleetstate.CodeClosed)
		}
		p2 := f.pending()
		if p2.ID != p.ID || p2.Tool != "Bash" || !p2.Deadline.Equal(p.Deadline) {
			t.Fatalf("request after the restart = %+v; want %+v", p2, p)
		}
		if err := f.r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow}); err != nil {
			t.Fatal(err)
		}
		res := <-f.ask(context.Background(), "scout", bashRequest("go test", "session-1/tool-1"))
		if res.err != nil || !res.ok || res.d.Behavior != fleetstate.BehaviorAllow {
			t.Fatalf("retry after the restart = %+v; want the allow", res)
		}

		// Decided, then the owner restarts before the caller heard.
		second := f.ask(context.Background(), "scout", bashRequest("rm x", "session-1/tool-2"))
		q := f.pending()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := f.r.RequestPermission(ctx, "scout", bashRequest("rm x", "session-1/tool-2")); !errors.Is(err, context.Canceled) {
			t.Fatalf("retry with an ended context = %v; want context.Canceled", err)
		}
		if err := f.r.DecidePermission("operator", q.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: "no"}); err != nil {
			t.Fatal(err)
		}
		<-second
		f.restart(nil)
		res = <-f.ask(context.Background(), "scout", bashRequest("rm x", "session-1/tool-2"))
		if res.err != nil || !res.ok || res.d.Behavior != fleetstate.BehaviorDeny || res.d.Message != "no" {
			t.Fatalf("retry of a request decided before the restart = %+v; want the deny", res)
		}
		// The same key from another member is another request.
		other := f.ask(context.Background(), "builder", bashRequest("rm x", "session-1/tool-2"))
		if o := f.pending(); o.Member != "builder" {
			t.Fatalf("pending = %+v; want builder's own request", o)
		}
		f.r.Close()
		<-other
	})
}

// Decisions on an unknown ID, on a request decided already, or that are
// malformed, and malformed requests or one past a member's bound, fail
// with named errors and change nothing.
func testPermissionBadDecisions(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		allow := fleetstate.Decision{Behavior: fleetstate.BehaviorAllow}
		wantCode(t, f.r.DecidePermission("operator", "perm-nope", allow), fleetstate.CodeUnknownRequest)
		got := f.ask(context.Background(), "scout", bashRequest("ls", ""))
		p := f.pending()
		wantCode(t, f.r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: "maybe"}), fleetstate.CodeInvalidArgument)
		wantCode(t, f.r.DecidePermission("", p.ID, allow), fleetstate.CodeInvalidArgument)
		if q := f.pending(); q.Decision != nil {
			t.Fatalf("a refused decision changed the request: %+v", q)
		}
		if err := f.r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny}); err != nil {
			t.Fatal(err)
		}
		wantCode(t, f.r.DecidePermission("lead", p.ID, allow), fleetstate.CodeRequestDecided)
		if res := <-got; res.d.Behavior != fleetstate.BehaviorDeny || res.d.By != "operator" {
			t.Fatalf("RequestPermission = %+v; want the first decision, deny by operator", res)
		}
		for name, req := range map[string]fleetstate.PermissionRequest{
			"no tool":       {Input: `{}`},
			"input no json": {Tool: "Bash", Input: "rm -rf /"},
			"long timeout":  {Tool: "Bash", Timeout: 2 * fleetstate.MaxPermissionTimeout},
		} {
			if _, _, err := f.r.RequestPermission(context.Background(), "scout", req); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
				t.Errorf("%s: RequestPermission = %v; want %s", name, err, fleetstate.CodeInvalidArgument)
			}
		}
		_, _, err := f.r.RequestPermission(context.Background(), "no::such", bashRequest("ls", ""))
		wantCode(t, err, fleetstate.CodeInvalidAgentName)
		if left := f.r.PermissionRequests(); len(left) != 0 {
			t.Fatalf("bad requests left %+v pending", left)
		}

		// A member that gives up on its calls piles up no more than
		// MaxPendingPermissions requests; another member is not held up.
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		for i := range fleetstate.MaxPendingPermissions {
			if _, _, err := f.r.RequestPermission(gone, "scout", bashRequest("ls", fmt.Sprint(i))); !errors.Is(err, context.Canceled) {
				t.Fatalf("request %d: %v; want context.Canceled", i, err)
			}
		}
		_, _, err = f.r.RequestPermission(gone, "scout", bashRequest("ls", "one more"))
		wantCode(t, err, fleetstate.CodeNotPermitted)
		if _, _, err := f.r.RequestPermission(gone, "builder", bashRequest("ls", "")); !errors.Is(err, context.Canceled) {
			t.Fatalf("another member's request: %v; want it raised (context.Canceled)", err)
		}
		if n := len(f.r.PermissionRequests()); n != fleetstate.MaxPendingPermissions+1 {
			t.Fatalf("%d pending; want %d", n, fleetstate.MaxPendingPermissions+1)
		}
		settle(2 * time.Minute) // past their windows
		if left := f.r.PermissionRequests(); len(left) != 0 {
			t.Fatalf("requests left %+v pending past their windows", left)
		}
	})
}

// A caller whose context ends gets ctx.Err(); its request stays pending
// for a retry with the same key, which a decision then ends.
func testPermissionContextCancel(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		ctx, cancel := context.WithCancel(context.Background())
		got := f.ask(ctx, "scout", bashRequest("ls", "k"))
		p := f.pending()
		cancel()
		if res := <-got; !errors.Is(res.err, context.Canceled) || res.ok {
			t.Fatalf("RequestPermission with its context cancelled = %+v; want context.Canceled", res)
		}
		retry := f.ask(context.Background(), "scout", bashRequest("ls", "k"))
		if q := f.pending(); q.ID != p.ID {
			t.Fatalf("retry raised %s; want the same request %s", q.ID, p.ID)
		}
		if err := f.r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorAllow}); err != nil {
			t.Fatal(err)
		}
		if res := <-retry; !res.ok || res.d.Behavior != fleetstate.BehaviorAllow {
			t.Fatalf("retry = %+v; want the allow", res)
		}
	})
}

// A policy decides the requests it covers at once, recorded as requested
// and decided by the rule; the others wait for a person.
func testPermissionPolicy(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.r.SetPermissionPolicy(func(req fleetstate.PermissionRequest) (fleetstate.Decision, bool) {
			if req.Tool == "Read" {
				return fleetstate.Decision{Behavior: fleetstate.BehaviorAllow, By: "rule Read(*)"}, true
			}
			return fleetstate.Decision{}, false
		})
		sub, _ := f.r.Subscribe(0)
		defer sub.Close()
		d, ok, err := f.r.RequestPermission(context.Background(), "scout", fleetstate.PermissionRequest{Tool: "Read", Input: `{"file_path":"a.go"}`})
		if err != nil || !ok || d.Behavior != fleetstate.BehaviorAllow || d.By != "rule Read(*)" {
			t.Fatalf("RequestPermission under a rule = %+v, %v, %v; want allow by the rule", d, ok, err)
		}
		for _, want := range []fleetstate.EventKind{fleetstate.EventPermissionRequested, fleetstate.EventPermissionDecided} {
			if e := <-sub.Events(); e.Kind != want || want == fleetstate.EventPermissionDecided && e.By != "rule Read(*)" {
				t.Fatalf("event %+v; want %s (a decision by the rule)", e, want)
			}
		}
		got := f.ask(context.Background(), "scout", bashRequest("ls", ""))
		p := f.pending()
		if err := f.r.DecidePermission("operator", p.ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny}); err != nil {
			t.Fatal(err)
		}
		<-got
	})
}
