package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/events"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/daemon/dashboard"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The memory a token holder can make the daemon keep, measured in the
// test's own process, where the daemon is embedded: the live heap after
// a garbage collection, before and after the attack.

// liveHeap returns the bytes of the live heap after a full collection.
// Two collections: the first may leave what only a sync.Pool's victim
// cache holds.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// dashboardClient logs in to the dashboard of the daemon at base with
// token (the operator's or a lead's) and returns a client that carries
// the login cookie.
func dashboardClient(t *testing.T, base, token string) *http.Client {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+dashboard.Path+"code", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Login string `json:"login"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dashboard code: %s, %v", resp.Status, err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = c.Get(base + out.Login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("dashboard login: %s; want 303", resp.Status)
	}
	return c
}

// TestTranscriptsKeepOnlyTheClip: the dashboard's transcripts keep a
// clip of each reply, not the reply: after a dozen replies of 2 MiB, all
// acked, the daemon's live heap has not grown by their size.
func TestTranscriptsKeepOnlyTheClip(t *testing.T) {
	const replies, size = 12, 2 << 20
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	_, url := embed(t, daemon.Config{Dir: store.Dir()})
	base := strings.TrimSuffix(url, "/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lead, scout := dial(t, ctx, url, tokens["lead"]), dial(t, ctx, url, tokens["scout"])
	operator, err := auth.OperatorToken(store)
	if err != nil {
		t.Fatal(err)
	}
	web := dashboardClient(t, base, operator)

	before := liveHeap()
	for i := range replies {
		o, err := lead.SendDetached(ctx, "scout", "task "+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := scout.Next(ctx, 5*time.Second); err != nil || !ok {
			t.Fatalf("fleet_next: %v, %v; want the task", ok, err)
		}
		// Each reply a string of its own, as each request's would be.
		if err := scout.Reply(ctx, strings.Repeat(string(rune('a'+i)), size)); err != nil {
			t.Fatal(err)
		}
		if r, err := lead.Poll(ctx, o.Ticket, 5*time.Second); err != nil || len(r.Content) != size {
			t.Fatalf("fleet_poll: %d bytes, %v; want the reply", len(r.Content), err)
		}
		if err := lead.Ack(ctx, o.Ticket); err != nil {
			t.Fatal(err)
		}
	}
	// The transcripts have folded every event once they answer for the
	// sequence number of a snapshot taken now.
	resp := openEvents(t, base, operator)
	_, data, _ := (&sseReader{bufio.NewScanner(resp.Body)}).next()
	resp.Body.Close()
	var snap fleetstate.Snapshot
	if err := json.Unmarshal([]byte(data), &snap); err != nil {
		t.Fatalf("snapshot %.200s: %v", data, err)
	}
	tr, err := web.Get(base + dashboard.Path + "transcripts?after=" + strconv.FormatUint(snap.Seq, 10))
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Seq   uint64 `json:"seq"`
		Turns []struct {
			Entries []struct {
				Kind    string `json:"kind"`
				Content string `json:"content"`
				Clipped bool   `json:"clipped"`
			} `json:"entries"`
		} `json:"turns"`
	}
	err = json.NewDecoder(tr.Body).Decode(&view)
	tr.Body.Close()
	if err != nil || view.Seq < snap.Seq || len(view.Turns) != replies {
		t.Fatalf("transcripts: seq %d (want %d), %d turns (want %d), %v", view.Seq, snap.Seq, len(view.Turns), replies, err)
	}
	for _, turn := range view.Turns {
		last := turn.Entries[len(turn.Entries)-1]
		if last.Kind != "outcome" || !last.Clipped || len(last.Content) > 4096 {
			t.Fatalf("transcript's last entry: %s, clipped %v, %d bytes; want the reply clipped", last.Kind, last.Clipped, len(last.Content))
		}
	}
	view.Turns = nil

	// What the replies would pin is 24 MiB; the transcripts' clips are
	// 48 KiB. Half the replies' size separates the two whatever else the
	// process holds at the moment.
	after := liveHeap()
	grown := int64(after) - int64(before)
	t.Logf("live heap grew by %.1f MiB", float64(grown)/(1<<20))
	if grown > replies*size/2 {
		t.Fatalf("live heap grew by %d MiB after %d acked replies of %d MiB; want well under %d MiB",
			grown>>20, replies, size>>20, replies*size/2>>20)
	}
}

// TestEventsSnapshotClipsContents: the snapshot an event stream starts
// with carries the start of each brief and reply, marked with its full
// length, so that what a connect costs does not grow with the contents;
// the reply is whole in the lead's fleet_poll.
func TestEventsSnapshotClipsContents(t *testing.T) {
	const tickets, size = 20, 1 << 20
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	_, url := embed(t, daemon.Config{Dir: store.Dir()})
	base := strings.TrimSuffix(url, "/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lead, scout := dial(t, ctx, url, tokens["lead"]), dial(t, ctx, url, tokens["scout"])

	// The first ticket is replied to; the others stay queued.
	var first string
	for i := range tickets {
		o, err := lead.SendDetached(ctx, "scout", strings.Repeat(string(rune('a'+i)), size))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = o.Ticket
			if _, ok, err := scout.Next(ctx, 5*time.Second); err != nil || !ok {
				t.Fatalf("fleet_next: %v, %v; want the task", ok, err)
			}
			// Not ASCII only: the clip must end at a character boundary.
			if err := scout.Reply(ctx, strings.Repeat("é", size/2)); err != nil {
				t.Fatal(err)
			}
		}
	}

	resp := openEvents(t, base, tokens["lead"])
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	ev, data, ok := (&sseReader{sc}).next()
	resp.Body.Close()
	if !ok || ev != "snapshot" {
		t.Fatalf("first event %q, %v; want the snapshot", ev, sc.Err())
	}
	// Each ticket's two texts at the clip, escaped, and its other fields.
	if limit := tickets * (2*events.SnapshotClip + 1024); len(data) > limit {
		t.Fatalf("snapshot of %d tickets of %d MiB: %d bytes; want at most %d", tickets, size>>20, len(data), limit)
	}
	var snap fleetstate.Snapshot
	if err := json.Unmarshal([]byte(data), &snap); err != nil || len(snap.Tickets) != tickets {
		t.Fatalf("snapshot: %d tickets, %v; want %d", len(snap.Tickets), err, tickets)
	}
	for _, tk := range snap.Tickets {
		if len(tk.Brief) > events.SnapshotClip || tk.BriefBytes != size {
			t.Errorf("ticket %s: brief of %d bytes, brief_bytes %d; want at most %d and %d", tk.Ticket, len(tk.Brief), tk.BriefBytes, events.SnapshotClip, size)
		}
		if tk.Ticket != first {
			continue
		}
		if len(tk.Content) > events.SnapshotClip || tk.ContentBytes != size || !strings.HasPrefix(strings.Repeat("é", size/2), tk.Content) {
			t.Errorf("replied ticket: content of %d bytes, content_bytes %d; want a clip of whole characters and %d", len(tk.Content), tk.ContentBytes, size)
		}
	}
	if o, err := lead.Poll(ctx, first, 0); err != nil || o.Content != strings.Repeat("é", size/2) {
		t.Fatalf("fleet_poll: %d bytes, %v; want the whole reply", len(o.Content), err)
	}
}

// rpcRefusal is a JSON-RPC error answer of the transport, with the data
// of a tool's failure.
type rpcRefusal struct {
	Error struct {
		Message string `json:"message"`
		Data    struct {
			Error fleetstate.Code `json:"error"`
		} `json:"data"`
	} `json:"error"`
}

// startBody writes on a new connection to the daemon at host the headers
// of a 2026-07-28 put by the holder of token, with header (Content-Length
// or chunked), and the start of its body; the test's cleanup closes the
// connection.
func startBody(t *testing.T, host, token, header string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h, _ := modernRequest(1, "tools/call", map[string]any{"name": "put"})
	var b strings.Builder
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s\r\n", host, token, header)
	for k, v := range h {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	start := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"agent_name":"scout","file_name":"big","content":"`
	if strings.Contains(header, "chunked") {
		start = fmt.Sprintf("%x\r\n%s\r\n", len(start), start)
	}
	b.WriteString(start)
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// wantTooLarge reads the answer on br and fails unless it is 413 with
// ERR_CONTENT_TOO_LARGE.
func wantTooLarge(t *testing.T, what string, br *bufio.Reader) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no answer: %v", what, err)
	}
	var r rpcRefusal
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || err != nil || r.Error.Data.Error != fleetstate.CodeContentTooLarge ||
		!strings.HasPrefix(r.Error.Message, string(fleetstate.CodeContentTooLarge)) {
		t.Fatalf("%s: %s, %+v, %v; want 413 with %s", what, resp.Status, r, err, fleetstate.CodeContentTooLarge)
	}
}

// TestBodyPastLimitRefusedUnread: a body past the content limit and its
// envelope is refused with ERR_CONTENT_TOO_LARGE before it is read, when
// its Content-Length says so, and as soon as the limit is passed when it
// comes in chunks; the daemon serves on.
func TestBodyPastLimitRefusedUnread(t *testing.T) {
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	_, url := embed(t, daemon.Config{Dir: store.Dir()})
	host := hostOf(url)

	// 60 MiB announced, a few bytes sent: the answer comes at once.
	_, br := startBody(t, host, tokens["scout"], fmt.Sprintf("Content-Length: %d", 60<<20))
	wantTooLarge(t, "a body of 60 MiB announced", br)

	// 20 MiB in chunks of 1 MiB, with no length announced.
	conn, br := startBody(t, host, tokens["scout"], "Transfer-Encoding: chunked")
	go func() {
		chunk := fmt.Sprintf("%x\r\n%s\r\n", 1<<20, strings.Repeat("z", 1<<20))
		for range 20 {
			if _, err := io.WriteString(conn, chunk); err != nil {
				return // the daemon stopped reading
			}
		}
		_, _ = io.WriteString(conn, "2\r\n\"}\r\n4\r\n}}}}\r\n0\r\n\r\n")
	}()
	wantTooLarge(t, "a chunked body of 20 MiB", br)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := dial(t, ctx, url, tokens["lead"]).Members(ctx); err != nil {
		t.Fatalf("fleet_members after the refusals: %v", err)
	}
}

// TestBodiesInFlightBoundedPerToken: of three bodies of the largest size
// that one member sends at once, one is refused with 429 and Retry-After,
// unread, while the other two are in flight; another identity is served
// meanwhile, and once one of the two ends, the member is served again.
func TestBodiesInFlightBoundedPerToken(t *testing.T) {
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	_, url := embed(t, daemon.Config{Dir: store.Dir()})
	host := hostOf(url)

	// Chunked bodies, each counted as the largest, held open.
	type answer struct {
		i    int
		resp *http.Response
	}
	answers := make(chan answer, 3)
	var held [3]net.Conn
	for i := range held {
		conn, br := startBody(t, host, tokens["scout"], "Transfer-Encoding: chunked")
		held[i] = conn
		go func() {
			if resp, err := http.ReadResponse(br, nil); err == nil {
				resp.Body.Close()
				answers <- answer{i, resp}
			}
		}()
	}
	var refused answer
	select {
	case refused = <-answers:
	case <-time.After(10 * time.Second):
		t.Fatal("three bodies of the largest size in flight at once, none refused; want one refused with 429")
	}
	if refused.resp.StatusCode != http.StatusTooManyRequests || refused.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the body past the bound: %s, Retry-After %q; want 429 with Retry-After",
			refused.resp.Status, refused.resp.Header.Get("Retry-After"))
	}
	post := func(token string) *http.Response {
		h, body := modernRequest(2, "tools/list", nil)
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := post(tokens["lead"]); resp.StatusCode != http.StatusOK {
		t.Errorf("the lead's request meanwhile: %s; want 200", resp.Status)
	}
	held[(refused.i+1)%3].Close()
	var again *http.Response
	if !fleettest.Until(10*time.Second, 10*time.Millisecond, func() bool {
		again = post(tokens["scout"])
		return again.StatusCode == http.StatusOK
	}) {
		t.Fatalf("the member's request once a body ended: %s; want 200", again.Status)
	}
}
