package fleetstate

import "strings"

// HookEvent is the JSON a coding agent's lifecycle hook passes on standard
// input (Claude Code's hooks do). Only the fields fleetstate reads are
// here.
type HookEvent struct {
	Name    string `json:"hook_event_name"`
	Message string `json:"message"`
}

// StatusOfHook maps a hook event onto the [Status] it stands for: a prompt
// submitted or a tool used means WORKING, a stop or a session start IDLE,
// a notification that asks for permission BLOCKED (other notifications,
// such as waiting for input, IDLE). ok is false for events that say
// nothing of the status.
func StatusOfHook(ev HookEvent) (st Status, ok bool) {
	switch ev.Name {
	case "UserPromptSubmit", "PreToolUse", "PostToolUse":
		return StatusWorking, true
	case "Stop", "SessionStart":
		return StatusIdle, true
	case "Notification":
		if strings.Contains(strings.ToLower(ev.Message), "permission") {
			return StatusBlocked, true
		}
		return StatusIdle, true
	}
	return StatusUnknown, false
}
