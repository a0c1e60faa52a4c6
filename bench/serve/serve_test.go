package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the harness briefly on the file backend and on the daemon's
// own NATS node: both come up, their round trips return the member's
// reply (measure checks each), and the table has a row for each with a
// ratio to the file backend's.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fleetstate and starts daemons")
	}
	var out strings.Builder
	if err := run(&out, []string{"file", "nats-node"}, 1, 200*time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"file", "nats-node"} {
		row := regexp.MustCompile(`(?m)^\| ` + b + ` \| [1-9]\d* \| \d+ µs \| \d+ µs \| \d+\.\d\d× \| \d+\.\d\d \|$`)
		if !row.MatchString(out.String()) {
			t.Errorf("no row for %s in:\n%s", b, out.String())
		}
	}
}

// TestRunBase runs the file backend with -base on this very tree: the
// backend also runs on the base's binary as file@base, and the table has
// a row for each, file's with its ratio to file@base.
func TestRunBase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fleetstate twice and starts daemons")
	}
	var out strings.Builder
	if err := run(&out, []string{"file"}, 1, 200*time.Millisecond, "../.."); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		`(?m)^\| file \| [1-9]\d* \| \d+ µs \| \d+ µs \| 1\.00× \| 1\.00 \| \d+\.\d\d× \| \d+\.\d\d \|$`,
		`(?m)^\| file@base \| [1-9]\d* \| \d+ µs \| \d+ µs \| 1\.00× \| 1\.00 \| \| \|$`,
	} {
		if !regexp.MustCompile(row).MatchString(out.String()) {
			t.Errorf("no row matching %s in:\n%s", row, out.String())
		}
	}
}
