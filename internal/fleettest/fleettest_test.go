package fleettest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Second, 0, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Until met after %d calls; want true after 3", n)
	}
	start := time.Now()
	var last time.Duration
	if Until(20*time.Millisecond, 5*time.Millisecond, func() bool { last = time.Since(start); return false }) {
		t.Fatal("Until of a condition never met = true")
	}
	if last < 20*time.Millisecond {
		t.Fatalf("Until gave up after a call %v in; want a last call after the whole 20 ms", last)
	}
}

func TestBearer(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Authorization") }))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Basic old")
	resp, err := (&http.Client{Transport: Bearer{Token: "fst_x", Base: tr}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := <-got; a != "Bearer fst_x" {
		t.Errorf("Authorization %q; want Bearer fst_x", a)
	}
	if a := req.Header.Get("Authorization"); a != "Basic old" {
		t.Errorf("the caller's request was changed: Authorization %q", a)
	}
}

func TestFaultFS(t *testing.T) {
	f := NewFaultFS(afero.NewMemMapFs())
	f.Fail(OpCreate, "/full/", syscall.ENOSPC)
	if _, err := f.Create("/ok/a"); err != nil {
		t.Fatalf("Create off the rule's path: %v", err)
	}
	if _, err := f.Create("/full/a"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Create on the rule's path: %v; want ENOSPC", err)
	}
	if n := f.Injected(OpCreate); n != 1 {
		t.Fatalf("Injected(create) = %d; want 1", n)
	}
	f.FailShort("/ok/", 2, syscall.ENOSPC)
	file, err := f.OpenFile("/ok/a", os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := file.Write([]byte("hello")); n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("short write = %d, %v; want 2, ENOSPC", n, err)
	}
	file.Close()
	f.Clear()
	if _, err := f.Create("/full/a"); err != nil {
		t.Fatalf("Create after Clear: %v", err)
	}
}

// A cut transport dials again; a killed one never does.
func TestCuttableKill(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := NewCuttable()
	defer c.CloseIdleConnections()
	client := &http.Client{Transport: c}
	get := func() error {
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	c.Cut()
	if err := get(); err != nil {
		t.Fatalf("a request after Cut: %v; want a new connection", err)
	}
	c.Kill()
	if err := get(); !errors.Is(err, errKilled) {
		t.Fatalf("a request after Kill: %v; want %v", err, errKilled)
	}
}

// FreePort gives a port outside the system's ephemeral range that can be
// bound.
func TestFreePort(t *testing.T) {
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if p < 20000 || p >= 32000 {
		t.Fatalf("port %d; want one in 20000-31999", p)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("the free port %d: %v", p, err)
	}
	l.Close()
}

func TestDeadAddrRefusesAndStaysTaken(t *testing.T) {
	addr := DeadAddr(t)
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Fatalf("a connection to %s was accepted; want it refused", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v; want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("another listener could bind %s", addr)
	}
}
