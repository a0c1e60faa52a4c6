package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
)

// A permission event's log line says what was asked, escaped, how it
// ended and by whom, on one line.
func TestLogEventsPermission(t *testing.T) {
	for _, c := range []struct {
		name string
		e    fleetstate.Event
		want []string
	}{
		{"denied by a lead", fleetstate.Event{Kind: fleetstate.EventPermissionDecided, Member: "scout", By: "lead-a", Content: "not\nthere",
			Permission: &fleetstate.PermissionRequest{ID: "perm-1", Tool: "Bash", Input: `{"command":"git status\n\n; rm -rf ~"}`,
				Decision: &fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, By: "lead-a"}}},
			[]string{`input="git status\\n\\n; rm -rf ~"`, "behavior=deny", "by=lead-a", `message=not\nthere`}},
		{"expired", fleetstate.Event{Kind: fleetstate.EventPermissionExpired, Member: "scout", By: "timeout", Content: "its window passed undecided",
			Permission: &fleetstate.PermissionRequest{ID: "perm-2", Tool: "Read", Input: `{"file_path":"a.go"}`}},
			[]string{"input=a.go", "by=timeout", `message="its window passed undecided"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			logEvent(log, c.e)
			got := buf.String()
			if strings.Count(got, "\n") != 1 {
				t.Errorf("got %d lines; want one:\n%s", strings.Count(got, "\n"), got)
			}
			for _, want := range c.want {
				if !strings.Contains(got, want) {
					t.Errorf("the line lacks %s:\n%s", want, got)
				}
			}
		})
	}
}
