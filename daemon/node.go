package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// nodeStartWait bounds the start of a NATS server: it recovers its
// JetStream store from the disk first.
const nodeStartWait = 30 * time.Second

// StartNode starts a NATS server with the options o, logging to log, and
// returns it once it accepts connections; the caller shuts it down. It is
// the NATS server itself, embedded: the replication, the elections and
// the guarantees are NATS's. o.NoSigs should be set: the server would
// otherwise take the process's signals.
func StartNode(o *server.Options, log *slog.Logger) (*server.Server, error) {
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("nats: %v", err)
	}
	s.SetLoggerV2(natsLogger{log}, false, false, false)
	go s.Start()
	if !s.ReadyForConnections(nodeStartWait) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.New("nats: the server did not start within 30s")
	}
	cluster := ""
	if o.Cluster.Host != "" || o.Cluster.Port != 0 {
		cluster = net.JoinHostPort(o.Cluster.Host, strconv.Itoa(o.Cluster.Port))
	}
	log.Info("fleetstate: NATS server ready", "url", s.ClientURL(), "name", o.ServerName, "store", o.StoreDir, "cluster", cluster)
	return s, nil
}

// natsLogger passes the NATS server's log to the daemon's.
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
