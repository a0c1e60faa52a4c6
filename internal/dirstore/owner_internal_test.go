package dirstore

import (
	"os"
	"testing"

	"github.com/spf13/afero"
)

// TestFleetOwnerIsNotACleanOfAnotherProcess: while another process holds
// the owner lock without describing itself (its Clean removing the
// sessions, longer than a look's retries), the fleet has no owner; a
// described holder is the owner.
func TestFleetOwnerIsNotACleanOfAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	open := func() *Dir {
		d, err := Open(afero.NewOsFs(), dir, Options{NoGitIgnore: true})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Two Dirs open the lock file apart: their flocks exclude each other,
	// as two processes' do.
	cleaning, looking := open(), open()
	look, ok, err := cleaning.tryOwner()
	if err != nil || !ok {
		t.Fatalf("tryOwner: %v, %v", ok, err)
	}
	if o, owned, err := looking.FleetOwner(); err != nil || owned {
		t.Errorf("FleetOwner during another's clean: %+v, owned %v, %v; want not owned", o, owned, err)
	}
	look.Release()

	owner, err := cleaning.AcquireOwner("http://127.0.0.1:1/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Release()
	o, owned, err := looking.FleetOwner()
	if err != nil || !owned || o.PID != os.Getpid() || o.Addr != "http://127.0.0.1:1/mcp" {
		t.Errorf("FleetOwner of an owner: %+v, owned %v, %v", o, owned, err)
	}
}
