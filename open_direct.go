package fleetstate

import (
	"errors"
	"path/filepath"

	"github.com/spf13/afero"
)

// openMode says how a file below the state directory may be opened in one
// step, without first checking each component of its path for a symbolic
// link (see [Store.inspect]).
type openMode int

const (
	// openChecked: no one-step open; every component is checked first.
	openChecked openMode = iota
	// openPlain: the file system cannot hold symbolic links (it is in
	// memory, or it cannot even tell a link from its target), so a plain
	// Open follows none.
	openPlain
	// openNoLinks: the operating system's file system, where the kernel
	// refuses to follow any symbolic link on the way (openat2 with
	// RESOLVE_NO_SYMLINKS on Linux). The state directory's own path has no
	// link in it, so a refusal means a link inside the state directory.
	openNoLinks
)

// directOpenMode returns the one-step open available for a store in dir.
func directOpenMode(fsys afero.Fs, osFs bool, dir string) openMode {
	if osFs {
		if !noFollowSupported {
			return openChecked
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil || real != dir {
			return openChecked
		}
		return openNoLinks
	}
	if _, ok := fsys.(*afero.MemMapFs); ok {
		return openPlain
	}
	if _, ok := fsys.(afero.Lstater); !ok {
		return openPlain
	}
	return openChecked
}

// errNoDirectOpen means that a file cannot be opened in one step here.
var errNoDirectOpen = errors.New("fleetstate: no direct open")

// openDirect opens the file at path for reading in one step, following no
// symbolic link, or fails. The file may turn out to be a folder or a
// special file: the caller checks. On any failure the caller walks the
// path with inspect, which tells exactly what is wrong.
func (s *Store) openDirect(path string) (afero.File, error) {
	switch s.directOpen {
	case openPlain:
		return s.fs.Open(path)
	case openNoLinks:
		f, err := openNoFollow(path)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, errNoDirectOpen
}
