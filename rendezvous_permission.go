package fleetstate

import (
	"cmp"
	"context"
	"time"

	"github.com/fleetstate/fleetstate/internal/names"
	"github.com/fleetstate/fleetstate/internal/permit"
)

// Permission requests (Claude Code's and Codex's PermissionRequest hook)
// are written through the [Journal] as records of their own kind beside
// the turns, so that a request, and its decision until its window ends,
// survive a restart of the owner on every backend.

// Permission bounds.
const (
	// DefaultPermissionTimeout is the window of a permission request that
	// names none: the hook's own default.
	DefaultPermissionTimeout = 2 * time.Minute
	// MaxPermissionTimeout caps a request's window: an agent waits on it,
	// and a record outliving it serves no one.
	MaxPermissionTimeout = time.Hour
	// MaxPendingPermissions bounds the requests one member has pending at
	// once: an agent asks one at a time, and a member that gives up on
	// its calls must not pile requests up until their windows end.
	MaxPendingPermissions = 16
)

// Behavior is what a [Decision] on a permission request says.
type Behavior = permit.Behavior

// Behaviors, as the agents' hooks spell them.
const (
	BehaviorAllow = permit.Allow
	BehaviorDeny  = permit.Deny
)

// Decision is the answer to a permission request: a [Behavior], the
// message that tells the agent why it was denied, who decided ("operator",
// a lead, or "rule …", set by [Rendezvous.DecidePermission]) and when.
type Decision = permit.Decision

// PermissionRequest is a member agent's request to use a tool, as views show it
// and the journal keeps it. The caller of [Rendezvous.RequestPermission] sets
// Key, Tool, Input, Cwd and Timeout (zero means DefaultPermissionTimeout); the
// rendezvous sets the rest. A request with the Key of one still known, of the
// same member, is that request.
type PermissionRequest = permit.Request

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

// RequestPermission raises member's request to use a tool and blocks until it
// is decided (ok true), its window passes (ok false: undecided), or ctx ends
// (ctx.Err()). A request whose Key names one already known, of the same member,
// is that request: a caller cut off by a restart asks again with the same key
// and gets the decision made meanwhile. A request a [PermissionPolicy] covers
// is decided at once, and forgotten (asked again, the policy decides it again).
// When ctx ends the request stays pending until its window passes. A member
// with MaxPendingPermissions requests pending gets [ErrNotPermitted] for a new
// one; of its decided requests, the last 64 are known by their key, each
// without its input.
func (r *Rendezvous) RequestPermission(ctx context.Context, member string, req PermissionRequest) (Decision, bool, error) {
	const op = "request permission"
	if err := checkAgentName(op, member); err != nil {
		return Decision{}, false, err
	}
	if err := permit.Check(&req, MaxPermissionTimeout); err != nil {
		return Decision{}, false, newError(CodeInvalidArgument, op, "%v", err)
	}
	if n := int64(len(req.Input) + len(req.Cwd)); n > r.store.maxContent {
		return Decision{}, false, newError(CodeContentTooLarge, op, "%d bytes, limit %d", n, r.store.maxContent)
	}
	if req.Timeout == 0 {
		req.Timeout = DefaultPermissionTimeout
	}

	r.lockW()
	if r.closed {
		r.unlockW()
		return Decision{}, false, &Error{Code: CodeClosed, Op: op}
	}
	p := r.perms.ByKey(member, req.Key)
	if p == nil && r.perms.PendingOf(member) >= MaxPendingPermissions {
		r.unlockW()
		return Decision{}, false, newError(CodeNotPermitted, op, "%s has %d permission requests pending already", quote(member), MaxPendingPermissions)
	}
	if p == nil {
		now := time.Now()
		req.ID, req.Member, req.Asked, req.Deadline, req.Decision = names.NewID("perm-"), member, now, now.Add(req.Timeout), nil
		if r.policy != nil {
			if d, ok := r.policy(req); ok {
				d.Time = now
				req.Decision = &d
				asked, decided := req, req
				r.publish(Event{Kind: EventPermissionRequested, Member: member, Permission: &asked})
				r.publish(Event{Kind: EventPermissionDecided, Member: member, Content: d.Message, Permission: &decided, By: d.By})
				r.unlockW()
				return d, true, nil
			}
		}
		p = permit.NewEntry(req)
		if err := r.j.savePermission(&p.Request); err != nil {
			r.unlockW()
			return Decision{}, false, withOp(op, err)
		}
		r.addPermission(p)
		r.publish(Event{Kind: EventPermissionRequested, Member: member, Permission: p.Copy()})
	}
	r.unlockW()

	select {
	case <-p.Done:
	case <-r.done:
		return Decision{}, false, &Error{Code: CodeClosed, Op: op}
	case <-ctx.Done():
		// Decided at the same instant: hand the decision over.
		select {
		case <-p.Done:
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
// already, [ErrInvalidArgument] for a decision that is neither allow nor
// deny, or an empty by, and [ErrContentTooLarge] for a message over 4 KiB;
// on these errors nothing changes. A decision whose write fails is
// [ErrDecisionUnconfirmed]: it is written again. The decided request keeps
// its key and its decision, not its input.
func (r *Rendezvous) DecidePermission(by, id string, d Decision) error {
	const op = "decide permission"
	if err := permit.CheckDecision(by, &d); err != nil {
		return newError(CodeInvalidArgument, op, "%v", err)
	}
	if len(d.Message) > permit.MaxMessage {
		return newError(CodeContentTooLarge, op, "%d bytes, limit %d", len(d.Message), permit.MaxMessage)
	}
	r.lockW()
	defer r.unlockW()
	if r.closed {
		return &Error{Code: CodeClosed, Op: op}
	}
	p := r.perms.Get(id)
	if p == nil {
		return newError(CodeUnknownRequest, op, "%s", quote(id))
	}
	if done := cmp.Or(p.Decision, p.Unconfirmed); done != nil {
		return newError(CodeRequestDecided, op, "%s, by %s", quote(id), quote(done.By))
	}
	d.By, d.Time = by, time.Now()
	p.Unconfirmed = &d
	if err := r.writeDecision(p); err != nil {
		return newError(CodeDecisionUnconfirmed, op, "%s: its write failed (%s) and is tried again until it goes through", quote(id), CodeOf(err))
	}
	return nil
}

// writeDecision writes p.Unconfirmed, p's decision once a write goes
// through; until then it writes again later. r.mu and r.wmu must be held.
func (r *Rendezvous) writeDecision(p *permit.Entry) error {
	d := *p.Unconfirmed
	rec := permit.Decided(p.Request)
	rec.Decision = &d
	if err := r.write(func() error { return r.j.savePermission(&rec) }); err != nil {
		p.Retry(r.onPermission(p, func() { _ = r.writeDecision(p) }))
		return err
	}
	asked := p.Copy()
	asked.Decision = &d
	r.j.releasePermission(r.perms.Decide(p, d))
	r.publish(Event{Kind: EventPermissionDecided, Member: p.Member, Content: d.Message, Permission: asked, By: d.By})
	return nil
}

// PermissionRequests returns the pending permission requests, oldest
// first; nil when there are none.
func (r *Rendezvous) PermissionRequests() []PermissionRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.perms.Pending()
}

// addPermission makes p known until its deadline: then a pending request
// ends undecided, and a decided one is forgotten. r.mu must be held.
func (r *Rendezvous) addPermission(p *permit.Entry) {
	r.j.releasePermission(r.perms.Add(p, r.onPermission(p, func() { r.endPermission(p, "timeout", "its window passed undecided") })))
}

// onPermission returns a timer's callback that runs fn with r.mu and r.wmu
// held, unless the rendezvous is closed or p is known no more.
func (r *Rendezvous) onPermission(p *permit.Entry, fn func()) func() {
	return func() {
		r.lockW()
		defer r.unlockW()
		if !r.closed && r.perms.Holds(p) {
			fn()
		}
	}
}

// endPermission forgets p; a pending p ends undecided, with an event that
// says what ended it (by) and why. r.mu and r.wmu must be held.
func (r *Rendezvous) endPermission(p *permit.Entry, by, why string) {
	if r.perms.End(p) {
		r.publish(Event{Kind: EventPermissionExpired, Member: p.Member, Content: why, Permission: p.Copy(), By: by})
	}
	r.j.releasePermission(p.ID)
}

// cleanPermissions ends every request, when the fleet is cleaned; the
// journal's records go with its reset. r.mu and r.wmu must be held.
func (r *Rendezvous) cleanPermissions() {
	r.perms.Clean(func(p *permit.Entry) {
		r.publish(Event{Kind: EventPermissionExpired, Member: p.Member, Content: "the fleet was cleaned", Permission: p.Copy(), By: "clean"})
	})
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
		r.addPermission(permit.NewEntry(req))
	}
}

// savePermission writes req's record, durably on return.
func (j *journal) savePermission(req *PermissionRequest) error {
	rec, err := permit.Encode(req)
	if err != nil {
		return newError(CodeInternal, "save permission request", "%v", err)
	}
	if j.Closed() {
		return &Error{Code: CodeClosed, Op: "save permission request"}
	}
	return j.Save(req.ID, rec)
}

// releasePermission forgets the record of the request id; "" is none.
func (j *journal) releasePermission(id string) {
	if id != "" && !j.Closed() {
		j.Forget(id, "a permission request")
	}
}
