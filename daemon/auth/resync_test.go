package auth_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// laggingFile is a token file whose Load answers from a copy that lags
// behind the file, as the watch of a NATS key may, and whose Reread reads
// the file itself, then updates the copy. Update writes the file only: the
// copy catches up at the next Reread. A Reread waits for gate, if not nil.
type laggingFile struct {
	mu          sync.Mutex
	file, shown []byte // guarded by mu; shown is what Load returns
	gate        chan struct{}
	entered     chan struct{} // receives at each Reread
	rereads     atomic.Int32
}

func (f *laggingFile) Load() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shown, nil
}

func (f *laggingFile) Update(change func([]byte) ([]byte, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := change(f.file)
	if err == nil {
		f.file = data
	}
	return err
}

func (f *laggingFile) Reread() ([]byte, error) {
	f.rereads.Add(1)
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shown = f.file
	return f.shown, nil
}

// TestResyncReadsAndCoalesces: Membership.Resync makes a member of a
// token that its file's lagging copy does not show yet, by rereading the
// file; fifty Resyncs at once, while a reread is in progress, make one
// more reread between them, not fifty.
func TestResyncReadsAndCoalesces(t *testing.T) {
	file := &laggingFile{}
	daemonTokens, err := auth.NewTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := auth.NewTokens(file) // another process: the token command
	if err != nil {
		t.Fatal(err)
	}
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	m, err := auth.WatchMembership(daemonTokens, rv, &auth.MembershipOptions{Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	known := func(name string) bool {
		for _, mi := range rv.Members() {
			if mi.Name == name {
				return true
			}
		}
		return false
	}

	tok, err := cli.Add("late", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil || known("late") {
		t.Fatalf("Sync: %v, known %v; want the lagging copy, without late", err, known("late"))
	}
	if err := m.Resync(); err != nil || !known("late") {
		t.Fatalf("Resync: %v, known %v; want late, from the file reread", err, known("late"))
	}
	if id, ok := daemonTokens.Lookup(tok); !ok || id.Agent != "late" {
		t.Fatalf("Lookup of late's token after the reread: %v, %v", id, ok)
	}

	// A lookup that misses rereads too.
	tok2, err := cli.Add("later", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := daemonTokens.Lookup(tok2); !ok || id.Agent != "later" {
		t.Fatalf("Lookup of a token the copy does not show yet: %v, %v; want later, from the file reread", id, ok)
	}

	// Fifty at once, while a reread is in progress.
	file.gate, file.entered = make(chan struct{}), make(chan struct{}, 64)
	before := file.rereads.Load()
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.Resync() })
	<-file.entered
	var started sync.WaitGroup
	for range 50 {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			_ = m.Resync()
		})
	}
	started.Wait()
	time.Sleep(50 * time.Millisecond) // for them to reach the look in progress
	close(file.gate)
	wg.Wait()
	if n := file.rereads.Load() - before; n != 2 {
		t.Errorf("%d rereads for one Resync and 50 more during its reread; want 2", n)
	}
}
