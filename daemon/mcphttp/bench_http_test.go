package mcphttp_test

// A benchmark of the HTTP request path alone: put then get of one file,
// each a POST of a 2026-07-28 tools/call served by the handler in process
// (no network, no client library, the store in memory). It runs only with
// -bench; see BENCHMARKS.md.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

func BenchmarkHTTPCall(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", &fleetstate.Options{NoGitIgnore: true})
			if err != nil {
				b.Fatal(err)
			}
			sess, err := st.NewSession("bench")
			if err != nil {
				b.Fatal(err)
			}
			a := mcpadapter.New(st, nil, nil)
			h := mcphttp.New(a, a.NewServer("fleetstate", "bench"), mcphttp.Options{Anonymous: true})
			b.Cleanup(func() { h.Close() })
			content := strings.Repeat("x", size)
			put := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"arguments":{"agent_name":"a","content":"` + content + `","file_name":"f","overwrite":true},"name":"put"}}`
			get := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + modernMeta + `,"arguments":{"id":"fsm::file::` + sess.ID + `::a::f"},"name":"get"}}`
			call := func(tool, body string) {
				req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
				for k, v := range modernHeader(tool) {
					req.Header.Set(k, v)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"isError":true`) {
					b.Fatalf("%s: %d %.300s", tool, rec.Code, rec.Body.String())
				}
			}
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			for b.Loop() {
				call("put", put)
				call("get", get)
			}
		})
	}
}
