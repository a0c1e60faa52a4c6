package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A link is the proxy's connection to one daemon: an initialized MCP
// client holding a listening stream. It is lost once, for good, at the
// first sign that its daemon is gone; the proxy then connects a new link
// and closes this one.
type link struct {
	url       string
	c         *client.Client
	tr        *http.Transport // the link's own, so that closing it leaves no connection behind
	listening chan struct{}   // closed when the daemon first accepts the listening stream
	lost      chan struct{}   // closed when the daemon is lost
	once      sync.Once       // closes lost
	listen    sync.Once       // closes listening

	mu  sync.Mutex
	why error // guarded by mu; the first sign of the loss
}

// lose records that the link's daemon is gone. Only the first call counts.
func (l *link) lose(why error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.why = why
		l.mu.Unlock()
		close(l.lost)
	})
}

func (l *link) isLost() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}

func (l *link) reason() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why
}

// close ends the link's MCP session (if its daemon still answers: the
// DELETE is bounded by mcp-go) and its connections. Calls in flight on
// it return.
func (l *link) close() {
	l.lose(errClosed)
	l.c.Close()
	l.tr.CloseIdleConnections()
}

var errClosed = fmt.Errorf("closed by the proxy")

// dial connects a link to the daemon at url and lists its tools, within
// ConnectTimeout, and waits up to ListenWait for its listening stream.
func (p *Proxy) dial(ctx context.Context, url string) (*link, []mcp.Tool, error) {
	hctx, cancel := context.WithTimeout(ctx, p.o.ConnectTimeout)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	l := &link{url: url, tr: tr, listening: make(chan struct{}), lost: make(chan struct{})}
	// The token goes on every request, the session's closing DELETE too.
	hc := &http.Client{Transport: &bearerTransport{token: p.token, base: tr, link: l}}
	c, err := client.NewStreamableHttpClient(url,
		transport.WithHTTPBasicClient(hc),
		transport.WithContinuousListening(),
		// mcp-go logs every failed request of a dying daemon; the proxy
		// logs the loss once.
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, nil, fmt.Errorf("mcpadapter: proxy: %w", err)
	}
	l.c = c
	// The listening stream lives as long as the link, not as long as this
	// attempt: its context is ended by closing the client.
	if err := c.Start(context.WithoutCancel(hctx)); err != nil {
		l.close()
		return nil, nil, fmt.Errorf("mcpadapter: proxy: connect %s: %w", url, err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "fleetstate-proxy", Version: p.o.Version}
	if _, err := c.Initialize(hctx, init); err != nil {
		l.close()
		return nil, nil, fmt.Errorf("mcpadapter: proxy: initialize with %s: %w", url, err)
	}
	tools, err := c.ListTools(hctx, mcp.ListToolsRequest{})
	if err != nil {
		l.close()
		return nil, nil, fmt.Errorf("mcpadapter: proxy: list the tools of %s: %w", url, err)
	}
	// Serve once the daemon holds the stream, so that it knows of the
	// proxy before the proxy's client can make it do anything. A daemon
	// that offers no stream costs a short wait, no failure.
	t := time.NewTimer(p.o.ListenWait)
	defer t.Stop()
	select {
	case <-l.listening:
	case <-t.C:
	case <-l.lost:
		l.close()
		return nil, nil, fmt.Errorf("mcpadapter: proxy: %s lost while connecting: %w", url, l.reason())
	case <-ctx.Done():
		l.close()
		return nil, nil, ctx.Err()
	}
	return l, tools.Tools, nil
}

// install makes l the current link and mirrors tools; if the daemon's
// tools differ from those mirrored so far, the proxy's clients are told
// (notifications/tools/list_changed).
func (p *Proxy) install(l *link, tools []mcp.Tool) {
	byName := make(map[string]mcp.Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	p.mu.Lock()
	same := p.tools != nil && reflect.DeepEqual(toolsJSON(p.tools), toolsJSON(byName))
	p.tools = byName
	p.cur = l
	p.lastErr = nil
	p.broadcastLocked()
	p.mu.Unlock()
	if !same {
		st := make([]server.ServerTool, 0, len(tools))
		for _, t := range tools {
			st = append(st, server.ServerTool{Tool: t, Handler: p.forward})
		}
		p.srv.SetTools(st...)
	}
	p.o.Logger.Info("fleetstate: proxy: connected to a daemon", "url", l.url)
}

// toolsJSON is tools as their clients see them, for comparing two lists.
func toolsJSON(tools map[string]mcp.Tool) map[string]string {
	out := make(map[string]string, len(tools))
	for name, t := range tools {
		b, _ := t.MarshalJSON()
		out[name] = string(b)
	}
	return out
}

// supervise waits for the current link to be lost, then connects another,
// until the proxy closes.
func (p *Proxy) supervise() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		l := p.cur
		p.mu.Unlock()
		if l == nil {
			return // closed
		}
		select {
		case <-l.lost:
		case <-p.done:
			return
		}
		p.o.Logger.Warn("fleetstate: proxy: lost the daemon", "url", l.url, "err", l.reason())
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.cur = nil
		p.lastErr = fmt.Errorf("%s: %v", l.url, l.reason())
		p.broadcastLocked()
		p.mu.Unlock()
		// The old session's DELETE goes out beside the reconnection, not
		// before it: a daemon that swallows it must not delay the next.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			l.close()
		}()
		if !p.reconnect() {
			return
		}
	}
}

// reconnect tries each URL in turn, starting after the last one connected,
// until one answers; after every round in which none did, it tells the
// waiting calls and waits MinBackoff, doubling to MaxBackoff, or less if a
// call asks for a round. It reports false if the proxy closed first.
func (p *Proxy) reconnect() bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := p.o.MinBackoff
	for {
		for range p.urls {
			p.mu.Lock()
			url := p.urls[p.next]
			p.next = (p.next + 1) % len(p.urls)
			p.mu.Unlock()
			l, tools, err := p.dial(ctx, url)
			if ctx.Err() != nil {
				if l != nil {
					l.close()
				}
				return false
			}
			if err == nil {
				p.mu.Lock()
				closed := p.closed
				p.mu.Unlock()
				if closed {
					l.close()
					return false
				}
				p.install(l, tools)
				return true
			}
			p.o.Logger.Info("fleetstate: proxy: a daemon does not answer", "url", url, "err", err)
			p.mu.Lock()
			p.lastErr = err
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.failed++
		p.broadcastLocked()
		p.mu.Unlock()
		// A kick that came during the round is stale: the round that
		// just failed answered it.
		select {
		case <-p.kick:
		default:
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-p.kick:
		case <-p.done:
			t.Stop()
			return false
		}
		t.Stop()
		backoff = min(2*backoff, p.o.MaxBackoff)
	}
}

// bearerTransport adds the daemon token to every request of a link, and
// watches its responses for the signs of a lost daemon: a connection that
// fails, a 5xx, a 404 (the daemon does not know the session, as after a
// restart), or a listening stream that ends. It closes the link's
// listening channel when the listening stream is first established.
type bearerTransport struct {
	token string
	base  http.RoundTripper
	link  *link
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.base.RoundTrip(r)
	switch {
	case err != nil:
		// A request that its caller gave up (the agent cancelled, or the
		// link closed) says nothing of the daemon.
		if r.Context().Err() == nil {
			b.link.lose(err)
		}
	case resp.StatusCode >= 500:
		b.link.lose(fmt.Errorf("the daemon answered %s", resp.Status))
	case resp.StatusCode == http.StatusNotFound && r.Method != http.MethodDelete:
		b.link.lose(fmt.Errorf("the daemon does not know the session (%s): it restarted", resp.Status))
	case r.Method == http.MethodGet && resp.StatusCode == http.StatusOK:
		b.link.listen.Do(func() { close(b.link.listening) })
		resp.Body = &streamBody{ReadCloser: resp.Body, ctx: r.Context(), link: b.link}
	}
	return resp, err
}

// streamBody is a listening stream's body: its end, unless the link's
// client ended it, means the daemon is gone.
type streamBody struct {
	io.ReadCloser
	ctx  context.Context
	link *link
}

func (s *streamBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if err != nil && s.ctx.Err() == nil {
		s.link.lose(fmt.Errorf("the listening stream ended: %v", err))
	}
	return n, err
}
