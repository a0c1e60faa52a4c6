package mcpadapter_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
)

// BenchmarkStdioTS is the server's side of bench/peer's TypeScript client:
// ServeStdio on a store on disk, fed the bytes that client sends (its key
// order, its content: a line break every 27 bytes, escaped), put then get
// of one file per worker, inflight workers at once. Each file exists
// before the timer starts, so that every put replaces one, as there.
func BenchmarkStdioTS(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, inflight := range []int{1, 8} {
			b.Run(fmt.Sprintf("size=%dKiB/inflight=%d", size>>10, inflight), func(b *testing.B) {
				st, err := fleetstate.Open(afero.NewOsFs(), b.TempDir(), &fleetstate.Options{NoGitIgnore: true})
				if err != nil {
					b.Fatal(err)
				}
				c := startStdioOn(b, st, serveAnon)
				sess, err := st.CurrentSession()
				if err != nil {
					b.Fatal(err)
				}
				work := func(w, n int) error {
					name := fmt.Sprintf("w%d.txt", w)
					get := `{"method":"tools/call","params":{"name":"get","arguments":{"id":"fsm::file::` + sess.ID + `::bench::` + name + `"}},"jsonrpc":"2.0","id":`
					for i := range n {
						content, _ := json.Marshal(tsContent(size, w, i))
						put := `{"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"bench","file_name":"` + name +
							`","content":` + string(content) + `,"overwrite":true}},"jsonrpc":"2.0","id":`
						for _, req := range []string{put, get} {
							resp, err := c.callLine(func(id string) string { return req + id + "}\n" })
							if err == nil && bytes.Contains(resp[:min(len(resp), 200)], []byte(`"isError":true`)) {
								err = fmt.Errorf("%.200s", resp)
							}
							if err != nil {
								return err
							}
						}
					}
					return nil
				}
				for w := range inflight {
					if err := work(w, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(2 * size))
				runWorkers(b, inflight, work)
			})
		}
	}
}

// tsContent is bench/peer's content: size bytes, different for each
// operation.
func tsContent(size, worker, seq int) string {
	const base = "fleetstate peer benchmark.\n"
	s := fmt.Sprintf("%d.%d ", worker, seq)
	return (s + strings.Repeat(base, size/len(base)+1))[:size]
}
