package daemon_test

import (
	"context"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"

	"github.com/fleetstate/fleetstate/daemon"
)

// A program that embeds the daemon of a state directory on loopback and
// stops it on an interrupt, as fleetstate serve does.
func ExampleDaemon_Serve() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d, err := daemon.New(daemon.Config{
		Dir:    ".ai-fleet-state",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:7333")
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Serve(ctx, ln); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
