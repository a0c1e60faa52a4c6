package modelserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The lines that open and close a script. Each must stand alone on its
// line; spaces around it are ignored.
const (
	ScriptOpen  = "[[script]]"
	ScriptClose = "[[end]]"
)

// StepKind is the verb that starts a script line.
type StepKind string

// The kinds of step.
const (
	// StepBash runs its Command through the agent's shell tool.
	StepBash StepKind = "bash"
	// StepTool calls the MCP tool Tool with the arguments Args.
	StepTool StepKind = "tool"
	// StepSay answers Text and ends the turn.
	StepSay StepKind = "say"
	// StepUsage sets the usage that the answers to the steps after it
	// report. It is not an action: the agent never sees it.
	StepUsage StepKind = "usage"
)

// Step is one line of a script.
type Step struct {
	Kind StepKind
	// Line is the step's line number, 1 for the line after [ScriptOpen].
	Line int
	// Command is the shell command of a [StepBash].
	Command string
	// Tool is the MCP tool's name of a [StepTool], without any prefix
	// (fleet_reply, not mcp__fleetstate__fleet_reply).
	Tool string
	// Args is the JSON object of arguments of a [StepTool].
	Args json.RawMessage
	// Text is the answer of a [StepSay].
	Text string
	// Usage is the usage of a [StepUsage].
	Usage Usage
}

// Script is the parsed script of a user message.
type Script struct {
	// Steps are the script's steps in order, usage steps included.
	Steps []Step
}

// Actions returns the steps that answer a request: all but the usage
// steps, in order. The n-th action answers the request that follows n
// completed actions.
func (s Script) Actions() []Step {
	var out []Step
	for _, st := range s.Steps {
		if st.Kind != StepUsage {
			out = append(out, st)
		}
	}
	return out
}

// usageBefore returns the usage in force for the n-th action: that of the
// last usage step before it (before the end of the script where n is past
// the last action), or def where there is none.
func (s Script) usageBefore(n int, def Usage) Usage {
	u := def
	actions := 0
	for _, st := range s.Steps {
		if st.Kind == StepUsage {
			u = st.Usage
			continue
		}
		if actions == n {
			break
		}
		actions++
	}
	return u
}

// FindScript returns the script held in text: the lines between the first
// line that is [ScriptOpen] and the next line that is [ScriptClose] (or the
// end of text). Lines are split at real line breaks only, so a script
// carried inside a JSON string of a step (where a line break is the two
// characters \n) stays that step's text. ok reports whether text holds a
// script; err describes its first malformed line.
func FindScript(text string) (s Script, ok bool, err error) {
	lines := strings.Split(text, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == ScriptOpen {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return Script{}, false, nil
	}
	for i, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if l == ScriptClose {
			break
		}
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		st, err := parseStep(l)
		if err != nil {
			return s, true, fmt.Errorf("modelserver: script line %d %q: %w", i+1, l, err)
		}
		st.Line = i + 1
		s.Steps = append(s.Steps, st)
	}
	return s, true, nil
}

// parseStep parses one non-empty, trimmed script line.
func parseStep(l string) (Step, error) {
	verb, rest, _ := strings.Cut(l, " ")
	rest = strings.TrimSpace(rest)
	switch StepKind(verb) {
	case StepBash:
		if rest == "" {
			return Step{}, fmt.Errorf("bash needs a command")
		}
		return Step{Kind: StepBash, Command: rest}, nil
	case StepSay:
		return Step{Kind: StepSay, Text: rest}, nil
	case StepTool:
		name, args, _ := strings.Cut(rest, " ")
		if name == "" {
			return Step{}, fmt.Errorf("tool needs a name")
		}
		args = strings.TrimSpace(args)
		if args == "" {
			args = "{}"
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(args), &obj); err != nil {
			return Step{}, fmt.Errorf("tool %s: arguments are not a JSON object: %v", name, err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(args)); err != nil {
			return Step{}, err
		}
		return Step{Kind: StepTool, Tool: name, Args: json.RawMessage(buf.Bytes())}, nil
	case StepUsage:
		f := strings.Fields(rest)
		if len(f) < 2 || len(f) > 4 {
			return Step{}, fmt.Errorf("usage needs IN OUT [CACHE_READ [CACHE_CREATION]]")
		}
		var n [4]int
		for i, s := range f {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return Step{}, fmt.Errorf("usage: %q is not a count of tokens", s)
			}
			n[i] = v
		}
		return Step{Kind: StepUsage, Usage: Usage{InputTokens: n[0], OutputTokens: n[1], CacheReadTokens: n[2], CacheCreationTokens: n[3]}}, nil
	}
	return Step{}, fmt.Errorf("unknown step %q (want bash, tool, say or usage)", verb)
}
