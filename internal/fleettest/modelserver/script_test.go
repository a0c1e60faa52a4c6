package modelserver_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate/internal/fleettest/modelserver"
)

func TestFindScript(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		ok      bool
		want    []modelserver.Step
		wantErr string
	}{
		{name: "none", text: "just do it"},
		{name: "open inside a line", text: "see [[script]] here\nbash ls\n[[end]]"},
		{
			name: "every kind",
			text: "Please.\n[[script]]\n  bash echo hi > out.txt  \n\n# a comment\ntool fleet_reply {\"text\": \"a b\"}\nusage 7 3\nsay all done\n[[end]]\nbash not this",
			ok:   true,
			want: []modelserver.Step{
				{Kind: modelserver.StepBash, Line: 1, Command: "echo hi > out.txt"},
				{Kind: modelserver.StepTool, Line: 4, Tool: "fleet_reply", Args: json.RawMessage(`{"text":"a b"}`)},
				{Kind: modelserver.StepUsage, Line: 5, Usage: modelserver.Usage{InputTokens: 7, OutputTokens: 3}},
				{Kind: modelserver.StepSay, Line: 6, Text: "all done"},
			},
		},
		{
			name: "nested script in a JSON string",
			text: "[[script]]\ntool fleet_send {\"to\":\"alice\",\"content\":\"[[script]]\\nbash ls\\n[[end]]\"}\n[[end]]",
			ok:   true,
			want: []modelserver.Step{{Kind: modelserver.StepTool, Line: 1, Tool: "fleet_send",
				Args: json.RawMessage(`{"to":"alice","content":"[[script]]\nbash ls\n[[end]]"}`)}},
		},
		{
			name: "no end and no arguments",
			text: "[[script]]\ntool fleet_status\nusage 1 2 3 4",
			ok:   true,
			want: []modelserver.Step{
				{Kind: modelserver.StepTool, Line: 1, Tool: "fleet_status", Args: json.RawMessage(`{}`)},
				{Kind: modelserver.StepUsage, Line: 2, Usage: modelserver.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheCreationTokens: 4}},
			},
		},
		{name: "the first script of several", text: "[[script]]\nsay one\n[[end]]\n[[script]]\nsay two\n[[end]]", ok: true,
			want: []modelserver.Step{{Kind: modelserver.StepSay, Line: 1, Text: "one"}}},
		{name: "unknown verb", text: "[[script]]\nrun ls\n[[end]]", ok: true, wantErr: `unknown step "run"`},
		{name: "arguments not an object", text: "[[script]]\ntool x [1]\n[[end]]", ok: true, wantErr: "not a JSON object"},
		{name: "bash without command", text: "[[script]]\nbash\n[[end]]", ok: true, wantErr: "bash needs a command"},
		{name: "usage not a number", text: "[[script]]\nusage 1 x\n[[end]]", ok: true, wantErr: `"x" is not a count`},
		{name: "usage too short", text: "[[script]]\nusage 1\n[[end]]", ok: true, wantErr: "usage needs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok, err := modelserver.FindScript(tt.text)
			if ok != tt.ok {
				t.Fatalf("FindScript ok = %v; want %v", ok, tt.ok)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FindScript error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FindScript: %v", err)
			}
			if !reflect.DeepEqual(s.Steps, tt.want) {
				t.Errorf("FindScript steps:\ngot  %+v\nwant %+v", s.Steps, tt.want)
			}
		})
	}
}

func TestScriptActions(t *testing.T) {
	s, _, err := modelserver.FindScript("[[script]]\nusage 1 1\nbash a\nsay b\nusage 2 2\n[[end]]")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range s.Actions() {
		got = append(got, string(st.Kind))
	}
	if want := []string{"bash", "say"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Actions() kinds = %v; want %v", got, want)
	}
}
