package fleetstate

import (
	"context"
	"encoding/json"
	"sort"
	"time"
)

// Permission requests. A coding agent about to use a tool may ask whether
// it may (Claude Code's and Codex's PermissionRequest hook); the request
// goes to the fleet, where a person with the operator's login, a lead the
// fleet allows to, or a rule decides. Nothing is ever allowed by default:
// a request nobody decides within its window ends undecided, and the
// agent falls back to its own prompt.
//
// A request is written through the [Journal] as a record of its own kind
// beside the turns, so it survives a restart of the owner within its
// window, on every backend. A decision is kept until the window ends, so
// that a caller whose call the restart cut finds it when it asks again
// with the same key.

// Permission bounds.
const (
	// DefaultPermissionTimeout is the window of a permission request that
	// names none: the hook's own default.
	DefaultPermissionTimeout = 2 * time.Minute
	// MaxPermissionTimeout caps a request's window: an agent waits on it,
	// and a record outliving it serves no one.
	MaxPermissionTimeout = time.Hour
	// maxPermissionKey bounds the caller's key of a request.
	maxPermissionKey = 512
	// MaxPendingPermissions bounds the requests one member has pending at
	// once: an agent asks one at a time, and a member that gives up on
	// its calls must not pile requests up until their windows end.
	MaxPendingPermissions = 16
)

// Behavior is what a [Decision] on a permission request says.
type Behavior string

// Behaviors, as the agents' hooks spell them.
const (
	BehaviorAllow Behavior = "allow"
	BehaviorDeny  Behavior = "deny"
)

// Decision is the answer to a permission request.
type Decision struct {
	Behavior Behavior `json:"behavior"`
	// Message tells the agent why it was denied; an allow carries none.
	Message string `json:"message,omitempty"`
	// By names who decided: "operator", a lead, or "rule …". Set by
	// [Rendezvous.DecidePermission] from its caller.
	By string `json:"by,omitempty"`
	// Time is when the decision was made.
	Time time.Time `json:"time,omitzero"`
}

// PermissionRequest is a member agent's request to use a tool, as views
// show it and the journal keeps it. The caller of
// [Rendezvous.RequestPermission] sets Key, Tool, Input, Cwd and Timeout;
// the rendezvous sets the rest.
type PermissionRequest struct {
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
	// Timeout is the request's window from Asked; zero means
	// DefaultPermissionTimeout. Only RequestPermission reads it.
	Timeout time.Duration `json:"-"`
}

// permissionKind marks a permission request's record in the journal,
// apart from the turns' records, which have no kind.
const permissionKind = "permission"

// permissionRecord is a request's record in the journal.
type permissionRecord struct {
	Kind string `json:"kind"`
	PermissionRequest
}

// permission is a request the rendezvous knows. Fields guarded by
// Rendezvous.mu.
type permission struct {
	PermissionRequest
	done  chan struct{} // closed when decided or ended undecided
	ended bool          // the window passed, or the fleet was cleaned
	timer *time.Timer   // at Deadline: ends or forgets the request
}

// PermissionPolicy decides some permission requests without asking: it
// returns a decision and true when a rule covers req. It is called with
// the rendezvous's lock held, and must not call the rendezvous.
type PermissionPolicy func(req PermissionRequest) (Decision, bool)

// SetPermissionPolicy makes p decide the permission requests it covers
// from now on; nil asks about every request.
func (r *Rendezvous) SetPermissionPolicy(p PermissionPolicy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.policy = p
}

// RequestPermission raises member's request to use a tool and blocks
// until it is decided (ok true), its window passes (ok false: undecided),
// or ctx ends (ctx.Err()). A request whose Key names one already known,
// of the same member, is that request: a caller cut off by a restart asks
// again with the same key and gets the decision made meanwhile. A
// request a [PermissionPolicy] covers is decided at once. When ctx ends
// the request stays pending until its window passes. A member with
// MaxPendingPermissions requests pending gets [ErrNotPermitted] for a
// new one.
func (r *Rendezvous) RequestPermission(ctx context.Context, member string, req PermissionRequest) (Decision, bool, error) {
	const op = "request permission"
	if err := checkAgentName(op, member); err != nil {
		return Decision{}, false, err
	}
	if req.Tool == "" || len(req.Tool) > 256 {
		return Decision{}, false, newError(CodeInvalidArgument, op, "a tool name of 1 to 256 bytes is required")
	}
	if len(req.Key) > maxPermissionKey {
		return Decision{}, false, newError(CodeInvalidArgument, op, "key of %d bytes, limit %d", len(req.Key), maxPermissionKey)
	}
	if req.Input != "" && !json.Valid([]byte(req.Input)) {
		return Decision{}, false, newError(CodeInvalidArgument, op, "the tool's input is not JSON")
	}
	if n := int64(len(req.Input) + len(req.Cwd)); n > r.store.maxContent {
		return Decision{}, false, newError(CodeContentTooLarge, op, "%d bytes, limit %d", n, r.store.maxContent)
	}
	if req.Timeout < 0 || req.Timeout > MaxPermissionTimeout {
		return Decision{}, false, newError(CodeInvalidArgument, op, "timeout %v is outside 0 to %v", req.Timeout, MaxPermissionTimeout)
	}
	if req.Timeout == 0 {
		req.Timeout = DefaultPermissionTimeout
	}

	r.lockW()
	if r.closed {
		r.unlockW()
		return Decision{}, false, &Error{Code: CodeClosed, Op: op}
	}
	p := r.permissionByKey(member, req.Key)
	if p == nil && r.pendingOf(member) >= MaxPendingPermissions {
		r.unlockW()
		return Decision{}, false, newError(CodeNotPermitted, op, "%s has %d permission requests pending already", quote(member), MaxPendingPermissions)
	}
	if p == nil {
		now := time.Now()
		req.ID, req.Member, req.Asked, req.Deadline, req.Decision = newID("perm-"), member, now, now.Add(req.Timeout), nil
		p = &permission{PermissionRequest: req, done: make(chan struct{})}
		if r.policy != nil {
			if d, ok := r.policy(req); ok {
				d.Time = now
				p.Decision = &d
				close(p.done)
			}
		}
		if err := r.j.savePermission(&p.PermissionRequest); err != nil {
			r.unlockW()
			return Decision{}, false, withOp(op, err)
		}
		r.addPermission(p)
		r.publish(Event{Kind: EventPermissionRequested, Member: member, Permission: p.event()})
		if p.Decision != nil {
			r.publish(Event{Kind: EventPermissionDecided, Member: member, Content: p.Decision.Message, Permission: p.event()})
		}
	}
	r.unlockW()

	select {
	case <-p.done:
	case <-r.done:
		return Decision{}, false, &Error{Code: CodeClosed, Op: op}
	case <-ctx.Done():
		// Decided at the same instant: hand the decision over.
		select {
		case <-p.done:
		default:
			return Decision{}, false, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Decision == nil {
		return Decision{}, false, nil
	}
	return *p.Decision, true, nil
}

// DecidePermission decides the pending permission request id on behalf of
// by (the operator, a lead, a rule), who is recorded with the decision.
// It fails with [ErrUnknownRequest] for an ID the rendezvous does not
// know or whose window passed, [ErrRequestDecided] for one decided
// already, and [ErrInvalidArgument] for a decision that is neither allow
// nor deny, or an empty by; on an error nothing changes.
func (r *Rendezvous) DecidePermission(by, id string, d Decision) error {
	const op = "decide permission"
	if by == "" || len(by) > 256 {
		return newError(CodeInvalidArgument, op, "who decides must be named in 1 to 256 bytes")
	}
	if d.Behavior != BehaviorAllow && d.Behavior != BehaviorDeny {
		return newError(CodeInvalidArgument, op, "behavior %s is neither allow nor deny", quote(string(d.Behavior)))
	}
	if int64(len(d.Message)) > r.store.maxContent {
		return newError(CodeContentTooLarge, op, "%d bytes, limit %d", len(d.Message), r.store.maxContent)
	}
	if d.Behavior == BehaviorAllow {
		d.Message = ""
	}
	r.lockW()
	defer r.unlockW()
	if r.closed {
		return &Error{Code: CodeClosed, Op: op}
	}
	p := r.perms[id]
	if p == nil || p.ended {
		return newError(CodeUnknownRequest, op, "%s", quote(id))
	}
	if p.Decision != nil {
		return newError(CodeRequestDecided, op, "%s, by %s", quote(id), quote(p.Decision.By))
	}
	d.By, d.Time = by, time.Now()
	rec := p.PermissionRequest
	rec.Decision = &d
	if err := r.j.savePermission(&rec); err != nil {
		return withOp(op, err)
	}
	p.Decision = &d
	close(p.done)
	r.publish(Event{Kind: EventPermissionDecided, Member: p.Member, Content: d.Message, Permission: p.event()})
	return nil
}

// PermissionRequests returns the pending permission requests, oldest
// first; nil when there are none.
func (r *Rendezvous) PermissionRequests() []PermissionRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pendingPermissions()
}

// pendingPermissions is PermissionRequests. r.mu must be held.
func (r *Rendezvous) pendingPermissions() []PermissionRequest {
	var out []PermissionRequest
	for _, p := range r.perms {
		if p.Decision == nil && !p.ended {
			out = append(out, p.PermissionRequest)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Asked.Before(out[j].Asked) })
	return out
}

// event returns a copy of p's request for an event. r.mu must be held.
func (p *permission) event() *PermissionRequest {
	c := p.PermissionRequest
	return &c
}

// pendingOf counts member's pending requests. r.mu must be held.
func (r *Rendezvous) pendingOf(member string) int {
	n := 0
	for _, p := range r.perms {
		if p.Member == member && p.Decision == nil && !p.ended {
			n++
		}
	}
	return n
}

// permissionByKey returns member's known request with key, if any.
// r.mu must be held.
func (r *Rendezvous) permissionByKey(member, key string) *permission {
	if key == "" {
		return nil
	}
	p := r.permKeys[permKey{member, key}]
	if p == nil || p.ended {
		return nil
	}
	return p
}

type permKey struct{ member, key string }

// addPermission makes p known until its deadline: then a pending request
// ends undecided, and a decided one is forgotten. r.mu must be held.
func (r *Rendezvous) addPermission(p *permission) {
	if r.perms == nil {
		r.perms = map[string]*permission{}
		r.permKeys = map[permKey]*permission{}
	}
	r.perms[p.ID] = p
	if p.Key != "" {
		r.permKeys[permKey{p.Member, p.Key}] = p
	}
	p.timer = time.AfterFunc(time.Until(p.Deadline), func() {
		r.lockW()
		defer r.unlockW()
		if r.closed || r.perms[p.ID] != p {
			return
		}
		r.endPermission(p, "its window passed undecided")
	})
}

// endPermission forgets p; a pending p ends undecided, with an event that
// says why. r.mu and r.wmu must be held.
func (r *Rendezvous) endPermission(p *permission, why string) {
	p.timer.Stop()
	delete(r.perms, p.ID)
	if r.permKeys[permKey{p.Member, p.Key}] == p {
		delete(r.permKeys, permKey{p.Member, p.Key})
	}
	p.ended = true
	if p.Decision == nil {
		close(p.done)
		r.publish(Event{Kind: EventPermissionExpired, Member: p.Member, Content: why, Permission: p.event()})
	}
	r.j.releasePermission(p.ID)
}

// stopPermissions stops the timers of every request, at Close. r.mu must
// be held.
func (r *Rendezvous) stopPermissions() {
	for _, p := range r.perms {
		p.timer.Stop()
	}
}

// cleanPermissions ends every request, when the fleet is cleaned; the
// journal's records go with its reset. r.mu and r.wmu must be held.
func (r *Rendezvous) cleanPermissions() {
	for _, p := range r.perms {
		p.timer.Stop()
		p.ended = true
		if p.Decision == nil {
			close(p.done)
			r.publish(Event{Kind: EventPermissionExpired, Member: p.Member, Content: "the fleet was cleaned", Permission: p.event()})
		}
	}
	clear(r.perms)
	clear(r.permKeys)
}

// restorePermissions takes up the requests an earlier owner left: those
// still within their window, pending or decided. r.mu must be held.
func (r *Rendezvous) restorePermissions(recs []PermissionRequest) {
	now := time.Now()
	for _, req := range recs {
		if !req.Deadline.After(now) {
			r.j.releasePermission(req.ID)
			continue
		}
		p := &permission{PermissionRequest: req, done: make(chan struct{})}
		if p.Decision != nil {
			close(p.done)
		}
		r.addPermission(p)
	}
}

// savePermission writes req's record, durably on return.
func (j *journal) savePermission(req *PermissionRequest) error {
	rec, err := json.Marshal(permissionRecord{Kind: permissionKind, PermissionRequest: *req})
	if err != nil {
		return newError(CodeInternal, "save permission request", "%v", err)
	}
	if j.closed {
		return &Error{Code: CodeClosed, Op: "save permission request"}
	}
	ctx, cancel := j.ctx()
	defer cancel()
	return j.impl.Save(ctx, req.ID, rec)
}

// releasePermission forgets the record of the request id.
func (j *journal) releasePermission(id string) {
	if j.closed {
		return
	}
	ctx, cancel := j.ctx()
	defer cancel()
	if err := j.impl.Release(ctx, id); err != nil {
		j.log("fleetstate: forget a permission request", "request", id, "err", err)
	}
}

// permissionOf decodes data as a permission request's record; ok is false
// for another kind of record.
func permissionOf(data []byte) (req PermissionRequest, ok bool, valid bool) {
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &head) != nil || head.Kind != permissionKind {
		return PermissionRequest{}, false, false
	}
	var rec permissionRecord
	if json.Unmarshal(data, &rec) != nil || rec.ID == "" || rec.Tool == "" || validateAgentName(rec.Member) != nil {
		return PermissionRequest{}, true, false
	}
	return rec.PermissionRequest, true, true
}
