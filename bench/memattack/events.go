package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate/daemon/events"

	"github.com/fleetstate/fleetstate/daemon/permission"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The attacks on the event streams and the permission requests.

// settle is how long an attack on streams that do not read gives the
// daemon to do what it does with the event before the peak is read.
const settle = 3 * time.Second

// tool calls the tool name as agent, with args, a JSON object's text
// (written by hand so that a "<" of a content is one byte on the wire, as
// an attacker would send it), and returns the answer's body.
func (d *daemon) tool(ctx context.Context, agent, name string, args []byte) (string, error) {
	var body bytes.Buffer
	body.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"` + name + `","arguments":`)
	body.Write(args)
	body.WriteString(`}}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.url, &body)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name, "Authorization": "Bearer " + d.tokens[agent]} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK || bytes.Contains(data, []byte(`"isError":true`)) {
		return "", fmt.Errorf("%s: %s: %.300s", name, resp.Status, data)
	}
	return string(data), err
}

// contentArgs returns the text of a JSON object of fields (already JSON)
// and "content": size bytes of "<".
func contentArgs(fields string, size int) []byte {
	b := bytes.NewBufferString(`{` + fields + `"content":"`)
	b.Write(bytes.Repeat([]byte("<"), size))
	b.WriteString(`"}`)
	return b.Bytes()
}

var ticketRE = regexp.MustCompile(`\\?"ticket\\?":\s*\\?"([^"\\]+)`)

// send sends a detached brief of size bytes of "<" to scout and returns
// its ticket.
func (d *daemon) send(ctx context.Context, size int) (string, error) {
	out, err := d.tool(ctx, "lead", "fleet_send", contentArgs(`"to":"scout","wait":false,`, size))
	if err != nil {
		return "", err
	}
	m := ticketRE.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("fleet_send: no ticket in %.300s", out)
	}
	return m[1], nil
}

// watcher is an event stream opened with the lead's token.
type watcher struct {
	resp *http.Response
	mu   sync.Mutex
	// guarded by mu:
	kinds   map[string]int // events read, by kind
	longest int            // bytes of the longest data line read
	err     error
}

// openStreams opens n event streams with the lead's token at once and
// hands each to use, with its index, on its own goroutine; it returns the
// first error of an open or a use once every use has returned.
func (d *daemon) openStreams(ctx context.Context, n int, use func(i int, resp *http.Response) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+events.Path, nil)
			req.Header.Set("Authorization", "Bearer "+d.tokens["lead"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = use(i, resp)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// watch opens n event streams at once and reads their snapshots; the
// streams that read go on reading every event, the others read no more.
func (d *daemon) watch(ctx context.Context, n int, read bool) ([]*watcher, error) {
	ws := make([]*watcher, n)
	err := d.openStreams(ctx, n, func(i int, resp *http.Response) error {
		w := &watcher{resp: resp, kinds: map[string]int{}}
		ws[i] = w
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		if _, _, err := readEvent(br); err != nil {
			return fmt.Errorf("no snapshot: %v", err)
		}
		if read {
			go w.read(br)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ws, nil
}

func (w *watcher) read(br *bufio.Reader) {
	for {
		kind, n, err := readEvent(br)
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.mu.Unlock()
			return
		}
		w.kinds[kind]++
		w.longest = max(w.longest, n)
		w.mu.Unlock()
	}
}

// readEvent reads one server-sent event and returns the kind of the fleet
// event in its data, if any, and its data's length, holding no more of it
// than the start.
func readEvent(br *bufio.Reader) (kind string, n int, err error) {
	var head []byte
	atStart := true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return "", 0, err
		}
		if atStart && len(line) == 1 && line[0] == '\n' {
			if m := regexp.MustCompile(`"kind":"([a-z_]+)"`).FindSubmatch(head); m != nil {
				kind = string(m[1])
			}
			return kind, n, nil
		}
		if atStart && bytes.HasPrefix(line, []byte("data: ")) || !atStart && n > 0 {
			n += len(line)
			if len(head) < 256 {
				head = append(head, line[:min(len(line), 256-len(head))]...)
			}
		}
		atStart = err == nil
	}
}

// waitSeen waits until every watcher has read an event of kind.
func waitSeen(ws []*watcher, kind string, limit time.Duration) error {
	for end := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		done := 0
		for _, w := range ws {
			w.mu.Lock()
			if w.err != nil {
				defer w.mu.Unlock()
				return w.err
			}
			if w.kinds[kind] > 0 {
				done++
			}
			w.mu.Unlock()
		}
		if done == len(ws) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%d of %d streams read a %s event in %v", done, len(ws), kind, limit)
		}
	}
}

func closeAll(ws []*watcher) {
	for _, w := range ws {
		w.resp.Body.Close()
	}
}

func longest(ws []*watcher) float64 {
	n := 0
	for _, w := range ws {
		w.mu.Lock()
		n = max(n, w.longest)
		w.mu.Unlock()
	}
	return float64(n) / (1 << 10)
}

// streams opens n event streams, resets the peak, and sends one brief of
// size bytes of "<". With read the streams read every event and it waits
// until each has read the brief's; without, they never read, and it gives
// the daemon time to settle.
func (d *daemon) streams(n, size int, read bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ws, err := d.watch(ctx, n, read)
	if err != nil {
		return "", err
	}
	defer closeAll(ws)
	if err := d.resetHWM(); err != nil {
		return "", err
	}
	if _, err := d.send(ctx, size); err != nil {
		return "", err
	}
	if !read {
		time.Sleep(settle)
		return fmt.Sprintf(`%d streams that never read, a brief of %d MiB of "<"`, n, size>>20), nil
	}
	if err := waitSeen(ws, "queued", 5*time.Minute); err != nil {
		return "", err
	}
	return fmt.Sprintf(`%d reading streams, a brief of %d MiB of "<": event of %.0f KiB on each`, n, size>>20, longest(ws)), nil
}

// reply has scout take a brief while two event streams read, resets the
// peak, and has scout reply size bytes of "<".
func (d *daemon) reply(size int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ws, err := d.watch(ctx, 2, true)
	if err != nil {
		return "", err
	}
	defer closeAll(ws)
	if _, err := d.send(ctx, 10); err != nil {
		return "", err
	}
	scout, err := mcpadapter.Dial(ctx, d.url, d.tokens["scout"], "memattack")
	if err != nil {
		return "", err
	}
	defer scout.Close()
	if _, ok, err := scout.Next(ctx, 30*time.Second); err != nil || !ok {
		return "", fmt.Errorf("fleet_next: %v, %v", ok, err)
	}
	if err := d.resetHWM(); err != nil {
		return "", err
	}
	if _, err := d.tool(ctx, "scout", "fleet_reply", contentArgs("", size)); err != nil {
		return "", err
	}
	if err := waitSeen(ws, "outcome", 5*time.Minute); err != nil {
		return "", err
	}
	return fmt.Sprintf(`2 reading streams, a reply of %d MiB of "<": event of %.0f KiB on each`, size>>20, longest(ws)), nil
}

// cancelled opens an event stream that reads no more, resets the peak,
// and sends n briefs of size bytes of "<", each cancelled and
// acknowledged at once.
func (d *daemon) cancelled(n, size int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ws, err := d.watch(ctx, 1, false)
	if err != nil {
		return "", err
	}
	defer closeAll(ws)
	lead, err := mcpadapter.Dial(ctx, d.url, d.tokens["lead"], "memattack")
	if err != nil {
		return "", err
	}
	defer lead.Close()
	if err := d.resetHWM(); err != nil {
		return "", err
	}
	for range n {
		ticket, err := d.send(ctx, size)
		if err != nil {
			return "", err
		}
		if _, err := lead.Cancel(ctx, ticket); err != nil {
			return "", err
		}
		if err := lead.Ack(ctx, ticket); err != nil {
			return "", err
		}
	}
	time.Sleep(settle)
	return fmt.Sprintf(`1 stalled stream, %d briefs of %d MiB of "<" cancelled and acked`, n, size>>20), nil
}

// permits raises n permission requests of scout, each with an input of
// size bytes and an hour's window, which the fleet file's rule allows.
func (d *daemon) permits(n, size int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	path := strings.Repeat("x", size-1<<10) // the hook's body is limited to 1 MiB
	allowed := 0
	for i := range n {
		body := fmt.Sprintf(`{"tool_name":"Read","tool_input":{"file_path":"/src/%s"},"key":"k%d","timeout_ms":3600000}`, path, i)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.base+permission.Path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+d.tokens["scout"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("permission %d: %s: %.300s", i, resp.Status, data)
		}
		if bytes.Contains(data, []byte(`"allow"`)) {
			allowed++
		}
	}
	var state int64
	_ = filepath.WalkDir(d.dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				state += fi.Size()
			}
		}
		return nil
	})
	return fmt.Sprintf("%d requests of %d MiB, %d allowed by the rule; state directory %.0f MiB after", n, size>>20, allowed, float64(state)/(1<<20)), nil
}
