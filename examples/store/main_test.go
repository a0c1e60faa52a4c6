package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out, t.TempDir()); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "session ") || !strings.HasSuffix(lines[0], " (example run)") {
		t.Errorf("first line = %q; want the session with its name", lines[0])
	}
	if !strings.Contains(out.String(), "\nsecond put refused: ERR_FILE_EXISTS\n") {
		t.Errorf("output lacks the refused second put:\n%s", out.String())
	}
	var listed []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  ") {
			listed = append(listed, strings.Join(strings.Fields(l), " "))
		}
	}
	want := map[string]bool{
		"scout notes.md 29 bytes":             true,
		"builder src/plan/steps.txt 18 bytes": true,
	}
	if len(listed) != len(want) {
		t.Fatalf("listed %q; want the two files", listed)
	}
	for _, l := range listed {
		if !want[l] {
			t.Errorf("listed %q; want one of %v", l, want)
		}
	}
}
