package fleetstate_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
)

// Open a store on an in-memory file system, as tests do; production code
// passes nil for the disk. Until a session starts, there is nothing to
// put files in.
func ExampleOpen() {
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/project/.ai-fleet-state", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Dir())

	_, err = st.CurrentSession()
	fmt.Println(fleetstate.CodeOf(err))

	sess, err := st.NewSession("refactor auth")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sess.Name)
	// Output:
	// /project/.ai-fleet-state
	// ERR_NO_ACTIVE_SESSION
	// refactor auth
}

// Put a file as one agent and get it back by its ID, as another agent
// would after receiving the ID as text.
func ExampleStore_Put() {
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.NewSession("example"); err != nil {
		log.Fatal(err)
	}
	id, err := st.Put("scout", "notes/plan.md", []byte("1. read the code\n2. fix the bug\n"), false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id.Agent(), id.Name())

	received, err := fleetstate.ParseFileID(id.String())
	if err != nil {
		log.Fatal(err)
	}
	data, err := st.Get(received)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(data))

	files, err := st.List("", "scout")
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		fmt.Println(f.ID.Name(), f.Size)
	}
	// Output:
	// scout notes/plan.md
	// 1. read the code
	// 2. fix the bug
	// notes/plan.md 32
}

// Check the code of an error with errors.Is and a sentinel, or read it
// with CodeOf, also through wrapping.
func ExampleCodeOf() {
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.NewSession("example"); err != nil {
		log.Fatal(err)
	}
	if _, err := st.Put("scout", "notes.md", []byte("first"), false); err != nil {
		log.Fatal(err)
	}
	_, err = st.Put("scout", "notes.md", []byte("second"), false)
	wrapped := fmt.Errorf("saving notes: %w", err)

	fmt.Println(errors.Is(wrapped, fleetstate.ErrFileExists))
	fmt.Println(fleetstate.CodeOf(wrapped))
	var e *fleetstate.Error
	if errors.As(wrapped, &e) {
		fmt.Println(e.Op, e.Code)
	}

	_, err = st.Put("scout", "../escape.md", []byte("x"), false)
	fmt.Println(fleetstate.CodeOf(err))
	fmt.Println(fleetstate.CodeOf(errors.New("not from fleetstate")))
	// Output:
	// true
	// ERR_FILE_EXISTS
	// put ERR_FILE_EXISTS
	// ERR_INVALID_FILE_NAME
	// ERR_INTERNAL
}

// A file name may contain "::": everything after the agent's separator is
// the file name.
func ExampleParseFileID() {
	id, err := fleetstate.ParseFileID("fsm::file::550e8400-e29b-41d4-a716-446655440000::scout::notes::v2.md")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id.Session())
	fmt.Println(id.Agent())
	fmt.Println(id.Name())

	_, err = fleetstate.ParseFileID("fsm::file::not-a-session::scout::notes.md")
	fmt.Println(fleetstate.CodeOf(err))
	// Output:
	// 550e8400-e29b-41d4-a716-446655440000
	// scout
	// notes::v2.md
	// ERR_CAN_ONLY_RETRIEVE_FILES
}
