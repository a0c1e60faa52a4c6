package fleetnats_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/nats-io/nats-server/v2/server"
)

// TestOwnershipOutlivesARefusedLeaderMove: where the owner's NATS user may
// not ask for a leader stepdown (least privilege), the leader move at a
// takeover waits for an answer that never comes; the lease (1 s, as the
// daemons' --lease 1s) is renewed meanwhile, and the move gives up after
// half of it, so the ownership is not lost after Own returned it (it was,
// when the move came before the renewals and waited 3 s).
func TestOwnershipOutlivesARefusedLeaderMove(t *testing.T) {
	n := 3
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	perms := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.LEADER.STEPDOWN.>"}},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}},
	}
	var srvs []*server.Server
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("node%d", i+1), Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			JetStream: true, StoreDir: filepath.Join(t.TempDir(), fmt.Sprint(i)),
			Users:   []*server.User{{Username: "u", Password: "p", Permissions: perms}},
			Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("not ready")
		}
		srvs = append(srvs, s)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		leaders := 0
		ok := true
		for _, s := range srvs {
			if s.NumRoutes() < n-1 || !s.JetStreamIsCurrent() {
				ok = false
			}
			if s.JetStreamIsLeader() {
				leaders++
			}
		}
		if ok && leaders == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cluster not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	url := func(s *server.Server) string {
		return strings.Replace(s.ClientURL(), "nats://", "nats://u:p@", 1)
	}
	ctx := context.Background()
	// Daemon 0 creates the streams (their leaders land on some server),
	// then each daemon takes the fleet over in turn; one of them is on a
	// server that does not lead the turns.
	for i, s := range srvs {
		f, err := fleetnats.Connect(ctx, fleetnats.Options{URL: url(s), Fleet: "rv", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		start := time.Now()
		o, err := f.Own(ctx, fleetnats.OwnOptions{LeaseTTL: time.Second})
		if err != nil {
			t.Fatalf("daemon %d: Own: %v", i, err)
		}
		took := time.Since(start)
		t.Logf("daemon %d (%s): Own took %v", i, f.Conn().ConnectedServerName(), took)
		select {
		case <-o.Lost():
			t.Fatalf("daemon %d: ownership lost %v after Own returned (Own took %v): %v", i, time.Since(start)-took, took, o.Err())
		case <-time.After(1500 * time.Millisecond):
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
