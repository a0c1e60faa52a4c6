package agent

import (
	"strings"
	"testing"
)

func TestStatusOfHook(t *testing.T) {
	tests := []struct {
		name string
		ev   HookEvent
		want string
		ok   bool
	}{
		{"prompt", HookEvent{Name: "UserPromptSubmit"}, StatusWorking, true},
		{"before a tool", HookEvent{Name: "PreToolUse"}, StatusWorking, true},
		{"after a tool", HookEvent{Name: "PostToolUse"}, StatusWorking, true},
		{"stop", HookEvent{Name: "Stop"}, StatusIdle, true},
		{"session start", HookEvent{Name: "SessionStart"}, StatusIdle, true},
		{"permission", HookEvent{Name: "Notification", Message: "Claude needs your Permission to use Bash"}, StatusBlocked, true},
		{"waiting for input", HookEvent{Name: "Notification", Message: "Claude is waiting for your input"}, StatusIdle, true},
		{"other event", HookEvent{Name: "SubagentStop"}, "", false},
		{"no event", HookEvent{}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := StatusOfHook(tc.ev)
			if got != tc.want || ok != tc.ok {
				t.Errorf("StatusOfHook(%+v) = %q, %v; want %q, %v", tc.ev, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestEchoesBrief(t *testing.T) {
	brief := "Refactor the parser so that it reports the line of each error."
	tests := []struct {
		name, brief, tail string
		want              bool
	}{
		{"brief alone", brief, "> " + brief, true},
		{"brief wrapped in a box", brief, "│ > Refactor the parser so that it │\n│ reports the line of each error. │", true},
		{"brief then work", brief, "> " + brief + "\nRead parser.go, changed 40 lines, all tests pass, committed as abc123.", false},
		{"other text", brief, "Done: the parser now reports lines.", false},
		{"empty tail", brief, "", false},
		{"empty brief", "", "anything", false},
		{"prompt marks only", brief, "❯ \n$ ", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EchoesBrief(tc.brief, tc.tail); got != tc.want {
				t.Errorf("EchoesBrief(%q, %q) = %v; want %v", tc.brief, tc.tail, got, tc.want)
			}
		})
	}
}

// TestMainInput: the field a person and an approval rule read first of a
// tool's input, or the input whole.
func TestMainInput(t *testing.T) {
	for _, c := range []struct{ tool, input, want string }{
		{"Bash", `{"command":"go test ./...","timeout":5}`, "go test ./..."},
		{"Edit", `{"file_path":"a.go","old_string":"x"}`, "a.go"},
		{"NotebookEdit", `{"notebook_path":"n.ipynb"}`, "n.ipynb"},
		{"WebFetch", `{"url":"https://example.com"}`, "https://example.com"},
		{"Grep", `{"pattern":"x"}`, `{"pattern":"x"}`},
		{"Bash", `{"cmd":"ls"}`, `{"cmd":"ls"}`},
		{"Bash", `not json`, `not json`},
		{"Bash", `{"command":7}`, `{"command":7}`},
	} {
		if got := MainInput(c.tool, c.input); got != c.want {
			t.Errorf("MainInput(%s, %s) = %q; want %q", c.tool, c.input, got, c.want)
		}
	}
}

func TestExhaustedMatchesAnyCase(t *testing.T) {
	e, err := CompileExhausted(ExhaustedPatterns())
	if err != nil {
		t.Fatal(err)
	}
	for _, spent := range []string{"Error: Credit balance is too low", "Please go to Plans & Billing to upgrade or purchase credits.",
		"You exceeded your current quota, please check your plan and billing details."} {
		if !e.Match(spent) {
			t.Errorf("%q does not read as a spent backend", spent)
		}
	}
	for _, limit := range []string{"Claude usage limit reached. Your limit will reset at 3pm", "You've hit your usage limit. Try again at 4:05 PM.",
		"5-hour limit reached ∙ resets 3pm"} {
		if !e.Match(limit) {
			t.Errorf("%q does not read as a spent backend", limit)
		}
	}
	for _, fine := range []string{"Opus 5.5 · API Usage Billing",
		// A tip Codex 0.169.0 shows at random, which ended a real turn
		// as backend_exhausted.
		"Tip: use /usage to check your account usage and access available usage limit resets"} {
		if e.Match(fine) {
			t.Errorf("%q reads as a spent backend", fine)
		}
	}
	if !e.Match("Error: Credit balance is too low") || e.Match("all tests pass") {
		t.Error("the default patterns do not tell a spent backend from a report")
	}
	if _, err := CompileExhausted([]string{"ok", "(unclosed"}); err == nil || !strings.Contains(err.Error(), `"(unclosed"`) {
		t.Errorf("a bad pattern gave %v; want an error that names it", err)
	}
}
