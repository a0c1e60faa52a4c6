package mcpwire

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// CancelledRequest returns the id, as the JSON text a fast call keeps it
// under, of the request that msg, a notifications/cancelled, cancels.
func CancelledRequest(msg []byte) (string, bool) {
	var n struct {
		Method string `json:"method"`
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || n.Method != string(mcp.MethodNotificationCancelled) {
		return "", false
	}
	switch id := n.Params.RequestID.(type) {
	case string:
		return strconv.Quote(id), true // fast ids are plain ASCII: their text is this
	case float64:
		return strconv.FormatFloat(id, 'f', -1, 64), true
	}
	return "", false
}

// Calls are the fast calls in flight of a stdio connection or an HTTP
// handler, by a key made of their request's id, so that a
// notifications/cancelled can cancel one. The zero value is ready; it is safe for concurrent use.
type Calls[K comparable] struct {
	mu     sync.Mutex
	closed bool                      // guarded by mu; no call starts once set
	calls  map[K]*context.CancelFunc // guarded by mu
	wg     sync.WaitGroup            // the calls; Add under mu while !closed
}

// Start counts a call under key, which cancel cancels, unless the calls
// are closed; the call then runs done when it ends.
func (f *Calls[K]) Start(key K, cancel context.CancelFunc) (done func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, false
	}
	if f.calls == nil {
		f.calls = map[K]*context.CancelFunc{}
	}
	entry := &cancel
	f.calls[key] = entry
	f.wg.Add(1)
	return func() {
		f.mu.Lock()
		// A later call may have reused the key.
		if f.calls[key] == entry {
			delete(f.calls, key)
		}
		f.mu.Unlock()
		cancel()
		f.wg.Done()
	}, true
}

// Cancel cancels the call under key, if there is one.
func (f *Calls[K]) Cancel(key K) {
	f.mu.Lock()
	cancel := f.calls[key]
	delete(f.calls, key)
	f.mu.Unlock()
	if cancel != nil {
		(*cancel)()
	}
}

// Close stops new calls and cancels those in flight; Wait then waits for
// them to end.
func (f *Calls[K]) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cancel := range f.calls {
		(*cancel)()
	}
}

// Wait waits for the calls started to end.
func (f *Calls[K]) Wait() { f.wg.Wait() }

// Len returns how many calls are in flight.
func (f *Calls[K]) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}
