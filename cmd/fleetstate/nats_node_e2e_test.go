package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSNodeInDaemon: `serve --nats-node` runs one node of a 3-node
// cluster inside the daemon (the other two are `fleetstate nats`), keeps
// the fleet there, replicated on the cluster, and owns it; another daemon,
// `serve --nats` at that node's client port, forwards to it. A blocking
// send from a lead on the other daemon gets the reply of a member on the
// owner. Cut off from the two other nodes, the owner's node alone has no
// quorum: the owner answers ERR_UNAVAILABLE, never what it kept. Both
// daemons stop on SIGTERM. (TestNATSNodeAlone has token add --nats at the
// embedded node, and its port closed once the daemon stopped.)
func TestNATSNodeInDaemon(t *testing.T) {
	clients, routes := clusterAddrs(t, 3)
	var nodes []*natsNode
	for i := range 2 {
		nodes = append(nodes, startNATSNode(t, fmt.Sprintf("n%d", i+1), "--addr", clients[i],
			"--cluster", routes[i], "--routes", otherRoutes(routes, i), "--cluster-name", "e2e"))
	}
	urls := natsURLs(nodes...)
	// The two nodes have a quorum of the three and elect JetStream's meta
	// leader; the daemon's node joins them.
	tokens := natsTokenSet(t, urls, map[string]string{"lead": "lead", "m1": "member"})
	f := natsFleet(t, urls)
	store := t.TempDir()
	a := startServe(t, "--nats-node", "--nats-addr", clients[2], "--nats-name", "n3",
		"--nats-cluster", routes[2], "--nats-routes", otherRoutes(routes, 2), "--nats-cluster-name", "e2e",
		"--nats-store-dir", store, "--nats-max-store", "268435456", "--nats-max-mem", "67108864",
		"--lease", natsLease, "--send-timeout", "20s")
	waitOwner(t, f, a.url, 30*time.Second)
	// Other daemons reach the fleet at the embedded node's client port.
	b := startNATSDaemon(t, "nats://"+clients[2])
	if o := owner(f); o != a.url {
		t.Fatalf("the fleet's owner after a second daemon joined: %q; want %s", o, a.url)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lead := dialNATS(t, b.url, tokens["lead"], "lead")
	m1 := dialNATS(t, a.url, tokens["m1"], "m1")
	if _, ok, err := m1.Next(ctx, 0); err != nil || ok {
		t.Fatalf("m1's first fleet_next: %v, %v; want none", ok, err)
	}
	sent := goCall(func() (fleetstate.Outcome, error) { return lead.Send(ctx, "m1", "what is X?") })
	msg := nextMsg(ctx, t, m1, 10*time.Second)
	if msg.Content != "what is X?" || msg.From != "lead" {
		t.Fatalf("m1 got %+v; want the lead's message", msg)
	}
	if err := m1.ReplyTurn(ctx, msg.TurnID, "X = 42"); err != nil {
		t.Fatal(err)
	}
	if o := recvOK(t, "the blocking send", sent, 10*time.Second); o.Kind != fleetstate.OutcomeReply || o.Content != "X = 42" {
		t.Fatalf("the blocking send returned %+v; want m1's reply", o)
	}

	// The fleet's turns are replicated on the cluster: the daemon reaching
	// its node in process still sees the cluster's three servers.
	js, err := jetstream.New(natsConn(t, urls))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+fleetnats.DefaultFleet+"-turns")
	if err != nil {
		t.Fatal(err)
	}
	if r := st.CachedInfo().Config.Replicas; r != 3 {
		t.Errorf("the turns' stream has %d replicas; want 3", r)
	}

	// Cut off: the two other nodes die; the daemon's node is alone.
	for _, n := range nodes {
		n.kill()
	}
	var kind string
	if !fleettest.Until(30*time.Second, 200*time.Millisecond, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_, err := m1.Put(cctx, "m1", "notes/cut.txt", []byte("cut off"), true)
		if err == nil {
			kind = "a put that succeeded"
			return false
		}
		kind = errKind(err)
		return strings.Contains(kind, string(fleetstate.CodeUnavailable))
	}) {
		t.Fatalf("a put through the owner cut off from its cluster: %s; want ERR_UNAVAILABLE", kind)
	}
	stopDaemon(t, b, syscall.SIGTERM, 15*time.Second)
	stopDaemon(t, a, syscall.SIGTERM, 30*time.Second)
}

// TestNATSNodeAlone: `serve --nats-node` with a node of its own, no
// cluster: the fleet is R1 on it, `token add --nats` reaches it at its
// client port, a lead's new session, put and get go through, and SIGTERM stops the
// daemon and its node (the port is closed after).
func TestNATSNodeAlone(t *testing.T) {
	addr := freeAddr(t)
	store := t.TempDir()
	d := startServe(t, "--nats-node", "--nats-addr", addr, "--nats-store-dir", store,
		"--nats-max-store", "268435456", "--nats-max-mem", "67108864", "--lease", natsLease)
	url := "nats://" + addr
	waitOwner(t, natsFleet(t, url), d.url, 30*time.Second)
	token := natsToken(t, url, "solo", "lead")
	c := dialNATS(t, d.url, token, "solo")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.NewSession(ctx, "alone"); err != nil {
		t.Fatal(err)
	}
	id, err := c.Put(ctx, "solo", "notes/a.txt", []byte("on the daemon's node"), true)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, id); err != nil || string(got) != "on the daemon's node" {
		t.Fatalf("Get = %q, %v; want what was put", got, err)
	}
	stopDaemon(t, d, syscall.SIGTERM, 30*time.Second)
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("the daemon's NATS node still listens at %s after the daemon stopped", addr)
	}
}
