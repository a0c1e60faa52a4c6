package leadcli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/fleetstate/fleetstate/daemon/events"
)

// The kinds of ID a command's first argument can be.
const (
	idTicket  = "ticket"
	idTurn    = "turn"
	idRequest = "permission request"
)

// minShort is the shortest start of an ID taken for the whole ID: fewer
// characters name too many IDs to be meant.
const minShort = 4

// maxSnapshot bounds the snapshot read to look an ID up.
const maxSnapshot = 64 << 20

// resolve returns the whole ID of the given kind that arg is a short
// form of: its start, with or without the kind's prefix ("ticket-"),
// as fleetstate watch shows the first eight digits. A whole ID, or one
// the fleet does not know, is returned as it is, for the daemon to
// accept or refuse; a start that several IDs share is an error that
// names them.
func (r *runner) resolve(ctx context.Context, kind, arg string) (string, error) {
	if whole(arg) || len(arg) < minShort {
		return arg, nil
	}
	snap, err := r.snapshot(ctx)
	if err != nil {
		return "", fmt.Errorf("look up the %s %q among the fleet's IDs: %v; give the whole ID", kind, arg, err)
	}
	var ids []string
	switch kind {
	case idTicket:
		for _, t := range snap.Tickets {
			ids = append(ids, t.Ticket)
		}
	case idTurn:
		for _, t := range snap.Tickets {
			ids = append(ids, t.TurnID)
		}
	case idRequest:
		for _, p := range snap.Permissions {
			ids = append(ids, p.ID)
		}
	}
	return matchID(kind, arg, ids)
}

// whole reports whether id has the shape of a whole ID: a prefix and a
// UUID, five dashes.
func whole(id string) bool { return strings.Count(id, "-") >= 5 }

// matchID returns the one ID of ids that arg starts, with or without its
// prefix; arg itself when none does; an error when several do.
func matchID(kind, arg string, ids []string) (string, error) {
	want := strings.ToLower(arg)
	var found []string
	for _, id := range ids {
		if id == "" || slices.Contains(found, id) {
			continue
		}
		bare := id
		if whole(id) {
			bare = id[strings.IndexByte(id, '-')+1:]
		}
		if strings.HasPrefix(id, want) || strings.HasPrefix(bare, want) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return arg, nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%q starts %d %ss (%s): give more of the ID", arg, len(found), kind, strings.Join(found, ", "))
}

// snapshot reads the fleet's snapshot from the daemon's event stream,
// as fleetstate watch does, and closes the stream.
func (r *runner) snapshot(ctx context.Context) (events.StreamSnapshot, error) {
	var snap events.StreamSnapshot
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+events.Path, nil)
	if err != nil {
		return snap, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return snap, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return snap, fmt.Errorf("the daemon answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxSnapshot)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:") && event == "snapshot":
			err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data:")), &snap)
			return snap, err
		}
	}
	if err := sc.Err(); err != nil {
		return snap, err
	}
	return snap, fmt.Errorf("the event stream ended before its snapshot")
}
