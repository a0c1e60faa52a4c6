package mcpadapter_test

import (
	"path/filepath"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/spf13/afero"
)

// osStore opens a store in a fresh temporary directory on the disk, with
// its token store.
func osStore(tb testing.TB) (*fleetstate.Store, *mcpadapter.Tokens) {
	tb.Helper()
	st, err := fleetstate.Open(afero.NewOsFs(), filepath.Join(tb.TempDir(), "state"), &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		tb.Fatal(err)
	}
	tokens, err := mcpadapter.OpenTokens(st)
	if err != nil {
		tb.Fatal(err)
	}
	return st, tokens
}
