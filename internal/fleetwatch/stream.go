package fleetwatch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/daemon/events"

	tea "charm.land/bubbletea/v2"

	"github.com/fleetstate/fleetstate"
)

// Bounds of the stream, each with its reason.
const (
	// DefaultMinBackoff is the first wait before connecting again: short,
	// since a daemon that restarts is back within a fraction of a second.
	DefaultMinBackoff = 250 * time.Millisecond
	// DefaultMaxBackoff caps the doubling waits, so that a view of a
	// daemon that stayed down a while catches up within seconds of its
	// return.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultIdle is how long a connection may stay silent before the
	// stream takes it for dead and reconnects: three of the daemon's
	// keep-alive periods, so that one late comment is no reason.
	DefaultIdle = 3 * events.DefaultHeartbeat
	// maxLine bounds one line of the stream (a snapshot is one line).
	maxLine = 64 << 20
)

// Source says where the events are: the daemon's base URL (without /mcp)
// and the bearer token to show it. The stream asks before each
// connection, so that a source reading a state directory follows a
// daemon that restarted on another port with a new operator token.
type Source func() (base, token string, err error)

// Options configure a [Stream]. The zero value is valid.
type Options struct {
	// Client makes the requests; nil means a client without a timeout
	// (a stream has no end to wait for).
	Client *http.Client
	// Explain, if set, turns an error of a connection into one that names
	// its fix, for the first connection's error and the view alike.
	Explain func(error) error
	// MinBackoff, MaxBackoff and Idle: zero means the defaults above.
	MinBackoff, MaxBackoff, Idle time.Duration
}

// StatusError is a refusal by the daemon: its HTTP status and message.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("the daemon answered %d %s", e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("the daemon answered %d: %s", e.Code, e.Message)
}

// Stream reads the daemon's events and hands them to a view as messages,
// reconnecting when the connection breaks or loses events. Make one with
// [Dial]; its Run may be called once.
type Stream struct {
	src   Source
	o     Options
	first *conn
}

// Dial connects to the source's daemon once and returns the stream, or
// the connection's error (explained). ctx bounds the stream's life: the
// first connection stays open until Run ends or ctx is done.
func Dial(ctx context.Context, src Source, o Options) (*Stream, error) {
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	s := &Stream{src: src, o: o}
	c, err := s.dial(ctx)
	if err != nil {
		return nil, s.explain(err)
	}
	s.first = c
	return s, nil
}

func (s *Stream) explain(err error) error {
	if s.o.Explain != nil {
		return s.o.Explain(err)
	}
	return err
}

// Run sends the stream's messages to out until ctx is done, then closes
// out: a [SnapshotMsg] for each connection, an [EventMsg] for each event,
// a [GapMsg] when events were lost (it then reconnects at once for a fresh
// snapshot), a [DownMsg] when a connection fails (it then waits, doubling
// the wait up to the maximum, and tries again).
func (s *Stream) Run(ctx context.Context, out chan<- tea.Msg) {
	defer close(out)
	send := func(msg tea.Msg) bool {
		select {
		case out <- msg:
			return true
		case <-ctx.Done():
			return false
		}
	}
	c := s.first
	s.first = nil
	backoff := s.o.MinBackoff
	for {
		if c == nil {
			var err error
			if c, err = s.dial(ctx); err != nil {
				if ctx.Err() != nil || !send(DownMsg{Err: s.explain(err), Retry: backoff}) || !sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, s.o.MaxBackoff)
				continue
			}
		}
		gap, err := s.read(c, send)
		c.close()
		c = nil
		if ctx.Err() != nil {
			return
		}
		if gap > 0 {
			if !send(GapMsg{Missed: gap, Time: time.Now()}) {
				return
			}
			continue
		}
		// The connection had been up: start the waits afresh.
		backoff = s.o.MinBackoff
		if !send(DownMsg{Err: s.explain(err), Retry: backoff}) || !sleep(ctx, backoff) {
			return
		}
	}
}

// read hands c's snapshot and events to send until the connection ends
// (the error says how) or reports a gap (its size is returned).
func (s *Stream) read(c *conn, send func(tea.Msg) bool) (uint64, error) {
	for {
		kind, data, err := c.next()
		if err != nil {
			return 0, err
		}
		var msg tea.Msg
		switch kind {
		case "snapshot":
			var snap struct {
				events.StreamSnapshot
				Requests []Request `json:"permissions"`
			}
			if err := json.Unmarshal([]byte(data), &snap); err != nil {
				return 0, fmt.Errorf("a snapshot that does not decode: %v", err)
			}
			msg = SnapshotMsg{URL: c.base, Snapshot: snap.Snapshot, Recent: snap.Recent, Requests: snap.Requests}
		case "event":
			var e fleetstate.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				return 0, fmt.Errorf("an event that does not decode: %v", err)
			}
			if e.Gap > 0 {
				return e.Gap, nil
			}
			msg = EventMsg{Event: e}
		default:
			continue // a kind this view does not know
		}
		if !send(msg) {
			return 0, context.Canceled
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

var (
	errSilent = errors.New("the stream stayed silent past its keep-alives")
	errEnded  = errors.New("the daemon ended the stream")
)

// conn is one open event stream.
type conn struct {
	ctx    context.Context
	base   string
	body   io.ReadCloser
	sc     *bufio.Scanner
	cancel context.CancelFunc
	idle   *time.Timer // cancels the request when the stream stays silent
	every  time.Duration
}

func (s *Stream) dial(ctx context.Context) (*conn, error) {
	base, token, err := s.src()
	if err != nil {
		return nil, err
	}
	base = strings.TrimRight(base, "/")
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+events.Path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The watchdog covers the wait for the response's headers too.
	idle := time.AfterFunc(s.o.Idle, func() { cancelCause(errSilent) })
	resp, err := s.o.Client.Do(req)
	if err != nil {
		idle.Stop()
		cancel()
		if context.Cause(ctx) == errSilent {
			return nil, errSilent
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		idle.Stop()
		cancel()
		return nil, &StatusError{Code: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	return &conn{ctx: ctx, base: base, body: resp.Body, sc: sc, cancel: cancel, idle: idle, every: s.o.Idle}, nil
}

// next returns the next server-sent event: its name and data. Comments
// (the keep-alives) only show that the connection lives.
func (c *conn) next() (kind, data string, err error) {
	var lines []string
	for c.sc.Scan() {
		c.idle.Reset(c.every)
		line := c.sc.Text()
		switch {
		case line == "":
			if kind != "" || lines != nil {
				if kind == "" {
					kind = "message"
				}
				return kind, strings.Join(lines, "\n"), nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			kind = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if context.Cause(c.ctx) == errSilent {
		return "", "", errSilent
	}
	if err := c.sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", errEnded
}

func (c *conn) close() {
	c.idle.Stop()
	c.cancel()
	c.body.Close()
}
