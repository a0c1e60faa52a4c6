// Package agent holds what fleetstate knows of particular coding agents
// rather than of fleets: how Claude Code's lifecycle hook events map onto a
// member's status, and the heuristics that read a member's pane tail (an
// exhausted backend, a brief echoed back). They change when the agents
// change, not when the library's contract does.
package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// HookEvent is the JSON a coding agent's lifecycle hook passes on standard
// input (Claude Code's hooks do). Only the fields fleetstate reads are
// here.
type HookEvent struct {
	Name    string `json:"hook_event_name"`
	Message string `json:"message"`
	// Transcript is the path of the session's transcript, where the CLI
	// records each model call's usage (see internal/usage).
	Transcript string `json:"transcript_path"`
	// TurnID is Codex's: Claude Code's events carry none.
	TurnID string `json:"turn_id"`
	// ToolUseID names the tool call of a PreToolUse event.
	ToolUseID string `json:"tool_use_id"`
}

// IsCodex reports whether Codex sent ev (its events carry a turn_id),
// rather than Claude Code. The two record the model call that fired a
// hook differently: Claude Code writes it to its transcript after the
// hook has started, tens of milliseconds later (more on a loaded
// machine); Codex writes the usage record of the call that asked for a
// tool about when the hook before the tool starts.
func IsCodex(ev HookEvent) bool { return ev.TurnID != "" }

// UsageMayHaveGrown reports whether a model call may have been recorded
// in the transcript since the hook event before ev: before a tool runs
// (the call that asked for it) and at a stop (the turn's last call).
func UsageMayHaveGrown(ev HookEvent) bool { return ev.Name == "PreToolUse" || ev.Name == "Stop" }

// Status names, as fleetstate.ParseStatus reads them.
const (
	StatusIdle    = "IDLE"
	StatusWorking = "WORKING"
	StatusBlocked = "BLOCKED"
)

// StatusOfHook maps a hook event of Claude Code or Codex onto the status
// it stands for: a prompt submitted or a tool used means WORKING, a stop
// or a session start IDLE, a permission request, and a notification that
// asks for permission, BLOCKED (other notifications, such as waiting for
// input, IDLE). ok is false for events that say nothing of the status.
func StatusOfHook(ev HookEvent) (status string, ok bool) {
	switch ev.Name {
	case "UserPromptSubmit", "PreToolUse", "PostToolUse":
		return StatusWorking, true
	case "Stop", "SessionStart":
		return StatusIdle, true
	case "PermissionRequest":
		return StatusBlocked, true // until decided: the tool's use then says WORKING
	case "Notification":
		if strings.Contains(strings.ToLower(ev.Message), "permission") {
			return StatusBlocked, true
		}
		return StatusIdle, true
	}
	return "", false
}

// Screen patterns of the coding-agent CLIs fleetstate up starts, matched
// (multi-line) against the last lines of an agent's screen: blocked
// first, then working, then idle. They belong to the versions named in
// [TestedVersions], and are held by screens captured from those
// versions (testdata/screens).
//
// Blocked matches every question a CLI asks in its terminal: its
// permission prompts, its first-run questions, and any list of numbered
// choices or "Enter to confirm" a new version adds, so that a screen
// nobody foresaw reads BLOCKED rather than idle. Idle matches the empty
// input line only.
var screenPatterns = map[string]ScreenPatterns{
	"claude": {
		Working: []string{`esc to interrupt`},
		Blocked: []string{
			`Do you want to (proceed|make this edit|create|allow)`,
			`Is this a project you created or one you trust\?`,
			`Enter to confirm`,
			`^\s*❯[ \x{a0}]\d+\. `,
		},
		// The input line under a rule ("❯" and a no-break space); "│ > "
		// is the older box.
		Idle: []string{`^─{20,}\s*\n❯[ \x{a0}]`, `^│ > `},
	},
	"codex": {
		Working: []string{`esc to interrupt`},
		Blocked: []string{
			`Would you like to (run|make|allow)`,
			`Trust this folder\?`,
			`Hooks need review`,
			// A screen's footer ("enter confirm · esc skip", "Press enter
			// to confirm or esc to cancel"), not a tip that says "Enter
			// confirms." in passing.
			`(?i)^\s*(press )?enter (to )?(confirm|continue)\b.*\besc\b`,
			`^\s*› \d+\. `,
		},
		// The input line: "› " and text that is not a numbered choice.
		Idle: []string{`^› (\D|$)`},
	},
}

// ScreenPatterns are the regular expressions that read a program's
// status off its screen.
type ScreenPatterns struct {
	Working, Blocked, Idle []string
}

// InterruptCommands returns what is typed into program's terminal, after
// the Escape that interrupts its turn, to stop what the turn left running:
// Codex keeps an interrupted turn's commands running in the background
// until /stop.
func InterruptCommands(program string) []string {
	if program == "codex" {
		return []string{"/stop"}
	}
	return nil
}

// ScreenPatternsOf returns the built-in screen patterns of program
// ("claude" or "codex"); ok is false for any other program.
func ScreenPatternsOf(program string) (p ScreenPatterns, ok bool) {
	p, ok = screenPatterns[program]
	return ScreenPatterns{slices.Clone(p.Working), slices.Clone(p.Blocked), slices.Clone(p.Idle)}, ok
}

// The versions of the coding-agent CLIs whose screens and hooks this
// package knows: the versions the real-agent tests install
// (internal/fleettest/realagent pins its npm packages to them).
const (
	ClaudeCodeVersion = "2.1.328" // npm @anthropic-ai/claude-code
	CodexVersion      = "0.169.0" // npm @openai/codex
)

// ExhaustedPatterns returns the patterns, to be matched case-insensitively
// against a member's pane tail, that mean its backend cannot work: spent
// credit, usage limits, rejected keys. The slice is a fresh copy.
func ExhaustedPatterns() []string {
	return []string{
		`credit balance is too low`,
		`out of credits?`,
		`insufficient[_ ]quota`,
		`quota exceeded`,
		// A limit reached ("Claude usage limit reached", "You've hit your
		// usage limit"); not Codex's tip "check your account usage and
		// access available usage limit resets".
		`usage limit (reached|exceeded)|(hit|reached) your usage limit|(5-hour|weekly|daily) limit reached`,
		`rate limit (reached|exceeded)`,
		`invalid api key`,
		`invalid[_ ]x?-?api[_ -]key`,
		`authentication[_ ]error`,
		`please run /login`,
		// Anthropic's "go to Plans & Billing", OpenAI's "check your plan
		// and billing details"; not Claude Code's banner, "API Usage
		// Billing", on every screen of a key's user.
		`plans? (&|and) billing`,
	}
}

// Exhausted is a compiled set of exhausted patterns.
type Exhausted []*regexp.Regexp

// CompileExhausted compiles patterns to be matched case-insensitively;
// its error names the first that does not compile.
func CompileExhausted(patterns []string) (Exhausted, error) {
	e := make(Exhausted, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile("(?i)" + p)
		if err != nil {
			return nil, fmt.Errorf("exhausted pattern %q: %w", p, err)
		}
		e = append(e, re)
	}
	return e, nil
}

// Match reports whether tail matches one of the patterns.
func (e Exhausted) Match(tail string) bool {
	for _, re := range e {
		if re.MatchString(tail) {
			return true
		}
	}
	return false
}

// Triage names what a turn that ended without a reply left in the pane
// tail, given the brief it was sent: "backend_exhausted" when the tail
// matches one of the patterns (the member could not work at all),
// "echoed_brief" when the tail is essentially the brief (the member never
// started, and the brief must not pass for its report), and "" for an
// ordinary end of turn.
func (e Exhausted) Triage(brief, tail string) string {
	switch {
	case e.Match(tail):
		return "backend_exhausted"
	case EchoesBrief(brief, tail):
		return "echoed_brief"
	}
	return ""
}

// echoThreshold is the share of a tail's text that must come from the brief
// for the tail to count as the brief echoed back.
const echoThreshold = 0.9

// EchoesBrief reports whether tail is essentially brief: at least nine
// tenths of the tail's characters sit on lines that are part of the brief,
// once prompt marks, box drawing and runs of spaces are dropped. A
// terminal wraps long lines, so a tail line that is any piece of the brief
// counts.
func EchoesBrief(brief, tail string) bool {
	nb := normalizeLine(brief)
	if len(nb) == 0 {
		return false
	}
	total, fromBrief := 0, 0
	for line := range strings.SplitSeq(tail, "\n") {
		nl := normalizeLine(line)
		if nl == "" {
			continue
		}
		total += len(nl)
		if strings.Contains(nb, nl) {
			fromBrief += len(nl)
		}
	}
	return total > 0 && float64(fromBrief) >= echoThreshold*float64(total)
}

// normalizeLine drops what a terminal adds around text (prompt marks, box
// drawing, cursor blocks) and collapses white space, so that text compares
// as text.
func normalizeLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case r == '>' || r == '❯' || r == '›' || r == '$' || r == '█' || r == '▌' ||
			(r >= 0x2500 && r <= 0x257F): // box drawing
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// MainInput returns what a person, and an approval rule, reads first of
// a Claude Code tool's input, given as JSON text: the command of Bash,
// the file of Read, Edit, MultiEdit and Write, the notebook of
// NotebookEdit, the URL of WebFetch; for any other tool, or an input
// without that field, the input as it is.
func MainInput(tool, input string) string {
	var field string
	switch tool {
	case "Bash":
		field = "command"
	case "Read", "Edit", "MultiEdit", "Write":
		field = "file_path"
	case "NotebookEdit":
		field = "notebook_path"
	case "WebFetch":
		field = "url"
	default:
		return input
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(input), &m) != nil {
		return input
	}
	var s string
	if json.Unmarshal(m[field], &s) != nil {
		return input
	}
	return s
}
