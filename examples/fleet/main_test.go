package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the example starts, its members' and the rendezvous's,
// must have ended when run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	if err := run(&out, dir); err != nil {
		t.Fatalf("run: %v\ntranscript:\n%s", err, out.String())
	}
	transcript := out.String()
	for _, want := range []string{
		// blocking send
		"lead:     scout replied: 12 Go files\n",
		// clarification answered by turn ID
		"lead:     builder asks: which version?\n",
		"builder:  answer: v1.4.0\n",
		"lead:     builder replied: tagged v1.4.0\n",
		// detached ticket, collected and acked
		"lead:     read auditor/reports/error-codes.md: \"every code is documented\\n\"\n",
		"lead:     acked the ticket; 0 tickets left\n",
		"fleet:    closed; every member has stopped\n",
	} {
		if !strings.Contains(transcript, want) {
			t.Errorf("transcript lacks %q\ntranscript:\n%s", want, transcript)
		}
	}
	// The auditor's loop may or may not be waiting in Next when the ticket
	// is sent: delivered at once (working) or queued until it asks.
	if !strings.Contains(transcript, "lead:     detached to auditor: pending, state queued\n") &&
		!strings.Contains(transcript, "lead:     detached to auditor: pending, state working\n") {
		t.Errorf("transcript lacks the detached send, queued or working\ntranscript:\n%s", transcript)
	}
	if !strings.Contains(transcript, "lead:     auditor's ticket is done: fsm::file::") {
		t.Errorf("transcript lacks the auditor's reply on its ticket\ntranscript:\n%s", transcript)
	}
	// The run leaves its state in dir: the auditor's report, and no turn
	// records, since every outcome reached the lead and the ticket was acked.
	reports, err := filepath.Glob(filepath.Join(dir, "*", "auditor", "reports", "error-codes.md"))
	if err != nil || len(reports) != 1 {
		t.Errorf("report files in %s: %v, %v; want one", dir, reports, err)
	}
	turns, err := filepath.Glob(filepath.Join(dir, ".fleetstate", "rendezvous", "turns", "*"))
	if err != nil || len(turns) != 0 {
		t.Errorf("turn records left: %v, %v; want none", turns, err)
	}
}

// Without a directory, run works in a temporary one and removes it.
func TestRunTemporaryDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out strings.Builder
	if err := run(&out, ""); err != nil {
		t.Fatalf("run: %v\ntranscript:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "builder replied: tagged v1.4.0") {
		t.Errorf("transcript:\n%s", out.String())
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("run left %v in the temporary directory", left)
	}
}
