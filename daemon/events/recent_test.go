package events_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/events"
)

// TestEventsSnapshotCarriesRecentEvents: a watcher that connects after
// things happened gets the last Recent of them with the snapshot,
// oldest first, none newer than the snapshot, long contents clipped.
func TestEventsSnapshotCarriesRecentEvents(t *testing.T) {
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(events.Handler(rv, events.Options{Operator: testOperator}))
	t.Cleanup(func() {
		rv.Close()
		srv.Close()
	})
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	const sent = events.Recent + 10
	for i := range sent {
		content := fmt.Sprintf("task %d", i)
		if i == sent-1 {
			content += strings.Repeat("x", events.SnapshotClip+100)
		}
		if _, err := rv.SendDetached("lead", "scout", content); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+testOperator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var snap events.StreamSnapshot
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &snap); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if len(snap.Tickets) != sent {
		t.Fatalf("the snapshot has %d tickets; want %d", len(snap.Tickets), sent)
	}
	if len(snap.Recent) != events.Recent {
		t.Fatalf("the snapshot carries %d recent events; want %d", len(snap.Recent), events.Recent)
	}
	for i, e := range snap.Recent {
		want := fmt.Sprintf("task %d", sent-events.Recent+i)
		if e.Kind != fleetstate.EventQueued || !strings.HasPrefix(e.Content, want) || e.Seq > snap.Seq || (i > 0 && e.Seq != snap.Recent[i-1].Seq+1) {
			t.Fatalf("recent event %d: %+v; want the queueing of %q, in order, none after the snapshot's seq %d", i, e, want, snap.Seq)
		}
	}
	if last := snap.Recent[len(snap.Recent)-1]; last.Seq != snap.Seq || len(last.Content) > events.SnapshotClip {
		t.Errorf("the last recent event: seq %d, %d bytes; want seq %d, clipped to %d bytes", last.Seq, len(last.Content), snap.Seq, events.SnapshotClip)
	}
}
