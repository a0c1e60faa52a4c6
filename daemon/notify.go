package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
)

// logEvents writes each event of sub to log as one structured line, until
// the subscription ends. A gap (the logger fell behind) is logged too.
func logEvents(log *slog.Logger, sub *fleetstate.Subscription) {
	for e := range sub.Events() {
		if e.Gap > 0 {
			log.Warn("fleetstate: events not logged: the log fell behind", "missed", e.Gap)
		}
		attrs := []any{"seq", e.Seq, "kind", e.Kind}
		for _, kv := range [][2]string{{"member", e.Member}, {"lead", e.Lead}, {"turn", e.TurnID}, {"ticket", e.Ticket}, {"status", e.Status}} {
			if kv[1] != "" {
				attrs = append(attrs, kv[0], kv[1])
			}
		}
		if o := e.Outcome; o != nil {
			attrs = append(attrs, "outcome", o.Kind)
			if o.Reason != "" {
				attrs = append(attrs, "reason", o.Reason)
			}
			attrs = append(attrs, "held", e.Held)
		}
		log.Info("fleetstate: event", attrs...)
	}
}

// Bounds of the notification command.
const (
	notifyTimeout = 10 * time.Second // a run that takes longer is killed
	notifyRuns    = 4                // runs at once; events past that are dropped, and counted
)

// notifies reports whether e is one that people want to hear of: a member
// asks a question, turns BLOCKED, a detached ticket finishes, a turn fails.
func notifies(e fleetstate.Event) bool {
	switch e.Kind {
	case fleetstate.EventAsked:
		return true
	case fleetstate.EventStatus:
		return e.Status == fleetstate.StatusBlocked.String()
	case fleetstate.EventOutcome:
		return e.Held || e.Outcome != nil && e.Outcome.Kind == fleetstate.OutcomeFailed
	}
	return false
}

// notify runs command (through sh -c) with each notable event of sub as
// JSON on its standard input, until the subscription ends. Each run is
// bounded by notifyTimeout, at most notifyRuns run at once, and failures
// are logged: the fleet never waits for a notification.
func notify(ctx context.Context, log *slog.Logger, command string, sub *fleetstate.Subscription) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, notifyRuns)
	dropped := 0
	for e := range sub.Events() {
		if !notifies(e) {
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			dropped++
			log.Warn("fleetstate: notification dropped: too many running", "kind", e.Kind, "dropped", dropped)
			continue
		}
		data, _ := json.Marshal(e)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			rctx, cancel := context.WithTimeout(ctx, notifyTimeout)
			defer cancel()
			cmd := exec.CommandContext(rctx, "sh", "-c", command)
			cmd.Stdin = bytes.NewReader(data)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				log.Warn("fleetstate: notification command failed", "kind", e.Kind, "err", err, "stderr", lastLine(stderr.String()))
			}
		}()
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	s = s[strings.LastIndexByte(s, '\n')+1:]
	return s[:min(len(s), 200)]
}
