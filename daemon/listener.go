package daemon

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener accepts at most n connections at a time: past n, Accept
// waits for one to close, and the new connections wait in the kernel's
// backlog, in order, instead of taking descriptors the daemon needs (with
// none left, accept fails with "too many open files" and nobody is served).
// It is golang.org/x/net/netutil's LimitListener, written here to spare the
// dependency, with a warning when the limit is reached.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
	log  *slog.Logger

	lastWarn atomic.Int64 // unix nanoseconds of the last warning
}

func newLimitListener(l net.Listener, n int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{}), log: log}
}

func (l *limitListener) acquire() bool {
	select {
	case l.sem <- struct{}{}:
		return true
	default:
	}
	if now := time.Now().UnixNano(); now-l.lastWarn.Load() > int64(time.Minute) {
		l.lastWarn.Store(now)
		l.log.Warn("fleetstate: connection limit reached; new connections wait for one to close", "max_conns", cap(l.sem))
	}
	select {
	case l.sem <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	if !l.acquire() {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// limitConn gives its slot back when it is closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
