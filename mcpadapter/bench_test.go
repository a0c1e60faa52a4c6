package mcpadapter_test

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

	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
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
	k := adaptertest.Start(b, adaptertest.Options{Agents: agents, Tools: []server.ServerTool{{
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

// BenchmarkMCP measures, over streamable HTTP on 127.0.0.1:
//
//   - noop: a no-op tool call, the floor of any call on this server;
//   - roundtrip: the lead's fleet_send to a member that waits in
//     fleet_next, the member's fleet_reply, and fleet_send returning it.
//
// With members=N, N members each wait in fleet_next and the lead has N
// sends in flight at once, one per member (for noop, N clients call at
// once). One op is one such round of N calls; p50 and p99 are the latency
// of single calls.
func BenchmarkMCP(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("noop/clients=%d", n), func(b *testing.B) {
			s := newBenchServer(b, n)
			clients := make([]*client.Client, n)
			for i := range clients {
				clients[i] = s.connect(b, s.memberTok[i])
			}
			benchRounds(b, n, func(ctx context.Context, i int) error {
				_, err := benchCall(ctx, clients[i], "noop", nil)
				return err
			})
		})
		b.Run(fmt.Sprintf("roundtrip/members=%d", n), func(b *testing.B) {
			s := newBenchServer(b, n)
			lead := s.connect(b, s.leadTok)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var memberErr atomic.Value
			for i := range n {
				c := s.connect(b, s.memberTok[i])
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						msg, err := benchCall(ctx, c, "fleet_next", map[string]any{"wait_s": 30})
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
			benchRounds(b, n, func(ctx context.Context, i int) error {
				out, err := benchCall(ctx, lead, "fleet_send", map[string]any{"to": fmt.Sprintf("member-%d", i), "content": "do it"})
				if err == nil && out["outcome"] != "reply" {
					err = fmt.Errorf("fleet_send to member-%d: %v; want a reply", i, out)
				}
				return err
			})
			cancel()
			wg.Wait()
			if err, _ := memberErr.Load().(error); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchRounds runs rounds of n concurrent calls, one op per round, and
// reports the median and 99th percentile latency of single calls. Any
// error fails the benchmark.
func benchRounds(b *testing.B, n int, one func(ctx context.Context, i int) error) {
	b.Helper()
	ctx := context.Background()
	var lat []time.Duration
	perRound := make([]time.Duration, n)
	errs := make([]error, n)
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				errs[i] = one(ctx, i)
				perRound[i] = time.Since(t0)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		lat = append(lat, perRound...)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(float64(len(lat)), "calls")
}
