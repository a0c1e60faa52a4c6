package fleetstate_test

import (
	"testing"

	"github.com/fleetstate/fleetstate"
)

func TestStatusOfHook(t *testing.T) {
	tests := []struct {
		name string
		ev   fleetstate.HookEvent
		want fleetstate.Status
		ok   bool
	}{
		{"prompt", fleetstate.HookEvent{Name: "UserPromptSubmit"}, fleetstate.StatusWorking, true},
		{"before a tool", fleetstate.HookEvent{Name: "PreToolUse"}, fleetstate.StatusWorking, true},
		{"after a tool", fleetstate.HookEvent{Name: "PostToolUse"}, fleetstate.StatusWorking, true},
		{"stop", fleetstate.HookEvent{Name: "Stop"}, fleetstate.StatusIdle, true},
		{"session start", fleetstate.HookEvent{Name: "SessionStart"}, fleetstate.StatusIdle, true},
		{"permission", fleetstate.HookEvent{Name: "Notification", Message: "Claude needs your Permission to use Bash"}, fleetstate.StatusBlocked, true},
		{"waiting for input", fleetstate.HookEvent{Name: "Notification", Message: "Claude is waiting for your input"}, fleetstate.StatusIdle, true},
		{"other event", fleetstate.HookEvent{Name: "SubagentStop"}, fleetstate.StatusUnknown, false},
		{"no event", fleetstate.HookEvent{}, fleetstate.StatusUnknown, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fleetstate.StatusOfHook(tc.ev)
			if got != tc.want || ok != tc.ok {
				t.Errorf("StatusOfHook(%+v) = %v, %v; want %v, %v", tc.ev, got, ok, tc.want, tc.ok)
			}
		})
	}
}
