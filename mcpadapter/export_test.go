package mcpadapter

import (
	"time"

	"github.com/fleetstate/fleetstate"
)

// OpenStreams returns how many listening streams of member a counts, so
// that tests can wait for a stream to be established before cutting it.
func OpenStreams(a *Adapter, member string) int {
	if a.conns == nil {
		return 0
	}
	a.conns.mu.Lock()
	defer a.conns.mu.Unlock()
	return a.conns.streams[member]
}

// SetReconnectGrace sets how long a's connections give a member's old
// session to be seen gone. Call it before a serves.
func SetReconnectGrace(a *Adapter, d time.Duration) { a.conns.grace = d }

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

// DirectCalls returns how many tool calls a fast path (ServeStdio's or
// an HTTP handler's) served itself, for a.
func DirectCalls(a *Adapter) int64 { return a.direct.Load() }

// FastInFlight returns how many calls h's fast path has in flight.
func FastInFlight(h *Handler) int {
	if h.fast == nil {
		return 0
	}
	c := &h.fast.calls
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}
