package fleetstate_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// vanishingFolderFS removes the folder a temporary file is about to be made
// in, once: what a concurrent writer's failed put does when it takes back
// the folders it made.
type vanishingFolderFS struct {
	afero.OsFs
	done atomic.Bool
}

func (v *vanishingFolderFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&os.O_EXCL != 0 && strings.Contains(filepath.Base(name), ".fleetstate-tmp-") && strings.HasSuffix(filepath.Dir(name), "folder") && v.done.CompareAndSwap(false, true) {
		_ = os.Remove(filepath.Dir(name))
	}
	return v.OsFs.OpenFile(name, flag, perm)
}

// TestPutRemakesAFolderTakenBackMeanwhile: a put whose fresh folder is
// removed before its temporary file is made (another writer's failed put
// undoing its folders) makes the folder again instead of failing.
func TestPutRemakesAFolderTakenBackMeanwhile(t *testing.T) {
	fsys := &vanishingFolderFS{}
	st, err := fleetstate.Open(fsys, filepath.Join(t.TempDir(), "state"), &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.NewSession("race"); err != nil {
		t.Fatal(err)
	}
	id, err := st.Put("scout", "fresh/folder/notes.md", []byte("kept"), false)
	if err != nil {
		t.Fatalf("put into a folder removed meanwhile: %v", err)
	}
	if !fsys.done.Load() {
		t.Fatal("the folder was never removed: the test did not exercise the race")
	}
	if data, err := st.Get(id); err != nil || string(data) != "kept" {
		t.Fatalf("get = %q, %v", data, err)
	}
}
