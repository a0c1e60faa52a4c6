package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/procgroup"
	"github.com/fleetstate/fleetstate/internal/textsafe"
)

// logInput is how many characters of a permission request's input, or
// of its decision's message, an event's log line holds.
const logInput = 200

// logEvents writes each event of sub to log as one structured line, until
// the subscription ends. A gap (the logger fell behind) is logged too.
func logEvents(log *slog.Logger, sub *fleetstate.Subscription) {
	for e := range sub.Events() {
		if e.Gap > 0 {
			log.Warn("fleetstate: events not logged: the log fell behind", "missed", e.Gap)
		}
		logEvent(log, e)
	}
}

// logEvent writes e to log as one structured line.
func logEvent(log *slog.Logger, e fleetstate.Event) {
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
	if p := e.Permission; p != nil {
		// What was asked, escaped and clipped: a log line stays one
		// line, and shows what a terminal would hide.
		attrs = append(attrs, "request", p.ID, "tool", textsafe.Clip(p.Tool, 60),
			"input", textsafe.Clip(agent.MainInput(p.Tool, p.Input), logInput))
		if d := p.Decision; d != nil {
			attrs = append(attrs, "behavior", d.Behavior)
		}
		by := e.By
		if by == "" && p.Decision != nil {
			by = p.Decision.By
		}
		if by != "" {
			attrs = append(attrs, "by", textsafe.Clip(by, 60))
		}
		if e.Content != "" {
			attrs = append(attrs, "message", textsafe.Clip(e.Content, logInput))
		}
	}
	switch e.Kind {
	case fleetstate.EventMergeRequested, fleetstate.EventMerged, fleetstate.EventMergeRefused:
		attrs = append(attrs, "by", textsafe.Clip(e.By, 60), "message", textsafe.Clip(e.Content, logInput))
	case fleetstate.EventBudgetSet, fleetstate.EventBudgetWarning, fleetstate.EventBudgetExhausted:
		if b := e.Budget; b != nil {
			attrs = append(attrs, "budget", b.Budget.String(), "spent", b.Spent)
		}
	}
	log.Info("fleetstate: event", attrs...)
}

// Bounds of the notification command.
const (
	// notifyTimeout bounds a run: at the bound, the command and every
	// process in its process group are killed, and what still holds its
	// pipes is no longer read or written (Config.notifyTimeout in tests).
	notifyTimeout = 10 * time.Second
	notifyRuns    = 4       // runs at once; events past that are dropped, and counted
	notifyStderr  = 4 << 10 // the last bytes of a run's standard error kept for the log
)

// notifies reports whether e is one that people want to hear of: a member
// asks a question or a permission, turns BLOCKED, a detached ticket
// finishes, a turn fails, a merge is done or refused.
func notifies(e fleetstate.Event) bool {
	switch e.Kind {
	case fleetstate.EventAsked, fleetstate.EventPermissionRequested, fleetstate.EventMerged, fleetstate.EventMergeRefused,
		fleetstate.EventBudgetWarning, fleetstate.EventBudgetExhausted:
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
// bounded by bound (see runNotify), at most notifyRuns run at once, and
// failures are logged: the fleet never waits for a notification.
func notify(ctx context.Context, log *slog.Logger, command string, bound time.Duration, sub *fleetstate.Subscription) {
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
		wg.Go(func() {
			stderr, err := runNotify(ctx, command, data, bound)
			<-slots // free before the failure is logged
			if err != nil {
				log.Warn("fleetstate: notification command failed", "kind", e.Kind, "err", err, "stderr", lastLine(stderr))
			}
		})
	}
}

// runNotify runs command through sh -c, in a process group of its own,
// with data on its standard input, and returns the tail of its standard
// error. A run ends when the command has exited and its pipes are closed
// (by every process it left behind, too), or at the bound, or when ctx
// ends: the whole process group is then killed, and the pipes are closed
// on this side, so that a process that left the group and holds them
// cannot keep the run going either. A process the command left behind
// with its pipes closed is not waited for.
func runNotify(ctx context.Context, command string, data []byte, bound time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	inR, inW, err := os.Pipe()
	if err != nil {
		return "", err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return "", err
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Stdin, cmd.Stderr = inR, errW // the standard output goes to the null device
	procgroup.Own(cmd)
	err = cmd.Start()
	inR.Close() // the command's ends: it has its own copies
	errW.Close()
	if err != nil {
		inW.Close()
		errR.Close()
		return "", err
	}
	// The pipes are this side's own, not exec's, so that Wait waits for
	// the command alone and the bound can stop their reading and writing.
	written, read, exited := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(written)
		_, _ = inW.Write(data) // fails if the command does not read it all
		inW.Close()
	}()
	var tail tailBuffer
	go func() {
		defer close(read)
		_, _ = io.Copy(&tail, errR) // until every holder closed it, or this side did
	}()
	go func() { exited <- cmd.Wait() }()
	var runErr error
	for in, out, exit := written, read, exited; in != nil || out != nil || exit != nil; {
		select {
		case <-in:
			in = nil
		case <-out:
			out = nil
		case runErr = <-exit:
			exit = nil
		case <-ctx.Done():
			procgroup.Kill(cmd.Process)
			inW.Close()
			errR.Close()
			if exit != nil {
				<-exit
			}
			<-written
			<-read
			return tail.String(), fmt.Errorf("daemon: notification command killed with its process group: %w", ctx.Err())
		}
	}
	errR.Close()
	return tail.String(), runErr
}

// tailBuffer keeps the last notifyStderr bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - notifyStderr; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	s = s[strings.LastIndexByte(s, '\n')+1:]
	return s[:min(len(s), 200)]
}
