package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/fleetstate/fleetstate/daemon"
	"github.com/nats-io/nats-server/v2/server"
)

// runNATS runs one NATS server with JetStream, for convenience: a fleet on
// one machine needs no separate install, and three of them (on three
// machines, each naming the others in --routes) make a cluster that
// replicates the fleet. It is the NATS server itself, embedded: the
// replication, the elections and the guarantees are NATS's.
func runNATS(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := newFlagSet("nats")
	var node natsNodeFlags
	node.add(fs, "")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("nats: unexpected argument %q: nats takes flags only", fs.Arg(0))
	}
	var err error
	if log, err = newLogger(stderr, *logLevel, "text"); err != nil {
		return err
	}
	o, err := node.options()
	if err != nil {
		return err
	}
	s, err := daemon.StartNode(o, log)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, s.ClientURL())
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// natsNodeFlags are the flags of a NATS server that a command runs: those
// of nats, and with the prefix "nats-" those of serve --nats-node, whose
// daemon embeds its node.
type natsNodeFlags struct {
	prefix                                             string // of the flags' names
	addr, storeDir, name, cluster, clusterName, routes string
	maxStore, maxMem                                   int64
}

// add adds the node's flags to fs, each name with prefix.
func (n *natsNodeFlags) add(fs *flag.FlagSet, prefix string) {
	n.prefix = prefix
	p := "--" + prefix
	fs.StringVar(&n.addr, prefix+"addr", "127.0.0.1:4222", "client address the NATS server listens on (port 0: a free one; the URL goes to the log, and for nats to standard output)")
	fs.StringVar(&n.storeDir, prefix+"store-dir", "", "JetStream's directory (default: a folder nats-NAME beside the working directory's state, ./.ai-fleet-state/nats-NAME)")
	fs.StringVar(&n.name, prefix+"name", "", "the NATS server's name, unique in its cluster (default: derived from "+p+"addr)")
	fs.StringVar(&n.cluster, prefix+"cluster", "", "with "+p+"routes: the address this NATS server's cluster routes listen on (host:port)")
	fs.StringVar(&n.clusterName, prefix+"cluster-name", "fleetstate", "the NATS cluster's name, the same on every server of it")
	fs.StringVar(&n.routes, prefix+"routes", "", "the other NATS servers' cluster addresses, comma-separated nats-route://host:port URLs")
	fs.Int64Var(&n.maxStore, prefix+"max-store", 8<<30, "bytes of disk JetStream may use")
	fs.Int64Var(&n.maxMem, prefix+"max-mem", 256<<20, "bytes of memory JetStream may use")
}

// options returns the options of the NATS server the flags describe.
func (n *natsNodeFlags) options() (*server.Options, error) {
	p := "--" + n.prefix
	host, portStr, err := net.SplitHostPort(n.addr)
	if err != nil {
		return nil, fmt.Errorf("%saddr %q: %v", p, n.addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 {
		return nil, fmt.Errorf("%saddr %q: bad port", p, n.addr)
	}
	if port == 0 {
		// A free port, as for any listener (to NATS, 0 means 4222); the
		// URL logged names it.
		port = server.RANDOM_PORT
	}
	name, storeDir := n.name, n.storeDir
	if name == "" {
		name = "fleetstate-" + host + "-" + portStr
	}
	if storeDir == "" {
		storeDir = filepath.Join(".ai-fleet-state", "nats-"+name)
	}
	o := &server.Options{
		ServerName:         name,
		Host:               host,
		Port:               port,
		JetStream:          true,
		StoreDir:           storeDir,
		JetStreamMaxStore:  n.maxStore,
		JetStreamMaxMemory: n.maxMem,
		NoSigs:             true,
	}
	if n.cluster != "" || n.routes != "" {
		if n.cluster == "" || n.routes == "" {
			return nil, fmt.Errorf("nats: %scluster and %sroutes go together", p, p)
		}
		chost, cport, err := net.SplitHostPort(n.cluster)
		if err != nil {
			return nil, fmt.Errorf("%scluster %q: %v", p, n.cluster, err)
		}
		cp, err := strconv.Atoi(cport)
		if err != nil {
			return nil, fmt.Errorf("%scluster %q: bad port", p, n.cluster)
		}
		o.Cluster = server.ClusterOpts{Name: n.clusterName, Host: chost, Port: cp}
		o.Routes = server.RoutesFromStr(n.routes)
		if len(o.Routes) == 0 {
			return nil, fmt.Errorf("%sroutes %q: no route URL", p, n.routes)
		}
	}
	return o, nil
}
