// Package fleettest is the test kit the module's packages share: waiting
// for a condition with a deadline, the bearer-token transport, a transport
// whose connections can be cut, the require-or-skip rule for what a test
// needs from the machine (tmux, a tmpfs, npm), a fault file system, and
// the hostile input sent to a server by the hostile tests.
//
// It is internal: only this module's tests import it. It imports neither
// the root package nor mcpadapter, so any package's tests can use it,
// white-box tests included; the adapter served over HTTP with tokens is in
// the sibling package adaptertest.
package fleettest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Until calls cond until it returns true or within has passed, sleeping
// every between calls (zero: none, for a cond that blocks by itself, such
// as a long poll). It reports whether cond returned true. cond is called
// at least once, and a false is final only from a call that started after
// the deadline, so that a condition met while the last sleep ran (or while
// the caller was paused) is not reported as a timeout.
//
// cond runs on the caller's goroutine and may fail the test itself (with
// t.Fatal) on a state it must never see.
func Until(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		late := time.Now().After(deadline)
		if cond() {
			return true
		}
		if late {
			return false
		}
		if every > 0 {
			time.Sleep(every)
		}
	}
}

// Bearer is an [http.RoundTripper] that sends Token as a bearer token
// with every request, through Base (nil: [http.DefaultTransport]). It
// clones each request before setting the header, as a RoundTripper must
// not modify its request.
type Bearer struct {
	Token string
	Base  http.RoundTripper
}

// RoundTrip implements [http.RoundTripper].
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	base := b.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// BearerClient returns an HTTP client that sends token with every request
// over [http.DefaultTransport].
func BearerClient(token string) *http.Client { return &http.Client{Transport: Bearer{Token: token}} }

// Cuttable is an HTTP transport whose connections can all be cut at once,
// as the kernel cuts them when a process dies. Its embedded Transport may
// be tuned before first use.
type Cuttable struct {
	*http.Transport

	mu    sync.Mutex
	conns []net.Conn // guarded by mu; every connection dialled since the last Cut
	dead  bool       // guarded by mu; set by Kill: dials fail
}

// NewCuttable returns a Cuttable with a new [http.Transport].
func NewCuttable() *Cuttable {
	c := &Cuttable{}
	d := &net.Dialer{}
	c.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.mu.Lock()
		dead := c.dead
		c.mu.Unlock()
		if dead {
			return nil, errKilled
		}
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			c.mu.Lock()
			if c.dead {
				conn.Close()
				conn, err = nil, errKilled
			} else {
				c.conns = append(c.conns, conn)
			}
			c.mu.Unlock()
		}
		return conn, err
	}}
	return c
}

// errKilled is a dial's error after Kill.
var errKilled = errors.New("fleettest: the transport was killed")

// Kill cuts every connection, as Cut does, and makes every later dial
// fail: the client is gone for good, as when its process dies, and a
// library retrying in the background cannot bring it back.
func (c *Cuttable) Kill() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.Cut()
}

// Cut closes every connection dialled so far, with no goodbye.
func (c *Cuttable) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// FreePort returns a port of 127.0.0.1 that was free a moment ago, for a
// server that must be given its port before it starts, or must come back
// on it after a restart. It is picked at random below Linux's default
// range of ephemeral ports (32768-60999), from which the kernel hands out
// the local ports of outgoing connections and of listeners on port 0: a
// port from that range, once closed, may be taken by any connection
// another test opens before the server binds it again.
func FreePort() (int, error) {
	const lo, n = 20000, 12000
	for range 100 {
		p := lo + rand.IntN(n)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("fleettest: no free port in %d-%d after 100 tries", lo, lo+n-1)
}
