package fsx

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
)

// writeTemp writes a file named name in dir holding data and returns its path.
func writeTemp(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestReplaceFileOverAFile: the new content is at the final name, a reader
// that had the old file open still reads the old content whole, and no
// other name is left in the folder.
func TestReplaceFileOverAFile(t *testing.T) {
	dir := t.TempDir()
	final := writeTemp(t, dir, "state.md", "old content")
	reader, err := os.Open(final)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	tmp := writeTemp(t, dir, ".tmp-"+"1", "new content")

	if err := Replace(tmp, final); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if data, err := os.ReadFile(final); err != nil || string(data) != "new content" {
		t.Fatalf("final holds %q, %v; want the new content", data, err)
	}
	buf := make([]byte, 64)
	n, _ := reader.Read(buf)
	if string(buf[:n]) != "old content" {
		t.Fatalf("a reader of the old file read %q; want the old content", buf[:n])
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state.md"}) {
		t.Fatalf("folder holds %q; want only state.md", got)
	}
}

// TestReplaceFileNoFinal: where the final name does not exist yet, the
// temporary file is renamed to it.
func TestReplaceFileNoFinal(t *testing.T) {
	dir := t.TempDir()
	tmp := writeTemp(t, dir, ".tmp-"+"1", "first")
	final := filepath.Join(dir, "state.md")
	if err := Replace(tmp, final); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if data, err := os.ReadFile(final); err != nil || string(data) != "first" {
		t.Fatalf("final holds %q, %v; want %q", data, err, "first")
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state.md"}) {
		t.Fatalf("folder holds %q; want only state.md", got)
	}
}

// TestReplaceFileOverAFolder: a folder that appeared at the final name
// (another process, between the store's check and the replace) stays
// there with what it holds, the error is EISDIR, and the temporary file
// keeps the new content for the caller to remove.
func TestReplaceFileOverAFolder(t *testing.T) {
	for _, empty := range []bool{true, false} {
		dir := t.TempDir()
		final := filepath.Join(dir, "state.md")
		if err := os.Mkdir(final, 0o700); err != nil {
			t.Fatal(err)
		}
		if !empty {
			writeTemp(t, final, "inner", "keep me")
		}
		tmp := writeTemp(t, dir, ".tmp-"+"1", "new content")

		err := Replace(tmp, final)
		if !errors.Is(err, syscall.EISDIR) {
			t.Fatalf("Replace over a folder (empty=%v) = %v; want EISDIR", empty, err)
		}
		if fi, err := os.Stat(final); err != nil || !fi.IsDir() {
			t.Fatalf("final after a refused replace (empty=%v): %v, %v; want the folder", empty, fi, err)
		}
		if !empty {
			if data, err := os.ReadFile(filepath.Join(final, "inner")); err != nil || string(data) != "keep me" {
				t.Fatalf("the folder's file holds %q, %v; want it unchanged", data, err)
			}
		}
		if data, err := os.ReadFile(tmp); err != nil || string(data) != "new content" {
			t.Fatalf("temporary file holds %q, %v; want the new content", data, err)
		}
	}
}

// BenchmarkOverwriteOS compares the two ways to put a finished 1 KiB
// temporary file over an existing one, eight writers in one folder, each
// on its own file: a rename over it, and Replace.
func BenchmarkOverwriteOS(b *testing.B) {
	data := make([]byte, 1024)
	for _, way := range []struct {
		name    string
		replace func(tmp, final string) error
	}{{"rename", os.Rename}, {"exchange", Replace}} {
		b.Run(way.name, func(b *testing.B) {
			dir := b.TempDir()
			var next atomic.Int64
			b.SetParallelism(8 / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				final := filepath.Join(dir, "f"+strconv.FormatInt(next.Add(1), 10))
				if err := os.WriteFile(final, data, 0o600); err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					f, err := os.CreateTemp(dir, ".tmp-"+"*")
					if err == nil {
						_, err = f.Write(data)
						if cerr := f.Close(); err == nil {
							err = cerr
						}
					}
					if err == nil {
						err = way.replace(f.Name(), final)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
