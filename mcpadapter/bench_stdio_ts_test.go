package mcpadapter_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/spf13/afero"
)

// BenchmarkStdioTS is the server's side of bench/peer's TypeScript client:
// ServeStdio on a store on disk, fed the bytes that client sends (its key
// order, its content: a line break every 27 bytes, escaped), put then get
// of one file per worker, inflight workers at once. The client here only
// writes lines and waits for a line with its id, so that nearly all the
// time measured is the server's.
func BenchmarkStdioTS(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, inflight := range []int{1, 8} {
			b.Run(fmt.Sprintf("size=%dKiB/inflight=%d", size>>10, inflight), func(b *testing.B) {
				st, err := fleetstate.Open(afero.NewOsFs(), b.TempDir(), &fleetstate.Options{NoGitIgnore: true})
				if err != nil {
					b.Fatal(err)
				}
				sess, err := st.NewSession("bench")
				if err != nil {
					b.Fatal(err)
				}
				a := mcpadapter.New(st, nil, nil)
				srv := a.NewServer("fleetstate", "bench")
				inR, inW := io.Pipe()
				outR, outW := io.Pipe()
				done := make(chan error, 1)
				go func() {
					done <- a.ServeStdio(context.Background(), srv, mcpadapter.Identity{}, inR, outW, nil)
					outW.Close()
				}()
				c := newIDClient(inW, outR)
				defer func() {
					inW.Close()
					<-done
					<-c.done
				}()
				var seq sync.Mutex
				next := 0
				call := func(line func(id int) []byte) error {
					seq.Lock()
					next++
					id := next
					seq.Unlock()
					resp, err := c.call(id, line(id))
					if err == nil && bytes.Contains(resp[:min(len(resp), 200)], []byte(`"isError":true`)) {
						err = fmt.Errorf("%.200s", resp)
					}
					return err
				}
				work := func(w, n int) error {
					name := fmt.Sprintf("w%d.txt", w)
					fid := "fsm::file::" + sess.ID + "::bench::" + name
					for i := range n {
						content, _ := json.Marshal(tsContent(size, w, i))
						put := func(id int) []byte {
							return []byte(`{"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"bench","file_name":"` + name +
								`","content":` + string(content) + `,"overwrite":true}},"jsonrpc":"2.0","id":` + strconv.Itoa(id) + "}\n")
						}
						get := func(id int) []byte {
							return []byte(`{"method":"tools/call","params":{"name":"get","arguments":{"id":"` + fid + `"}},"jsonrpc":"2.0","id":` + strconv.Itoa(id) + "}\n")
						}
						if err := call(put); err != nil {
							return err
						}
						if err := call(get); err != nil {
							return err
						}
					}
					return nil
				}
				for w := range inflight { // each file exists before the clock starts
					if err := work(w, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(2 * size))
				b.ResetTimer()
				var wg sync.WaitGroup
				errs := make(chan error, inflight)
				for w := range inflight {
					n := b.N / inflight
					if w == 0 {
						n += b.N % inflight
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := work(w, n); err != nil {
							errs <- err
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
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

// idClient writes request lines whole and hands each response line to the
// caller waiting for its id, which it finds without decoding the line.
type idClient struct {
	wmu  sync.Mutex
	w    io.Writer
	mu   sync.Mutex
	wait map[int]chan []byte
	done chan struct{}
}

func newIDClient(w io.Writer, r io.Reader) *idClient {
	c := &idClient{w: w, wait: map[int]chan []byte{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		br := bufio.NewReaderSize(r, 1<<20)
		prefix := []byte(`{"jsonrpc":"2.0","id":`)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			rest, ok := bytes.CutPrefix(line, prefix)
			end := bytes.IndexByte(rest, ',')
			if !ok || end < 0 {
				continue
			}
			id, err := strconv.Atoi(string(rest[:end]))
			if err != nil {
				continue
			}
			c.mu.Lock()
			ch := c.wait[id]
			delete(c.wait, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- bytes.Clone(line[:min(len(line), 200)])
			}
		}
	}()
	return c
}

func (c *idClient) call(id int, line []byte) ([]byte, error) {
	ch := make(chan []byte, 1)
	c.mu.Lock()
	c.wait[id] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	_, err := c.w.Write(line)
	c.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case line := <-ch:
		return line, nil
	case <-c.done:
		return nil, io.ErrUnexpectedEOF
	}
}
