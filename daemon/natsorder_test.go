package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/natstest"
)

// TestNATSConnectsToFirstURL: a daemon given several NATS servers
// (serve --nats n1,n2,n3) connects to the first of them that answers, as
// scaling.md tells operators to list their own machine's server first,
// not to one at random. Each of three orders of the three nodes of a
// cluster is connected to ten times; in random order a connection lands
// on the first URL a third of the time, so thirty in a row there would
// be chance once in 2·10¹⁴.
func TestNATSConnectsToFirstURL(t *testing.T) {
	nodes := natstest.Cluster(t, 3)
	log := slog.New(slog.DiscardHandler)
	for _, order := range [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}} {
		urls := make([]string, len(order))
		for i, n := range order {
			urls[i] = nodes[n].URL()
		}
		cfg := &NATSConfig{URL: strings.Join(urls, ","), Fleet: "order"}
		for i := range 10 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			f, err := cfg.Connect(ctx, log, "order test")
			cancel()
			if err != nil {
				t.Fatalf("connect to %s: %v", cfg.URL, err)
			}
			got := f.Conn().ConnectedUrl()
			f.Close()
			if got != urls[0] {
				t.Fatalf("connection %d to %s is to %s; want the first URL, %s", i+1, cfg.URL, got, urls[0])
			}
		}
	}
}
