package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
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
	req, _ := http.NewRequest(http.MethodPost, base+mcpadapter.DashboardPath+"code", nil)
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
// clip of each reply, not the reply: after ten replies of 3 MiB, all
// acked, the daemon's live heap has not grown by their size.
func TestTranscriptsKeepOnlyTheClip(t *testing.T) {
	const replies, size = 10, 3 << 20
	store, tokenFile := adaptertest.OpenStore(t)
	tokens := adaptertest.AddTokens(t, tokenFile, map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember})
	_, url := embed(t, daemon.Config{Dir: store.Dir()})
	base := strings.TrimSuffix(url, "/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lead, scout := dial(t, ctx, url, tokens["lead"]), dial(t, ctx, url, tokens["scout"])
	operator, err := mcpadapter.OperatorToken(store)
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
	tr, err := web.Get(base + mcpadapter.DashboardPath + "transcripts?after=" + strconv.FormatUint(snap.Seq, 10))
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

	// What the replies would pin is 30 MiB; the transcripts' clips are
	// 40 KiB. Half the replies' size separates the two whatever else the
	// process holds at the moment.
	after := liveHeap()
	if grown := int64(after) - int64(before); grown > replies*size/2 {
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
	if limit := tickets * (2*mcpadapter.SnapshotClip + 1024); len(data) > limit {
		t.Fatalf("snapshot of %d tickets of %d MiB: %d bytes; want at most %d", tickets, size>>20, len(data), limit)
	}
	var snap fleetstate.Snapshot
	if err := json.Unmarshal([]byte(data), &snap); err != nil || len(snap.Tickets) != tickets {
		t.Fatalf("snapshot: %d tickets, %v; want %d", len(snap.Tickets), err, tickets)
	}
	for _, tk := range snap.Tickets {
		if len(tk.Brief) > mcpadapter.SnapshotClip || tk.BriefBytes != size {
			t.Errorf("ticket %s: brief of %d bytes, brief_bytes %d; want at most %d and %d", tk.Ticket, len(tk.Brief), tk.BriefBytes, mcpadapter.SnapshotClip, size)
		}
		if tk.Ticket != first {
			continue
		}
		if len(tk.Content) > mcpadapter.SnapshotClip || tk.ContentBytes != size || !strings.HasPrefix(strings.Repeat("é", size/2), tk.Content) {
			t.Errorf("replied ticket: content of %d bytes, content_bytes %d; want a clip of whole characters and %d", len(tk.Content), tk.ContentBytes, size)
		}
	}
	if o, err := lead.Poll(ctx, first, 0); err != nil || o.Content != strings.Repeat("é", size/2) {
		t.Fatalf("fleet_poll: %d bytes, %v; want the whole reply", len(o.Content), err)
	}
}
