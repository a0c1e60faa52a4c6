package mcpadapter

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

// OnRevoke makes m call f with every identity that loses its last token.
func OnRevoke(m *Membership, f func(Identity)) (stop func()) { return m.onRevoke(f) }
