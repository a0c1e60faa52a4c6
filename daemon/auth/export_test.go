package auth

import (
	"time"

	"github.com/fleetstate/fleetstate"
)

// SetTokensClock makes t read the time of its rechecks of the token file
// from now. Call it before t is shared.
func SetTokensClock(t *Tokens, now func() time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.now = now
	if d, ok := t.file.(*diskTokenFile); ok {
		d.now = now
	}
}

// DiskTokenFile returns a handle of the token file of store, as
// OpenTokens opens it.
func DiskTokenFile(store *fleetstate.Store) TokenFile {
	return &diskTokenFile{fs: store.Fs(), path: TokenPath(store), now: time.Now}
}
