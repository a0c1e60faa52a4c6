package mcphttp_test

// Benchmarks of the MCP server over streamable HTTP on 127.0.0.1, as
// `fleetstate serve` runs it (the real handler, bearer tokens, the state on
// disk). Each figure is paired in the same run with a no-op tool call on the
// same server. They run only with -bench; see BENCHMARKS.md.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// benchServer is the daemon with a lead token and member tokens, and an
// extra tool, noop, that does nothing: the floor of a tool call.
type benchServer struct {
	url       string
	leadTok   string
	memberTok []string // of member-0, member-1, …
	http      *http.Client
}

func newBenchServer(b *testing.B, members int) *benchServer {
	b.Helper()
	agents := map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead}
	for i := range members {
		agents[fmt.Sprintf("member-%d", i)] = mcpadapter.RoleMember
	}
	// As `fleetstate serve` runs it: the token file watched, idle sessions
	// forgotten after 30 minutes, returned outcomes held for 15.
	k := adaptertest.Start(b, adaptertest.Options{Agents: agents,
		Membership: &auth.MembershipOptions{},
		HTTP:       mcphttp.Options{SessionIdleTTL: 30 * time.Minute},
		Rendezvous: &fleetstate.RendezvousOptions{HoldReturned: 15 * time.Minute},
		Tools: []server.ServerTool{{
			Tool: mcp.NewTool("noop", mcp.WithDescription("does nothing")),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(""), nil
			},
		}}})
	s := &benchServer{url: k.URL, leadTok: k.Token["lead"]}
	for i := range members {
		s.memberTok = append(s.memberTok, k.Token[fmt.Sprintf("member-%d", i)])
	}
	// One pool of keep-alive connections for every client, large enough
	// for all the calls in flight, so that no call pays for a new TCP
	// connection.
	tr := &http.Transport{MaxIdleConns: 4 * (members + 10), MaxIdleConnsPerHost: 4 * (members + 10), IdleConnTimeout: time.Minute}
	s.http = &http.Client{Transport: tr}
	b.Cleanup(tr.CloseIdleConnections)
	return s
}

// connect returns an initialized client that sends token; the benchmark's
// cleanup closes it.
func (s *benchServer) connect(b *testing.B, token string) *client.Client {
	b.Helper()
	c, _, err := adaptertest.Dial(context.Background(), s.url, s.http, adaptertest.DialOptions{Name: "bench",
		Transport: []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// call calls a tool and fails on a transport error or an error result; it
// returns the structured content.
func benchCall(ctx context.Context, c *client.Client, name string, args map[string]any) (map[string]any, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: error result %v", name, res.Content)
	}
	out := map[string]any{}
	if res.StructuredContent != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BenchmarkMCP measures, over streamable HTTP on 127.0.0.1, side by side
// on one server:
//
//   - noop: a no-op tool call, the floor of any call on this server (a
//     tool added from outside the adapter, so mcp-go serves it);
//   - small: get_session, an adapter tool the server answers from one
//     small file, through the same request path as the round trip's
//     calls: a baseline of an adapter tool's call;
//   - rt: the round trip, the lead's fleet_send to a member that waits in
//     fleet_next, the member's fleet_reply, and fleet_send returning it.
//
// With members=N, N members each wait in fleet_next. One op is a round of
// N no-op calls at once (N clients, one per member token, beside the
// member's own session) followed by a round of N sends at once from the
// lead, one per member; the two rounds alternate, so that both see the
// same load of the machine, and so does a round of N get_session calls.
// Reported per call: noop-p50-ns, noop-p99-ns, small-p50-ns,
// small-p99-ns, rt-p50-ns and rt-p99-ns (median and 99th percentile
// latency), and rt/noop and rt/small, the ratios of the medians. ns/op is the time of both rounds.
// The server is as `fleetstate serve` runs it: bearer tokens, the state on
// disk, and the token file watched for revocations.
func BenchmarkMCP(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) { benchMCP(b, n) })
	}
}

func benchMCP(b *testing.B, n int) {
	s := newBenchServer(b, n)
	lead := s.connect(b, s.leadTok)
	noop := make([]*client.Client, n)
	for i := range noop {
		noop[i] = s.connect(b, s.memberTok[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var memberErr atomic.Value
	// waiting gets a value each time a member is about to call fleet_next:
	// a round of sends is over once every member is back in fleet_next,
	// so that no round overlaps the tail of the one before.
	waiting := make(chan struct{}, 4*n)
	for i := range n {
		c := s.connect(b, s.memberTok[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				waiting <- struct{}{}
				msg, err := benchCall(ctx, c, "fleet_next", map[string]any{"wait_s": 300})
				if err != nil {
					if ctx.Err() == nil {
						memberErr.Store(err)
					}
					return
				}
				if msg["turn_id"] == nil {
					continue
				}
				if _, err := benchCall(ctx, c, "fleet_reply", map[string]any{"content": "done"}); err != nil {
					if ctx.Err() == nil {
						memberErr.Store(err)
					}
					return
				}
			}
		}()
	}
	settle := func() {
		for range n {
			select {
			case <-waiting:
			case <-time.After(time.Minute):
				b.Fatal("the members are not back in fleet_next after a minute")
			}
		}
	}
	settle()
	if _, err := benchCall(ctx, lead, "new_session", map[string]any{"name": "bench"}); err != nil {
		b.Fatal(err)
	}
	var noopLat, smallLat, rtLat []time.Duration
	for b.Loop() {
		noopLat = benchRound(b, noopLat, n, func(ctx context.Context, i int) error {
			_, err := benchCall(ctx, noop[i], "noop", nil)
			return err
		})
		smallLat = benchRound(b, smallLat, n, func(ctx context.Context, i int) error {
			_, err := benchCall(ctx, noop[i], "get_session", nil)
			return err
		})
		rtLat = benchRound(b, rtLat, n, func(ctx context.Context, i int) error {
			out, err := benchCall(ctx, lead, "fleet_send", map[string]any{"to": fmt.Sprintf("member-%d", i), "content": "do it"})
			if err == nil && out["outcome"] != "reply" {
				err = fmt.Errorf("fleet_send to member-%d: %v; want a reply", i, out)
			}
			return err
		})
		settle()
	}
	cancel()
	wg.Wait()
	if err, _ := memberErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	np50, np99 := percentiles(noopLat)
	sp50, sp99 := percentiles(smallLat)
	rp50, rp99 := percentiles(rtLat)
	b.ReportMetric(np50, "noop-p50-ns")
	b.ReportMetric(np99, "noop-p99-ns")
	b.ReportMetric(sp50, "small-p50-ns")
	b.ReportMetric(sp99, "small-p99-ns")
	b.ReportMetric(rp50, "rt-p50-ns")
	b.ReportMetric(rp99, "rt-p99-ns")
	b.ReportMetric(rp50/np50, "rt/noop")
	b.ReportMetric(rp50/sp50, "rt/small")
	b.ReportMetric(float64(len(rtLat)), "calls")
}

// benchRound runs n concurrent calls and appends their latencies to lat.
// Any error fails the benchmark.
func benchRound(b *testing.B, lat []time.Duration, n int, one func(ctx context.Context, i int) error) []time.Duration {
	b.Helper()
	ctx := context.Background()
	took := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			t0 := time.Now()
			errs[i] = one(ctx, i)
			took[i] = time.Since(t0)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return append(lat, took...)
}

// percentiles returns the median and the 99th percentile of lat in
// nanoseconds.
func percentiles(lat []time.Duration) (p50, p99 float64) {
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	return pct(0.50), pct(0.99)
}

// BenchmarkTokenLookup measures the bearer-token lookup of every HTTP
// request, with 1 and 1,000 tokens in the file, from every core at once.
func BenchmarkTokenLookup(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			_, tokens := adaptertest.OpenStore(b)
			agents := map[string]mcpadapter.Role{}
			for i := range n {
				agents[fmt.Sprintf("member-%d", i)] = mcpadapter.RoleMember
			}
			tok := adaptertest.AddTokens(b, tokens, agents)["member-0"]
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, ok := tokens.Lookup(tok); !ok {
						b.Error("refused")
						return
					}
				}
			})
		})
	}
}
