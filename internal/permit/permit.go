// Package permit keeps a fleet's permission requests: the requests
// themselves, as the root package exports them (fleetstate.PermissionRequest
// and its kin are aliases of the types here), their record in the
// rendezvous's journal, and the desk that knows each request until its
// window ends.
//
// The rendezvous owns the policy: who may decide, the events, the journal
// writes and the locking. A Desk does not lock; its caller holds the
// rendezvous's lock around every call, timers' callbacks included.
package permit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Behavior is what a [Decision] on a permission request says.
type Behavior string

// Behaviors, as the agents' hooks spell them.
const (
	Allow Behavior = "allow"
	Deny  Behavior = "deny"
)

// Decision is the answer to a permission request.
type Decision struct {
	Behavior Behavior `json:"behavior"`
	// Message tells the agent why it was denied; an allow carries none.
	Message string `json:"message,omitempty"`
	// By names who decided: "operator", a lead, or "rule …". Set by
	// Rendezvous.DecidePermission from its caller.
	By string `json:"by,omitempty"`
	// Time is when the decision was made.
	Time time.Time `json:"time,omitzero"`
}

// Request is a member agent's request to use a tool, as views show it
// and the journal keeps it. The caller of Rendezvous.RequestPermission
// sets Key, Tool, Input, Cwd and Timeout; the rendezvous sets the rest.
type Request struct {
	ID     string `json:"id"`
	Member string `json:"member"`
	// Key, which the caller may leave empty, names the request across the
	// caller's retries: a request with the key of one still known (pending,
	// or decided within its window) is that request.
	Key  string `json:"key,omitempty"`
	Tool string `json:"tool"`
	// Input is the tool's input as JSON text.
	Input    string    `json:"input,omitempty"`
	Cwd      string    `json:"cwd,omitempty"`
	Asked    time.Time `json:"asked"`
	Deadline time.Time `json:"deadline"`
	// Decision is set once the request was decided.
	Decision *Decision `json:"decision,omitempty"`
	// InputBytes is set when Input is clipped (a view sent over the
	// network clips its snapshot): the input's full length, in bytes.
	// Zero means Input is whole.
	InputBytes int `json:"input_bytes,omitempty"`
	// Timeout is the request's window from Asked; zero means the default
	// window. Only RequestPermission reads it.
	Timeout time.Duration `json:"-"`
}

// Limits of a request's fields, and of what a [Desk] keeps.
const (
	MaxTool = 256 // bytes of a tool's name
	MaxKey  = 512 // bytes of the caller's key
	// MaxMessage bounds a decision's message: it is for an agent to read,
	// and a desk keeps it with the decision until the request's deadline.
	MaxMessage = 4 << 10
	// MaxDecided bounds the decided requests a desk keeps of one member,
	// for a re-run of its hook to find: past it, the oldest decided is
	// forgotten, and a re-run of that one asks again.
	MaxDecided = 64
)

// Check checks the fields of a new request that its caller sets: a tool
// named in 1 to MaxTool bytes, a key of at most MaxKey bytes, an input
// that is JSON text or empty, and a timeout from 0 to max.
func Check(req *Request, max time.Duration) error {
	switch {
	case req.Tool == "" || len(req.Tool) > MaxTool:
		return fmt.Errorf("a tool name of 1 to %d bytes is required", MaxTool)
	case len(req.Key) > MaxKey:
		return fmt.Errorf("key of %d bytes, limit %d", len(req.Key), MaxKey)
	case req.Input != "" && !json.Valid([]byte(req.Input)):
		return errors.New("the tool's input is not JSON")
	case req.Timeout < 0 || req.Timeout > max:
		return fmt.Errorf("timeout %v is outside 0 to %v", req.Timeout, max)
	}
	return nil
}

// CheckDecision checks a decision made by by: a behavior that is allow
// or deny, and by named in 1 to 256 bytes. It drops an allow's message.
func CheckDecision(by string, d *Decision) error {
	switch {
	case by == "" || len(by) > 256:
		return errors.New("who decides must be named in 1 to 256 bytes")
	case d.Behavior != Allow && d.Behavior != Deny:
		return fmt.Errorf("behavior %q is neither allow nor deny", string(d.Behavior))
	}
	if d.Behavior == Allow {
		d.Message = ""
	}
	return nil
}

// kind marks a permission request's record in the journal, apart from the
// turns' records, which have no kind.
const kind = "permission"

type record struct {
	Kind string `json:"kind"`
	Request
}

// Encode returns req's record for the journal, without HTML escaping: a
// "<" of the input stays one byte.
func Encode(req *Request) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(record{Kind: kind, Request: *req}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Decode reads data as a request's record. isRequest is false for another
// kind of record; valid is false for a request's record that cannot be
// read back, or that lacks an ID, a tool or a member.
func Decode(data []byte) (req Request, isRequest, valid bool) {
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &head) != nil || head.Kind != kind {
		return Request{}, false, false
	}
	var rec record
	if json.Unmarshal(data, &rec) != nil || rec.ID == "" || rec.Tool == "" || rec.Member == "" {
		return Request{}, true, false
	}
	return rec.Request, true, true
}

// Entry is a request a [Desk] knows.
type Entry struct {
	Request
	// Done is closed when the request is decided or ends undecided.
	Done chan struct{}
	// Unconfirmed is a decision whose write to the journal failed and may
	// have landed: it is the request's Decision once a write of it goes
	// through, and no other decision is taken meanwhile.
	Unconfirmed *Decision
	ended       bool          // the window passed, or the desk was cleaned
	timer       *time.Timer   // at Deadline: ends or forgets the request
	retry       *time.Timer   // the next write of Unconfirmed
	wait        time.Duration // before the write after that
}

// The waits between the writes of an unconfirmed decision: the first,
// doubled after each write that fails, up to the last.
const (
	RetryFirst = 250 * time.Millisecond
	RetryLast  = 4 * time.Second
)

// NewEntry returns an entry for req; a decided req's Done is closed, and
// the entry keeps only what [Decided] keeps of it.
func NewEntry(req Request) *Entry {
	e := &Entry{Request: req, Done: make(chan struct{})}
	if e.Decision != nil {
		e.Request = Decided(e.Request)
		close(e.Done)
	}
	return e
}

// Decided returns what is kept of req once it is decided: what a re-run
// of its hook needs to find its decision (its ID, member, key, tool,
// window and decision), without its input and cwd, which may be as large
// as any content.
func Decided(req Request) Request {
	req.Input, req.Cwd, req.InputBytes = "", "", 0
	return req
}

// Retry calls write after a wait, the next of RetryFirst doubled up to
// RetryLast, unless e ends first.
func (e *Entry) Retry(write func()) {
	e.wait = min(max(2*e.wait, RetryFirst), RetryLast)
	e.retry = time.AfterFunc(e.wait, write)
}

// stop stops e's timers.
func (e *Entry) stop() {
	e.timer.Stop()
	if e.retry != nil {
		e.retry.Stop()
	}
}

// Pending reports whether e is known, and neither decided nor holding an
// unconfirmed decision.
func (e *Entry) Pending() bool { return e.Decision == nil && e.Unconfirmed == nil && !e.ended }

// Copy returns a copy of e's request, for an event.
func (e *Entry) Copy() *Request {
	c := e.Request
	return &c
}

type key struct{ member, key string }

// Desk knows each request from its asking until its deadline: then a
// pending request ends undecided, and a decided one is forgotten. Of
// each member it keeps at most [MaxDecided] decided requests, each
// without its input. The zero Desk is empty and ready to use.
type Desk struct {
	byID    map[string]*Entry   // until the deadline
	byKey   map[key]*Entry      // those with a caller's key
	decided map[string][]*Entry // by member: the decided requests known, oldest decided first
}

// Get returns the request id, if it is known and its window has not passed.
func (d *Desk) Get(id string) *Entry {
	if e := d.byID[id]; e != nil && !e.ended {
		return e
	}
	return nil
}

// Holds reports whether e is the request the desk knows by e's ID.
func (d *Desk) Holds(e *Entry) bool { return d.byID[e.ID] == e }

// ByKey returns member's known request with the caller's key, if any.
func (d *Desk) ByKey(member, k string) *Entry {
	if k == "" {
		return nil
	}
	if e := d.byKey[key{member, k}]; e != nil && !e.ended {
		return e
	}
	return nil
}

// PendingOf counts member's pending requests.
func (d *Desk) PendingOf(member string) int {
	n := 0
	for _, e := range d.byID {
		if e.Member == member && e.Pending() {
			n++
		}
	}
	return n
}

// Pending returns the pending requests, oldest first; nil when there are
// none.
func (d *Desk) Pending() []Request {
	var out []Request
	for _, e := range d.byID {
		if e.Pending() {
			out = append(out, e.Request)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Asked.Before(out[j].Asked) })
	return out
}

// Add makes e known until its deadline, when deadline runs (in a
// goroutine of its own; it takes the caller's lock, checks [Desk.Holds]
// and calls [Desk.End]). A decided e may make its member's oldest decided
// request forgotten (see [Desk.Decide]), whose ID Add returns.
func (d *Desk) Add(e *Entry, deadline func()) (forgotten string) {
	if d.byID == nil {
		d.byID = map[string]*Entry{}
		d.byKey = map[key]*Entry{}
		d.decided = map[string][]*Entry{}
	}
	d.byID[e.ID] = e
	if e.Key != "" {
		d.byKey[key{e.Member, e.Key}] = e
	}
	e.timer = time.AfterFunc(time.Until(e.Deadline), deadline)
	if e.Decision != nil {
		return d.keepDecided(e)
	}
	return ""
}

// Decide records dec on the pending e, closes its Done, and drops e's
// input and cwd (see [Decided]). When e's member then has more than
// [MaxDecided] decided requests, the oldest is forgotten and its ID
// returned, so that its caller releases its record; "" is none.
func (d *Desk) Decide(e *Entry, dec Decision) (forgotten string) {
	e.Decision = &dec
	e.Request = Decided(e.Request)
	close(e.Done)
	return d.keepDecided(e)
}

// keepDecided counts the decided e against its member's bound.
func (d *Desk) keepDecided(e *Entry) (forgotten string) {
	d.decided[e.Member] = append(d.decided[e.Member], e)
	if kept := d.decided[e.Member]; len(kept) > MaxDecided {
		d.End(kept[0])
		return kept[0].ID
	}
	return ""
}

// End forgets e; a pending e ends undecided, its Done closed, and End
// reports true.
func (d *Desk) End(e *Entry) (undecided bool) {
	e.stop()
	delete(d.byID, e.ID)
	if d.byKey[key{e.Member, e.Key}] == e {
		delete(d.byKey, key{e.Member, e.Key})
	}
	if e.Decision != nil {
		kept := d.decided[e.Member]
		for i, k := range kept {
			if k == e {
				kept = append(kept[:i:i], kept[i+1:]...)
				break
			}
		}
		if len(kept) == 0 {
			delete(d.decided, e.Member)
		} else {
			d.decided[e.Member] = kept
		}
	}
	return d.end(e)
}

func (d *Desk) end(e *Entry) bool {
	e.ended = true
	if e.Decision != nil {
		return false
	}
	close(e.Done)
	return true
}

// Stop stops every request's timer, when the rendezvous closes.
func (d *Desk) Stop() {
	for _, e := range d.byID {
		e.stop()
	}
}

// Clean ends every request, when the fleet is cleaned, and calls
// undecided with each that ends undecided.
func (d *Desk) Clean(undecided func(*Entry)) {
	for _, e := range d.byID {
		e.stop()
		if d.end(e) {
			undecided(e)
		}
	}
	clear(d.byID)
	clear(d.byKey)
	clear(d.decided)
}
