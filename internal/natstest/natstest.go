// Package natstest starts NATS servers with JetStream inside a test's
// process: one node, or a cluster of three routed on the loopback
// interface. Each server keeps its streams under the test's temporary
// directory, listens on 127.0.0.1 on a port the system picks, is bounded
// in memory and disk, and is shut down, and waited for, when the test ends.
//
// It is internal, and only tests import it. Linking nats-server makes a
// test binary slow to build (about 1.5 minutes on 2 cores), so only the
// tests of fleetnats and of a few commands use it; fleetnats's tests run
// the root package's conformance suites (package fleetstatetest) on a
// server started here, in their own process.
package natstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/nats-io/nats-server/v2/server"
)

// Bounds of a test server. Without them a server claims 75% of the
// machine's memory and disk.
const (
	// MaxMemory bounds a server's memory-backed streams.
	MaxMemory = 64 << 20
	// MaxStore bounds a server's file-backed streams: room for the 16 MiB
	// files of the store's tests, with their old blobs, several times.
	MaxStore = 1 << 30
	// startTimeout bounds the wait for one server to accept connections.
	startTimeout = 10 * time.Second
	// clusterTimeout bounds the wait for a cluster's routes and its
	// JetStream meta leader (about 1.1 s on 2 cores).
	clusterTimeout = 30 * time.Second
)

// Server is one NATS server with JetStream, running in the test's process.
type Server struct {
	*server.Server
	opts *server.Options
	t    testing.TB
}

// URL returns the server's client URL, nats://127.0.0.1:PORT.
func (s *Server) URL() string { return s.ClientURL() }

// Stop shuts the server down and waits until it has. Its streams stay in
// its store directory for [Server.Restart].
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart stops the server, if it runs, and starts it again on the same
// port with the same store directory.
func (s *Server) Restart() {
	s.t.Helper()
	if s.Running() {
		s.Stop()
	}
	s.Server = start(s.t, s.opts)
}

// Run starts a single JetStream server listening on 127.0.0.1.
func Run(t testing.TB) *Server {
	t.Helper()
	opts := baseOptions(t, "single")
	s := &Server{opts: opts, t: t}
	s.Server = start(t, opts)
	return s
}

// Cluster starts a JetStream cluster of n servers (3 is what replication
// needs) routed to each other on 127.0.0.1, and returns once every server
// has routes to all the others and the cluster has a JetStream meta
// leader.
func Cluster(t testing.TB, n int) []*Server {
	t.Helper()
	return ClusterWith(t, n, nil)
}

// ClusterWith is Cluster with each server's options changed by with (if
// not nil) before it starts: users and their permissions, say.
func ClusterWith(t testing.TB, n int, with func(*server.Options)) []*Server {
	t.Helper()
	// A clustered JetStream server refuses to start without routes, so
	// each needs the others' route ports before it starts: ports free a
	// moment before, outside the range the system hands out by itself.
	// Another test could still bind one in between; the start would then
	// fail, not hang.
	ports := freePorts(t, n)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	servers := make([]*Server, n)
	for i := range n {
		opts := baseOptions(t, fmt.Sprintf("node%d", i+1))
		opts.Cluster = server.ClusterOpts{
			Name: "natstest",
			Host: "127.0.0.1",
			Port: ports[i],
		}
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		if with != nil {
			with(opts)
		}
		s := &Server{opts: opts, t: t}
		s.Server = start(t, opts)
		servers[i] = s
	}
	deadline := time.Now().Add(clusterTimeout)
	for !clusterReady(servers) {
		if time.Now().After(deadline) {
			t.Fatalf("natstest: cluster of %d not ready within %v", n, clusterTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return servers
}

// ClusterDenying is Cluster where the clients are one user who may
// publish to every subject but those of deny (least privilege: a NATS user
// that may not ask for a stepdown, say). Each server's URL for that user
// is UserURL's.
func ClusterDenying(t testing.TB, n int, deny ...string) []*Server {
	t.Helper()
	perms := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}},
	}
	return ClusterWith(t, n, func(o *server.Options) {
		o.Users = []*server.User{{Username: "u", Password: "p", Permissions: perms}}
	})
}

// UserURL is the client URL of s with the credentials of ClusterDenying's
// user.
func (s *Server) UserURL() string { return strings.Replace(s.URL(), "nats://", "nats://u:p@", 1) }

// URLs returns the client URLs of servers, comma-separated, as
// nats.Connect and fleetnats.Options take them.
func URLs(servers []*Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

func clusterReady(servers []*Server) bool {
	leaders := 0
	for _, s := range servers {
		if s.NumRoutes() < len(servers)-1 || !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() {
			leaders++
			if len(s.JetStreamClusterPeers()) < len(servers) {
				return false
			}
		}
	}
	return leaders == 1
}

func baseOptions(t testing.TB, name string) *server.Options {
	return &server.Options{
		ServerName:         name,
		Host:               "127.0.0.1",
		Port:               -1,
		NoLog:              os.Getenv("NATSTEST_LOG") == "",
		NoSigs:             true,
		JetStream:          true,
		JetStreamMaxMemory: MaxMemory,
		JetStreamMaxStore:  MaxStore,
		StoreDir:           filepath.Join(t.TempDir(), name),
	}
}

// start starts a server with opts and registers its shutdown with the
// test. The port the system picked is written back to opts, so that a
// restart listens where the clients reconnect to.
func start(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	if !opts.NoLog {
		s.ConfigureLogger()
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(startTimeout) {
		t.Fatalf("natstest: server %s not ready within %v", opts.ServerName, startTimeout)
	}
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		opts.Port = a.Port
	}
	return s
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago (see fleettest.FreePort).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for len(ports) < n {
		p, err := fleettest.FreePort()
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports
}
