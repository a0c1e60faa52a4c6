package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// runNATS runs one NATS server with JetStream, for convenience: a fleet on
// one machine needs no separate install, and three of them (on three
// machines, each naming the others in --routes) make a cluster that
// replicates the fleet. It is the NATS server itself, embedded: the
// replication, the elections and the guarantees are NATS's.
func runNATS(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := newFlagSet("nats")
	addr := fs.String("addr", "127.0.0.1:4222", "client address to listen on (port 0: a free one; the URL goes to standard output)")
	storeDir := fs.String("store-dir", "", "JetStream's directory (default: a folder nats-NAME beside the working directory's state, ./.ai-fleet-state/nats-NAME)")
	name := fs.String("name", "", "the server's name, unique in its cluster (default: derived from --addr)")
	cluster := fs.String("cluster", "", "with --routes: the address this server's cluster routes listen on (host:port)")
	clusterName := fs.String("cluster-name", "fleetstate", "the cluster's name, the same on every server of it")
	routes := fs.String("routes", "", "the other servers' cluster addresses, comma-separated nats-route://host:port URLs")
	maxStore := fs.Int64("max-store", 8<<30, "bytes of disk JetStream may use")
	maxMem := fs.Int64("max-mem", 256<<20, "bytes of memory JetStream may use")
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
	host, portStr, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", *addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 {
		return fmt.Errorf("--addr %q: bad port", *addr)
	}
	if port == 0 {
		// A free port, as for any listener (to NATS, 0 means 4222); the
		// URL printed on standard output names it.
		port = server.RANDOM_PORT
	}
	if *name == "" {
		*name = "fleetstate-" + host + "-" + portStr
	}
	if *storeDir == "" {
		*storeDir = filepath.Join(".ai-fleet-state", "nats-"+*name)
	}
	o := &server.Options{
		ServerName:         *name,
		Host:               host,
		Port:               port,
		JetStream:          true,
		StoreDir:           *storeDir,
		JetStreamMaxStore:  *maxStore,
		JetStreamMaxMemory: *maxMem,
		NoSigs:             true,
	}
	if *cluster != "" || *routes != "" {
		if *cluster == "" || *routes == "" {
			return errors.New("nats: --cluster and --routes go together")
		}
		chost, cport, err := net.SplitHostPort(*cluster)
		if err != nil {
			return fmt.Errorf("--cluster %q: %v", *cluster, err)
		}
		cp, err := strconv.Atoi(cport)
		if err != nil {
			return fmt.Errorf("--cluster %q: bad port", *cluster)
		}
		o.Cluster = server.ClusterOpts{Name: *clusterName, Host: chost, Port: cp}
		o.Routes = server.RoutesFromStr(*routes)
		if len(o.Routes) == 0 {
			return fmt.Errorf("--routes %q: no route URL", *routes)
		}
	}
	s, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("nats: %v", err)
	}
	s.SetLoggerV2(natsLogger{log}, false, false, false)
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return errors.New("nats: the server did not start within 30s")
	}
	log.Info("fleetstate: NATS server ready", "url", s.ClientURL(), "name", *name, "store", *storeDir, "cluster", *cluster)
	fmt.Fprintln(stdout, s.ClientURL())
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// natsLogger passes the NATS server's log to the command's.
type natsLogger struct{ log *slog.Logger }

func (l natsLogger) Noticef(format string, v ...any) {
	l.log.Info("nats: " + fmt.Sprintf(format, v...))
}
func (l natsLogger) Warnf(format string, v ...any) { l.log.Warn("nats: " + fmt.Sprintf(format, v...)) }
func (l natsLogger) Fatalf(format string, v ...any) {
	l.log.Error("nats: " + fmt.Sprintf(format, v...))
	os.Exit(1)
}
func (l natsLogger) Errorf(format string, v ...any) {
	l.log.Error("nats: " + fmt.Sprintf(format, v...))
}
func (l natsLogger) Debugf(format string, v ...any) {
	l.log.Debug("nats: " + fmt.Sprintf(format, v...))
}
func (l natsLogger) Tracef(format string, v ...any) {}
