package daemon_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// embed starts a daemon of cfg on 127.0.0.1 on a free port, and returns
// it with its MCP URL; the test's cleanup closes it and checks that Serve
// returned nil.
func embed(t *testing.T, cfg daemon.Config) (*daemon.Daemon, string) {
	t.Helper()
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve after Close: %v; want nil", err)
		}
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return d, "http://" + ln.Addr().String() + "/mcp"
}

// TestEmbed: a daemon embedded in process, on a temporary state directory,
// serves one MCP round trip: the lead's fleet_send reaches the member's
// fleet_next, and the member's fleet_reply is the lead's outcome.
func TestEmbed(t *testing.T) {
	store, tokens := adaptertest.OpenStore(t)
	tok := adaptertest.AddTokens(t, tokens, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "alice": mcpadapter.RoleMember})
	_, url := embed(t, daemon.Config{Dir: store.Dir(), Version: "test"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dial := func(agent string) *mcpadapter.Client {
		t.Helper()
		c, err := mcpadapter.Dial(ctx, url, tok[agent], "daemon-test-"+agent)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	lead, alice := dial("lead"), dial("alice")

	replied := make(chan error, 1)
	go func() {
		msg, ok, err := alice.Next(ctx, 20*time.Second)
		switch {
		case err != nil:
			replied <- err
		case !ok:
			replied <- errors.New("fleet_next: no message within 20s")
		case msg.Content != "survey the TODOs" || msg.From != "lead":
			replied <- errors.New("fleet_next: got " + msg.Content + " from " + msg.From)
		default:
			replied <- alice.Reply(ctx, "3 TODOs")
		}
	}()
	o, err := lead.Send(ctx, "alice", "survey the TODOs")
	if err != nil {
		t.Fatalf("fleet_send: %v", err)
	}
	if err := <-replied; err != nil {
		t.Fatalf("member: %v", err)
	}
	if o.Kind != fleetstate.OutcomeReply || o.From != "alice" || o.Content != "3 TODOs" {
		t.Errorf("fleet_send: got %s from %s: %q; want the reply of alice: %q", o.Kind, o.From, o.Content, "3 TODOs")
	}
}

// TestServeEnds: Serve returns ctx.Err() when its context ends, and
// ErrClosed at once on a daemon closed or served already; Close is
// idempotent, and the state directory is free for another daemon once
// Serve has returned.
func TestServeEnds(t *testing.T) {
	store, _ := adaptertest.OpenStore(t)
	cfg := daemon.Config{Dir: store.Dir()}
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln) }()
	waitOwned(t, store)
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve after its context ended: %v; want context.Canceled", err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Serve(context.Background(), ln2); !errors.Is(err, daemon.ErrClosed) {
		t.Errorf("Serve a second time: %v; want ErrClosed", err)
	}
	for range 2 {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if _, owned, _ := store.FleetOwner(); owned {
		t.Fatal("the directory is still owned after Serve returned")
	}
	// Another daemon takes the directory over.
	embed(t, cfg)
	waitOwned(t, store)
}

// waitOwned waits until a daemon owns store's fleet.
func waitOwned(t *testing.T, store *fleetstate.Store) {
	t.Helper()
	if !fleettest.Until(10*time.Second, 10*time.Millisecond, func() bool {
		_, owned, _ := store.FleetOwner()
		return owned
	}) {
		t.Fatal("no daemon owns the state directory after 10s")
	}
}

// TestSecondDaemonRefused: a daemon started on a state directory that
// another serves fails with ErrFleetOwned, naming the directory, and
// leaves the first serving.
func TestSecondDaemonRefused(t *testing.T) {
	store, _ := adaptertest.OpenStore(t)
	embed(t, daemon.Config{Dir: store.Dir()})
	waitOwned(t, store)
	d, err := daemon.New(daemon.Config{Dir: store.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = d.Serve(context.Background(), ln)
	if !errors.Is(err, fleetstate.ErrFleetOwned) || !strings.Contains(err.Error(), store.Dir()) {
		t.Errorf("Serve on a directory another daemon serves: %v; want ErrFleetOwned naming the directory", err)
	}
	if _, owned, _ := store.FleetOwner(); !owned {
		t.Error("the first daemon lost the directory")
	}
}

// TestNewRefuses: New refuses a configuration that makes no sense,
// before anything is opened.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  daemon.Config
	}{
		{"negative idle timeout", daemon.Config{IdleTimeout: -time.Second}},
		{"max conns below -1", daemon.Config{MaxConns: -2}},
		{"dir and NATS", daemon.Config{Dir: "x", NATS: &daemon.NATSConfig{URL: "nats://127.0.0.1:4222"}}},
		{"NATS without a server", daemon.Config{NATS: &daemon.NATSConfig{}}},
		{"bad advertise", daemon.Config{NATS: &daemon.NATSConfig{URL: "nats://127.0.0.1:4222", Advertise: "ftp://x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := daemon.New(tc.cfg); err == nil {
				t.Errorf("New(%+v): nil error; want one", tc.cfg)
			}
		})
	}
}
