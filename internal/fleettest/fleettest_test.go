package fleettest

import (
	"errors"
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
	n = 0
	start := time.Now()
	if Until(20*time.Millisecond, 5*time.Millisecond, func() bool { n++; return false }) {
		t.Fatal("Until of a condition never met = true")
	}
	if d := time.Since(start); d < 20*time.Millisecond || n < 2 {
		t.Fatalf("Until gave up after %v and %d calls; want the whole 20 ms, calls before and after", d, n)
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
