// Command store shows the fleetstate store at work: it opens a state
// directory, starts a session, lets two agents write files, reads one back
// by its ID and lists the session.
//
// Usage:
//
//	go run ./examples/store [-dir DIR]
//
// Without -dir it uses a fresh temporary directory and removes it after.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/fleetstate/fleetstate"
)

func main() {
	dir := flag.String("dir", "", "state directory (default: a temporary one)")
	flag.Parse()
	if err := run(os.Stdout, *dir); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "fleetstate-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	st, err := fleetstate.Open(nil, dir, &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		return err
	}
	sess, err := st.NewSession("example run")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "session %s (%s)\n", sess.ID, sess.Name)

	notes, err := st.Put("scout", "notes.md", []byte("# Findings\nthe cache is cold\n"), false)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "scout wrote %s\n", notes)
	if _, err := st.Put("builder", "src/plan/steps.txt", []byte("1. warm the cache\n"), false); err != nil {
		return err
	}

	// A second put of the same name without overwrite is refused.
	_, err = st.Put("scout", "notes.md", []byte("clobbered"), false)
	if !errors.Is(err, fleetstate.ErrFileExists) {
		return fmt.Errorf("second put: got %v; want %s", err, fleetstate.CodeFileExists)
	}
	fmt.Fprintf(w, "second put refused: %s\n", fleetstate.CodeOf(err))

	content, err := st.Get(notes)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "read back %d bytes: %q\n", len(content), content)

	files, err := st.List("", "")
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(w, "  %-8s %-20s %4d bytes\n", f.ID.Agent(), f.ID.Name(), f.Size)
	}
	return nil
}
