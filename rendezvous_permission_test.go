package fleetstate_test

import (
	"context"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// permissionFleet returns a rendezvous on an in-memory state directory,
// and that file system, whose size is what the journal holds.
func permissionFleet(t *testing.T) (*fleetstate.Rendezvous, afero.Fs) {
	t.Helper()
	fsys := afero.NewMemMapFs()
	st, err := fleetstate.Open(fsys, "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, fsys
}

// stateBytes sums the sizes of the files under /state.
func stateBytes(t *testing.T, fsys afero.Fs) int64 {
	t.Helper()
	var n int64
	err := afero.Walk(fsys, "/state", func(_ string, fi fs.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// bigRequest is a Bash request of about size bytes of input, with key.
func bigRequest(key string, size int) fleetstate.PermissionRequest {
	return fleetstate.PermissionRequest{Key: key, Tool: "Bash", Input: `{"command":"` + strings.Repeat("<", size) + `"}`,
		Cwd: "/src", Timeout: time.Hour}
}

// A request a rule decides is forgotten at once: neither memory nor the
// journal keeps its input for its window, and its ID is then unknown.
func TestPermissionRuleDecidedNotRetained(t *testing.T) {
	r, fsys := permissionFleet(t)
	r.SetPermissionPolicy(func(fleetstate.PermissionRequest) (fleetstate.Decision, bool) {
		return fleetstate.Decision{Behavior: fleetstate.BehaviorAllow, By: "rule Bash(*)"}, true
	})
	sub, _ := r.Subscribe(256)
	defer sub.Close()
	const n, size = 32, 128 << 10
	heap0, disk0 := heapInUse(), stateBytes(t, fsys)
	for i := range n {
		d, ok, err := r.RequestPermission(context.Background(), "scout", bigRequest(fmt.Sprint("k", i), size))
		if err != nil || !ok || d.Behavior != fleetstate.BehaviorAllow {
			t.Fatalf("RequestPermission under a rule = %+v, %v, %v; want allow", d, ok, err)
		}
	}
	e := <-sub.Events()
	sub.Close() // the buffered events are the subscriber's, not the rendezvous's
	for range sub.Events() {
	}
	if e.Kind != fleetstate.EventPermissionRequested || e.Permission == nil {
		t.Fatalf("first event %+v; want the request", e)
	}
	id := e.Permission.ID
	e = fleetstate.Event{}
	if grew := heapInUse() - heap0; grew > n*size/4 {
		t.Errorf("the heap grew by %d bytes after %d rule-decided requests of %d bytes; want under %d", grew, n, size, n*size/4)
	}
	if grew := stateBytes(t, fsys) - disk0; grew > n*size/4 {
		t.Errorf("the state directory grew by %d bytes; want under %d (no record of a rule-decided request)", grew, n*size/4)
	}
	err := r.DecidePermission("operator", id, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny})
	wantCode(t, err, fleetstate.CodeUnknownRequest)
}

// A member's decided requests are bounded in number, each kept without its
// input in memory and in the journal: a re-run of the hook with a recent
// key finds its decision, one with the key of a request decided 64
// decisions ago asks again.
func TestPermissionDecidedBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fsys := permissionFleet(t)
		const n, size = 70, 64 << 10
		heap0, disk0 := heapInUse(), stateBytes(t, fsys)
		for i := range n {
			done := make(chan error, 1)
			go func() {
				_, _, err := r.RequestPermission(context.Background(), "scout", bigRequest(fmt.Sprint("k", i), size))
				done <- err
			}()
			synctest.Wait()
			p := r.PermissionRequests()
			if len(p) != 1 {
				t.Fatalf("pending %d; want 1", len(p))
			}
			if err := r.DecidePermission("operator", p[0].ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: "no"}); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if grew := heapInUse() - heap0; grew > n*size/4 {
			t.Errorf("the heap grew by %d bytes after %d decided requests of %d bytes; want under %d", grew, n, size, n*size/4)
		}
		if grew := stateBytes(t, fsys) - disk0; grew > n*size/4 {
			t.Errorf("the state directory grew by %d bytes; want under %d (decided records without their input)", grew, n*size/4)
		}
		// The last decision is found again by its key.
		d, ok, err := r.RequestPermission(context.Background(), "scout", bigRequest(fmt.Sprint("k", n-1), size))
		if err != nil || !ok || d.Behavior != fleetstate.BehaviorDeny || d.Message != "no" {
			t.Fatalf("re-run of the last request = %+v, %v, %v; want its denial", d, ok, err)
		}
		// The first one is forgotten: asked again, it waits for a person.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _, _, _ = r.RequestPermission(ctx, "scout", bigRequest("k0", size)) }()
		synctest.Wait()
		if p := r.PermissionRequests(); len(p) != 1 || p[0].Key != "k0" {
			t.Fatalf("pending after a re-run of the first request: %+v; want it asked again", p)
		}
	})
}

// A decision's message is for an agent to read: one over 4 KiB is
// refused, and nothing changes.
func TestPermissionDecisionMessageBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := permissionFleet(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _, _, _ = r.RequestPermission(ctx, "scout", bigRequest("k", 10)) }()
		synctest.Wait()
		p := r.PermissionRequests()
		err := r.DecidePermission("operator", p[0].ID, fleetstate.Decision{Behavior: fleetstate.BehaviorDeny, Message: strings.Repeat("m", 4<<10+1)})
		wantCode(t, err, fleetstate.CodeContentTooLarge)
		if left := r.PermissionRequests(); len(left) != 1 {
			t.Fatalf("pending after a refused decision: %d; want 1", len(left))
		}
	})
}
