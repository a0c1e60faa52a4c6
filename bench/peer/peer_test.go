package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// staleFloor, as the value of floorEnv, makes the test binary a floor
// server that stores every write with the stamp of the first operation,
// so that its reads return bytes other than those written.
const staleFloor = "stale"

func TestMain(m *testing.M) {
	switch os.Getenv(floorEnv) {
	case "":
		goleak.VerifyTestMain(m)
	case staleFloor:
		pr, pw := io.Pipe()
		go func() {
			stamp := regexp.MustCompile(`"content":"\d+\.\d+ `)
			in := bufio.NewReaderSize(os.Stdin, 1<<20)
			for {
				line, err := in.ReadBytes('\n')
				pw.Write(stamp.ReplaceAll(line, []byte(`"content":"0.0 `)))
				if err != nil {
					pw.CloseWithError(err)
					return
				}
			}
		}()
		if err := serveFloor(pr, os.Stdout); err != nil {
			os.Exit(1)
		}
	default:
		if err := serveFloor(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
	}
}

// floorSpec is the test binary as a floor server.
func floorSpec(t *testing.T, mode string) serverSpec {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return serverSpec{name: "floor", cmd: []string{self}, env: []string{floorEnv + "=" + mode}}
}

func TestContent(t *testing.T) {
	for _, size := range []int{1, 27, 1 << 10, 64 << 10} {
		a, b := content(size, 0, 1), content(size, 1, 0)
		if len(a) != size || len(b) != size {
			t.Errorf("content(%d, …) has %d and %d bytes; want %d", size, len(a), len(b), size)
		}
		if size >= 4 && a == b {
			t.Errorf("content(%d, 0, 1) == content(%d, 1, 0); want them to differ", size, size)
		}
	}
}

// testClients returns the clients this machine can run: the Go client, and
// the TypeScript one where Node.js and npm are installed (it installs the
// pinned SDK into the user's cache once).
func testClients(t *testing.T) []client {
	clients := []client{{name: "go", start: startGo}}
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil || nodeMajor(node) < 18 {
		t.Log("Node.js 18 or later and npm are not installed: the TypeScript client is not tested")
		return clients
	}
	driver, err := installTSDriver(npm)
	if err != nil {
		t.Fatal(err)
	}
	return append(clients, client{name: "ts", start: func(ctx context.Context, s serverSpec) (runner, error) {
		return startTS(ctx, node, driver, s)
	}})
}

// TestClients runs each client against the floor and checks that its
// measurement is one: operations counted and latencies recorded, for one
// call in flight and for several, creating and overwriting.
func TestClients(t *testing.T) {
	for _, c := range testClients(t) {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			r, err := c.start(ctx, floorSpec(t, "1"))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for _, inflight := range []int{1, 3} {
				for _, overwrite := range []bool{false, true} {
					res, err := r.measure(ctx, 1<<10, inflight, overwrite, 200*time.Millisecond)
					if err != nil {
						t.Fatalf("%d in flight, overwrite %v: %v", inflight, overwrite, err)
					}
					if res.OpsPerSec <= 0 || res.Write.P50Ms <= 0 || res.Read.P99Ms < res.Read.P50Ms {
						t.Errorf("%d in flight, overwrite %v: got %+v; want operations and latencies", inflight, overwrite, res)
					}
				}
			}
		})
	}
}

// TestStaleServerFails checks that a server whose reads do not return what
// was written fails the measurement instead of looking fast.
func TestStaleServerFails(t *testing.T) {
	for _, c := range testClients(t) {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			r, err := c.start(ctx, floorSpec(t, staleFloor))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := r.measure(ctx, 1<<10, 2, true, 200*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), "differ") {
				t.Fatalf("got %+v, %v; want an error that the read differs from the write", res, err)
			}
		})
	}
}

func TestNameList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"go,ts", "go ts", true},
		{"ts, go", "go ts", true},
		{"ts", "ts", true},
		{"go,python", "", false},
		{"", "", false},
	} {
		got, err := nameList(tc.in, []string{"go", "ts"})
		if (err == nil) != tc.ok || strings.Join(got, " ") != tc.want {
			t.Errorf("nameList(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
