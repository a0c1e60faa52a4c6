//go:build linux

package fleetstate_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// Get opens a file in one step on Linux; these are the cases where that
// step must not change what Get answers.
func TestGetDirectOpenOS(t *testing.T) {
	t.Run("StateDirBehindLink", func(t *testing.T) {
		// A state directory reached through a symbolic link is the
		// caller's choice and works as before.
		real := filepath.Join(t.TempDir(), "real")
		if err := os.Mkdir(real, 0o700); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		st := open(t, afero.NewOsFs(), link, &fleetstate.Options{NoGitIgnore: true})
		newSession(t, st, "s")
		id := put(t, st, "scout", "a/b.md", "through a link", false)
		if got := get(t, st, id); got != "through a link" {
			t.Fatalf("Get = %q; want %q", got, "through a link")
		}
	})
	t.Run("FIFO", func(t *testing.T) {
		// A FIFO where a file should be is not a stored file; opening it
		// must not wait for a writer.
		st := open(t, afero.NewOsFs(), filepath.Join(t.TempDir(), "state"), &fleetstate.Options{NoGitIgnore: true})
		sess := newSession(t, st, "s")
		put(t, st, "scout", "other.md", "x", false)
		if err := syscall.Mkfifo(filepath.Join(st.Dir(), sess.ID, "scout", "pipe.md"), 0o600); err != nil {
			t.Fatalf("mkfifo: %v", err) // every Unix file system of a temporary directory has FIFOs
		}
		_, err := st.Get(fileID(t, sess.ID, "scout", "pipe.md"))
		if !errors.Is(err, fleetstate.ErrFileNotFound) {
			t.Fatalf("Get of a FIFO: %v; want %v", err, fleetstate.ErrFileNotFound)
		}
	})
	t.Run("LinkedFile", func(t *testing.T) {
		st := open(t, afero.NewOsFs(), filepath.Join(t.TempDir(), "state"), &fleetstate.Options{NoGitIgnore: true})
		sess := newSession(t, st, "s")
		put(t, st, "scout", "real.md", "secret", false)
		outside := filepath.Join(t.TempDir(), "outside.md")
		if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{"in.md": filepath.Join(st.Dir(), sess.ID, "scout", "real.md"), "out.md": outside} {
			if err := os.Symlink(target, filepath.Join(st.Dir(), sess.ID, "scout", name)); err != nil {
				t.Fatal(err)
			}
			_, err := st.Get(fileID(t, sess.ID, "scout", name))
			if fleetstate.CodeOf(err) != fleetstate.CodePathEscape {
				t.Fatalf("Get of a link to %s: %v; want %s", target, err, fleetstate.CodePathEscape)
			}
		}
	})
}
