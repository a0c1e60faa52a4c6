package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/fleetmem"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
	"github.com/spf13/afero"
)

// reportingPane takes hook reports, as a tmux pane does.
type reportingPane struct{ *fleetmem.Member }

func (p reportingPane) Report(st fleetstate.Status) { p.SetStatus(st) }

// TestOwnerReachesOtherDaemonsPanes: the owner's rendezvous reaches a pane
// in another daemon's roster through NATS (remotePanes, as serve --nats
// wires it): a member holding a token gets the remote port as soon as
// the pane is registered, a message is delivered in the pane on the other
// daemon and its reply reaches the lead, and a hook's report for that pane
// reaching the owner is passed on to the pane's daemon.
func TestOwnerReachesOtherDaemonsPanes(t *testing.T) {
	url := natstest.Run(t).URL()
	ctx := context.Background()
	connect := func(name string) *fleetnats.Fleet {
		f, err := fleetnats.Connect(ctx, fleetnats.Options{URL: url, Fleet: "panes", Name: name, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	owner, other := connect("owner"), connect("other")

	// The owner: a rendezvous, and the tokens of a lead and of "pm", the
	// member whose pane the other daemon has.
	store, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.OpenTokens(store)
	if err != nil {
		t.Fatal(err)
	}
	for agent, role := range map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "pm": mcpadapter.RoleMember} {
		if _, err := tokens.Add(agent, role); err != nil {
			t.Fatal(err)
		}
	}
	rv, err := fleetstate.NewRendezvous(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rv.Close() })
	remote := &remotePanes{f: owner, rv: rv, tokens: tokens, local: map[string]*tmux.Pane{}, ports: map[string]*fleetnats.RemoteMember{}}
	stop, err := owner.WatchPanes(ctx, remote.changed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if remote.port("pm") != nil {
		t.Fatal("pm has a port before any daemon serves its pane")
	}

	// The other daemon serves pm's pane.
	pane := reportingPane{fleetmem.NewMember()}
	ms, err := other.ServeMembers(ctx, map[string]fleetstate.Member{"pm": pane}, &fleetnats.ServeOptions{Daemon: "http://other.invalid/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	// Once the owner has learnt of the pane, pm is a member; the agent in
	// the pane mounts the fleet's MCP server through some daemon, and the
	// owner's adapter marks it ready.
	if !fleettest.Until(10*time.Second, 10*time.Millisecond, func() bool {
		return remote.port("pm") != nil && rv.SetReady("pm", true) == nil
	}) {
		t.Fatal("the owner never made pm a member behind its pane on the other daemon")
	}
	if remote.port("lead") != nil {
		t.Fatal("the lead, who has no pane, got a port")
	}

	sent := make(chan fleetstate.Outcome, 1)
	go func() {
		o, err := rv.Send(ctx, "lead", "pm", "build it")
		if err != nil {
			t.Error(err)
		}
		sent <- o
	}()
	select {
	case got := <-pane.Inbox():
		if got != "build it" {
			t.Fatalf("the pane got %q; want the message", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the message never reached the pane on the other daemon")
	}
	if err := remote.report(mcpadapter.Identity{Agent: "pm", Role: mcpadapter.RoleMember}, fleetstate.StatusWorking); err != nil {
		t.Fatalf("a hook's report for pm: %v", err)
	}
	if st, _ := pane.Status(ctx); st != fleetstate.StatusWorking {
		t.Fatalf("the pane's status after the report: %s; want WORKING", st)
	}
	if err := rv.Reply("pm", "built"); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-sent:
		if o.Kind != fleetstate.OutcomeReply || o.Content != "built" {
			t.Fatalf("Send = %+v; want the reply", o)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reply never reached the lead")
	}
}

// natsFleets connects n times to one new fleet on a NATS server of its
// own; the test's cleanup closes the connections.
func natsFleets(t *testing.T, n int) []*fleetnats.Fleet {
	t.Helper()
	url := natstest.Run(t).URL()
	var out []*fleetnats.Fleet
	for i := range n {
		f, err := fleetnats.Connect(context.Background(), fleetnats.Options{URL: url, Fleet: "tokens", Name: fmt.Sprint("daemon ", i), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		out = append(out, f)
	}
	return out
}

// TestNATSTokenFile: the tokens of a fleet on NATS keep the TokenFile
// contract, two connections standing for two daemons.
func TestNATSTokenFile(t *testing.T) {
	adaptertest.TestTokenFile(t, func(t *testing.T) (a, b auth.TokenFile) {
		fs := natsFleets(t, 2)
		var files [2]*natsTokenFile
		for i, f := range fs {
			file, err := openNATSTokenFile(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(file.stop)
			files[i] = file
		}
		return files[0], files[1]
	})
}

// TestNATSTokensSwap: tokens added at once through two daemons of a
// fleet on NATS are all kept: each write swaps the bucket's value by its
// revision and, on a conflict, adds its token to the other's file.
func TestNATSTokensSwap(t *testing.T) {
	fs := natsFleets(t, 2)
	var tokens [2]*auth.Tokens
	for i, f := range fs {
		tk, stop, err := openNATSTokens(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		tokens[i] = tk
	}
	const each = 8
	var wg sync.WaitGroup
	for i, tk := range tokens {
		for j := range each {
			wg.Go(func() {
				if _, err := tk.Add(fmt.Sprintf("m%d-%d", i, j), mcpadapter.RoleMember); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for i, tk := range tokens {
		if !fleettest.Until(5*time.Second, 10*time.Millisecond, func() bool { return len(tk.Agents(mcpadapter.RoleMember)) == 2*each }) {
			t.Errorf("daemon %d: members %v; want all %d", i, tk.Agents(mcpadapter.RoleMember), 2*each)
		}
	}
}
