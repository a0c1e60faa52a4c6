package fleetnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// How the owner reaches a pane on another daemon.
//
// A terminal pane lives on the machine of the daemon whose roster names it,
// and only that daemon can write to it; the fleet's owner, which runs the
// rendezvous, may be another daemon. The pane's daemon serves the pane's
// [fleetstate.Member] port over core NATS request-reply ([Fleet.ServeMembers])
// and the owner calls it through a [RemoteMember]:
//
//	FLEET.member.TOKEN.deliver   {"id","content","timeout_ms"} -> {}
//	FLEET.member.TOKEN.status    {"timeout_ms"}                -> {"status"}
//	FLEET.member.TOKEN.tail      {"lines","timeout_ms"}        -> {"text","clipped"}
//	FLEET.member.TOKEN.report    {"status","timeout_ms"}       -> {}
//	FLEET.member.TOKEN.call      {"body","timeout_ms"}         -> {"body"}
//
// call carries a request of the daemons' own, about the agent of the
// pane, to the daemon that serves it ([RemoteMember.Call],
// [ServeOptions].Call): the work tree of a member on that machine, the
// checkout of a lead there.
//
// TOKEN is the member's name in base64url without padding (a name may
// hold '.', '*', '>' or spaces, which a subject token cannot, and KV keys
// allow only [-/_=.a-zA-Z0-9]). A reply that failed carries
// {"error":{"code","message"}}, the code a [fleetstate.Code], so that
// errors.Is(err, fleetstate.ErrMemberGone) holds on the owner's side as on
// the pane's. timeout_ms is what is left of the caller's deadline: the
// pane's daemon gives up on the call a little before, so that its answer
// still finds the caller waiting.
//
// Which panes exist is the bucket FLEET-panes: one key per pane (its
// TOKEN), whose value is a [PaneRecord]. A daemon claims a pane with
// Create, so of two daemons whose rosters name the same member the first
// serves it and the second logs an error and does not; it keeps the claim
// alive with an Update on its revision every TTL/3, as the fleet's lease
// is kept, and the bucket's TTL (with limit markers, so that watchers see
// it) removes the claim of a daemon that died. The owner watches the
// bucket ([Fleet.WatchPanes]) to learn which remote panes exist.
//
// A delivery is never made twice because a reply was lost. The rendezvous
// puts a message whose Deliver failed back at the head of the member's
// queue and delivers it again later; when the failure was only that no
// answer came in time, the pane may have received it. So a RemoteMember
// names each delivery with an ID and, until an answer comes, gives the same
// content the same ID again; the pane's daemon remembers the IDs it
// delivered (for DeliveryMemory) and answers a repeated one with the first
// one's result instead of writing to the pane again. A delivery the pane's
// port reported as failed is tried again, as the rendezvous does with a
// local pane. A daemon that restarts forgets its IDs: a delivery whose
// answer was lost at that moment may be made twice.

// DefaultPaneTTL is how long a pane's registration lives unrefreshed when
// [ServeOptions.TTL] is zero: how long the owner may take to learn that
// the daemon of a pane died.
const DefaultPaneTTL = 15 * time.Second

// DeliveryMemory is how long a daemon remembers the ID of a delivery it
// made, to answer a repeated request instead of delivering again. A
// rendezvous tries a failed delivery again within a few poll intervals.
const DeliveryMemory = 10 * time.Minute

// markerTTL is the least time a limit marker can live.
const markerTTL = time.Second

const panesBucket = "panes"

// Reporter is implemented by a pane's port that takes statuses reported by
// the agent's hooks, such as a tmux pane. [Fleet.ServeMembers] passes the
// reports that reach it for such a pane (from [RemoteMember.Report]) to
// its port.
type Reporter interface {
	Report(fleetstate.Status)
}

// PaneRecord is what the fleet's panes bucket says of the daemon that
// serves a pane.
type PaneRecord struct {
	Daemon string    `json:"daemon"` // the serving daemon's ID (ServeOptions.Daemon)
	Host   string    `json:"host,omitempty"`
	Since  time.Time `json:"since"` // when the daemon claimed the pane
	// Worktree says the pane's agent has a git work tree on the daemon's
	// machine (ServeOptions.Worktrees).
	Worktree bool `json:"worktree,omitempty"`
}

// ServeOptions configure [Fleet.ServeMembers]. A nil *ServeOptions, and
// each zero field, means the documented default.
type ServeOptions struct {
	// Daemon identifies this daemon in the registrations, and must be
	// unique among the fleet's live daemons. A daemon that restarts with
	// the same ID takes its panes back at once, without waiting for its
	// old registrations to expire. Empty means a fresh random ID.
	Daemon string
	// Host names this daemon's machine in the registrations. Empty means
	// os.Hostname.
	Host string
	// TTL is how long a registration lives unrefreshed. Default
	// DefaultPaneTTL. Every daemon of a fleet must use the same: the
	// bucket keeps the first one's, and this daemon refreshes at a third
	// of the bucket's.
	TTL time.Duration
	// Worktrees names the panes whose agents have a git work tree on
	// this daemon's machine, as their registrations say ([Fleet.Panes]).
	Worktrees []string
	// Call answers [RemoteMember.Call] for the agent of one of this
	// daemon's panes, within ctx. Nil answers every call
	// ERR_INVALID_ARGUMENT.
	Call func(ctx context.Context, agent string, body json.RawMessage) (json.RawMessage, error)
}

// memberSubject returns the subject of op on the member whose name is
// encoded as tok.
func (f *Fleet) memberSubject(tok, op string) string {
	return f.name + ".member." + tok + "." + op
}

// memberToken encodes a member's name as one subject token and KV key,
// as the store encodes a name (encodeToken).
func memberToken(name string) string { return encodeToken(name) }

// memberName decodes a token of memberToken: one name has one token only
// (decodeToken).
func memberName(tok string) (string, error) {
	name, err := decodeToken(tok)
	if err != nil {
		return "", fmt.Errorf("fleetnats: %q is not a member token", tok)
	}
	if err := fleetstate.ValidateAgentName(name); err != nil {
		return "", err
	}
	return name, nil
}

// panesKV returns the fleet's panes bucket, created with ttl if it does
// not exist.
func (f *Fleet) panesKV(ctx context.Context, ttl time.Duration) (jetstream.KeyValue, error) {
	if ttl <= 0 {
		ttl = DefaultPaneTTL
	}
	return f.kv(ctx, panesBucket, jetstream.KeyValueConfig{
		Description:    "the panes of the fleet " + f.name + " and the daemons that serve them",
		History:        1,
		TTL:            ttl,
		LimitMarkerTTL: max(ttl, markerTTL),
		Storage:        jetstream.FileStorage,
	})
}

// The wire format of the member subjects.

type memberRequest struct {
	TimeoutMS int64  `json:"timeout_ms"`
	ID        string `json:"id,omitempty"` // of a delivery
	Content   string `json:"content,omitempty"`
	// Blob names the content instead, in NAME-turnblobs, when it is too
	// large for one message.
	Blob   *blobRef        `json:"blob,omitempty"`
	Lines  int             `json:"lines,omitempty"`
	Status string          `json:"status,omitempty"` // of a report
	Body   json.RawMessage `json:"body,omitempty"`   // of a call
}

type memberReply struct {
	Status  string          `json:"status,omitempty"`
	Text    string          `json:"text,omitempty"`
	Clipped bool            `json:"clipped,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"` // of a call
	Error   *wireError      `json:"error,omitempty"`
	// InDoubt says that the daemon does not know whether the delivery
	// was made: it gave up waiting for an earlier request of the same ID.
	InDoubt bool `json:"in_doubt,omitempty"`
}

type wireError struct {
	Code    fleetstate.Code `json:"code"`
	Message string          `json:"message"`
}

// MemberServer serves this daemon's panes to the fleet's owner; see
// [Fleet.ServeMembers]. It is safe for concurrent use.
type MemberServer struct {
	f      *Fleet
	kv     jetstream.KeyValue
	daemon string
	host   string
	every  time.Duration    // between refreshes of the registrations
	panes  map[string]*pane // by name; the map is not changed after ServeMembers
	ctx    context.Context  // parent of the port calls; cancelled by Close
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the refresher has returned
	wg     sync.WaitGroup

	call       func(context.Context, string, json.RawMessage) (json.RawMessage, error) // ServeOptions.Call
	mu         sync.Mutex
	closed     bool                 // guarded by mu
	deliveries map[string]*delivery // guarded by mu; by pane token and delivery ID
}

// pane is one pane this daemon has. Its claim fields are written by
// ServeMembers, then by the refresher only, then by Close once the
// refresher has returned; they are read under MemberServer.mu by Served.
type pane struct {
	name     string
	tok      string
	port     fleetstate.Member
	claimed  bool               // guarded by MemberServer.mu: this daemon holds the registration
	rev      uint64             // of the registration
	rec      PaneRecord         // as registered
	sub      *nats.Subscription // while claimed
	conflict string             // the daemon whose claim was last logged, to log a conflict once
}

// delivery is one delivery a pane's daemon made or is making, remembered
// by its ID.
type delivery struct {
	done chan struct{} // closed when err is set
	err  error
	at   time.Time
}

// ServeMembers serves the ports of this daemon's panes, by member name, to
// the fleet's owner, which reaches them with [Fleet.RemoteMember], and
// registers them in the fleet's panes bucket, which the owner watches
// with [Fleet.WatchPanes]. A port that implements [Reporter] takes the
// statuses the owner forwards with [RemoteMember.Report].
//
// A pane registered by another live daemon is not served: the error is
// logged, and this daemon claims the pane when the other's registration
// goes. ctx bounds the first registrations; serving goes on until Close.
// It fails if a name is not a valid agent name or the bucket cannot be
// reached; a registration that fails otherwise is logged and tried again
// at the next refresh.
func (f *Fleet) ServeMembers(ctx context.Context, ports map[string]fleetstate.Member, opts *ServeOptions) (*MemberServer, error) {
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	if o.Daemon == "" {
		o.Daemon = uuid.NewString()
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	for name, port := range ports {
		if err := fleetstate.ValidateAgentName(name); err != nil {
			return nil, err
		}
		if port == nil {
			return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "serve members", Err: fmt.Errorf("member %q has no port", name)}
		}
	}
	cctx, cancel := f.ctx(ctx)
	defer cancel()
	kv, err := f.panesKV(cctx, o.TTL)
	if err != nil {
		return nil, err
	}
	// The bucket keeps the TTL of the daemon that created it: refresh at
	// a third of that one.
	ttl := o.TTL
	if st, err := kv.Status(cctx); err == nil && st.TTL() > 0 {
		ttl = st.TTL()
	} else if ttl <= 0 {
		ttl = DefaultPaneTTL
	}
	s := &MemberServer{
		f: f, kv: kv, daemon: o.Daemon, host: o.Host, every: ttl / 3, call: o.Call,
		panes: make(map[string]*pane, len(ports)),
		stop:  make(chan struct{}), done: make(chan struct{}),
		deliveries: map[string]*delivery{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	since := time.Now().UTC().Truncate(time.Millisecond)
	for name, port := range ports {
		s.panes[name] = &pane{name: name, tok: memberToken(name), port: port,
			rec: PaneRecord{Daemon: o.Daemon, Host: o.Host, Since: since, Worktree: slices.Contains(o.Worktrees, name)}}
	}
	for _, name := range s.sorted() {
		s.claim(cctx, s.panes[name])
	}
	go s.refresh()
	return s, nil
}

// sorted returns the names of the panes in order, so that logs and claims
// are in a stable order.
func (s *MemberServer) sorted() []string {
	names := make([]string, 0, len(s.panes))
	for name := range s.panes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Daemon returns the ID under which this daemon registers its panes.
func (s *MemberServer) Daemon() string { return s.daemon }

// Served returns the names of the panes this daemon serves now, sorted:
// those it holds the registration of.
func (s *MemberServer) Served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, name := range s.sorted() {
		if s.panes[name].claimed {
			names = append(names, name)
		}
	}
	return names
}

// claim registers p with Create and, if this daemon won it, serves it.
func (s *MemberServer) claim(ctx context.Context, p *pane) {
	p.rec.Since = time.Now().UTC().Truncate(time.Millisecond)
	data, _ := json.Marshal(p.rec)
	rev, err := s.kv.Create(ctx, p.tok, data)
	other := "another daemon"
	if errors.Is(err, jetstream.ErrKeyExists) {
		if e, gerr := s.kv.Get(ctx, p.tok); gerr == nil {
			var rec PaneRecord
			if json.Unmarshal(e.Value(), &rec) == nil {
				other = fmt.Sprintf("daemon %s on %s (since %s)", rec.Daemon, rec.Host, rec.Since.Format(time.RFC3339))
				if rec.Daemon == s.daemon {
					// This daemon's own registration: its last
					// refresh landed although the answer was lost,
					// or the daemon restarted with the same ID.
					// Take it back.
					rev, err = s.kv.Update(ctx, p.tok, data, e.Revision())
				}
			}
		}
	}
	if isWrongSequence(err) {
		if p.conflict != other {
			p.conflict = other
			s.f.log.Error("fleetnats: a pane of this daemon's roster is served by another daemon; this daemon does not serve it: name each pane in one roster only",
				"member", p.name, "served_by", other, "this_daemon", s.daemon)
		}
		return
	}
	if err != nil {
		s.f.log.Warn("fleetnats: cannot register a pane; trying again", "member", p.name, "err", err)
		return
	}
	sub, err := s.f.nc.Subscribe(s.f.memberSubject(p.tok, "*"), func(m *nats.Msg) { s.handle(p, m) })
	if err == nil {
		err = s.f.nc.FlushWithContext(ctx)
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		s.f.log.Warn("fleetnats: cannot serve a pane; trying again", "member", p.name, "err", err)
		_ = s.kv.Delete(ctx, p.tok, jetstream.LastRevision(rev))
		return
	}
	if p.conflict != "" {
		s.f.log.Info("fleetnats: this daemon serves the pane now", "member", p.name)
		p.conflict = ""
	}
	s.mu.Lock()
	p.claimed, p.rev, p.sub = true, rev, sub
	s.mu.Unlock()
}

// unclaim stops serving p, whose registration is no longer this daemon's.
func (s *MemberServer) unclaim(p *pane) {
	s.mu.Lock()
	p.claimed = false
	sub := p.sub
	p.sub = nil
	s.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}

// refresh keeps the registrations alive and claims the panes not yet
// claimed, every TTL/3, until Close.
func (s *MemberServer) refresh() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for _, name := range s.sorted() {
			p := s.panes[name]
			ctx, cancel := context.WithTimeout(s.ctx, min(s.every, s.f.timeout))
			if p.claimed {
				data, _ := json.Marshal(p.rec)
				rev, err := s.kv.Update(ctx, p.tok, data, p.rev)
				switch {
				case err == nil:
					s.mu.Lock()
					p.rev = rev
					s.mu.Unlock()
				case isWrongSequence(err) || errors.Is(err, jetstream.ErrKeyNotFound):
					// The registration expired (this daemon was cut off
					// for longer than the TTL) or another daemon holds
					// it: stop serving, and claim it again below.
					s.f.log.Warn("fleetnats: this daemon's registration of a pane was lost", "member", p.name, "err", err)
					s.unclaim(p)
				default:
					s.f.log.Warn("fleetnats: cannot refresh a pane's registration", "member", p.name, "err", err)
				}
			}
			if !p.claimed {
				s.claim(ctx, p)
			}
			cancel()
		}
	}
}

// Close stops serving the panes and removes their registrations, so the
// owner learns at once that they are gone from this daemon. It waits for
// the calls in progress, whose contexts it cancels. It is idempotent.
func (s *MemberServer) Close() error {
	if !stopLoop(&s.mu, &s.closed, s.stop, s.done) {
		return nil
	}
	s.cancel()
	for _, p := range s.panes {
		s.mu.Lock()
		sub := p.sub
		p.sub = nil
		s.mu.Unlock()
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), s.f.timeout)
	defer cancel()
	var errs []error
	for _, name := range s.sorted() {
		p := s.panes[name]
		if !p.claimed {
			continue
		}
		err := s.kv.Delete(ctx, p.tok, jetstream.LastRevision(p.rev))
		if err != nil && !isWrongSequence(err) {
			errs = append(errs, err)
		}
		s.unclaim(p)
	}
	if len(errs) > 0 {
		return unavailable("unregister panes", errors.Join(errs...))
	}
	return nil
}

// handle answers one request for p, in a goroutine of its own so that a
// slow pane does not hold up the others, nor a slow delivery a status
// read.
func (s *MemberServer) handle(p *pane, m *nats.Msg) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		rep := s.serve(p, m)
		data, _ := json.Marshal(rep)
		_ = m.Respond(data)
	}()
}

// serve runs one request on p's port.
func (s *MemberServer) serve(p *pane, m *nats.Msg) memberReply {
	op := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var req memberRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return replyError(&fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: err})
	}
	// Give up a little before the caller does, so that the answer finds
	// it waiting; a request whose deadline passed is abandoned.
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond * 9 / 10
	if timeout <= 0 {
		timeout = s.f.timeout
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	var rep memberReply
	var err error
	switch op {
	case "deliver":
		content := req.Content
		if req.Blob != nil {
			if content, err = s.brief(ctx, *req.Blob); err != nil {
				return replyError(err)
			}
		}
		var inDoubt bool
		inDoubt, err = s.deliver(ctx, p, req.ID, content)
		if inDoubt {
			rep := replyError(unavailable("deliver", err))
			rep.InDoubt = true
			return rep
		}
	case "status":
		var st fleetstate.Status
		st, err = p.port.Status(ctx)
		rep.Status = st.String()
	case "tail":
		rep.Text, rep.Clipped, err = p.port.Tail(ctx, req.Lines)
	case "report":
		var st fleetstate.Status
		st, err = fleetstate.ParseStatus(req.Status)
		if err == nil {
			if r, ok := p.port.(Reporter); ok {
				r.Report(st)
			} else {
				err = &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "report", Err: fmt.Errorf("the pane of member %q takes no reported statuses", p.name)}
			}
		}
	case "call":
		if s.call == nil {
			err = &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errors.New("this daemon takes no calls")}
			break
		}
		rep.Body, err = s.call(ctx, p.name, req.Body)
	default:
		err = &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errors.New("no such member operation")}
	}
	if err != nil {
		return replyError(err)
	}
	return rep
}

// fitsMessage reports whether content, as a JSON string, fits in one
// message with room to spare: escapes may make it up to six times longer.
func (f *Fleet) fitsMessage(content string) bool {
	chunk := f.chunkSize()
	if len(content) <= chunk/6 {
		return true
	}
	if len(content) > chunk {
		return false
	}
	j, err := json.Marshal(content)
	return err == nil && len(j) <= chunk
}

// brief reads the content of a delivery from the blob ref names.
func (s *MemberServer) brief(ctx context.Context, ref blobRef) (string, error) {
	kv, err := s.f.turnBlobs(ctx)
	if err == nil {
		var data []byte
		if data, err = s.f.readBlob(ctx, kv, ref); err == nil {
			return string(data), nil
		}
	}
	return "", unavailable("read a brief to deliver", err)
}

// deliver delivers content to p once per delivery ID: a request that
// repeats an ID waits for the first one's result and returns it, unless
// the first one failed, when it tries again. inDoubt reports that ctx
// ended while an earlier request of the ID was still delivering.
func (s *MemberServer) deliver(ctx context.Context, p *pane, id, content string) (inDoubt bool, err error) {
	if id == "" {
		return false, p.port.Deliver(ctx, content)
	}
	key := p.tok + "." + id
	for {
		s.mu.Lock()
		d := s.deliveries[key]
		if d == nil || (isClosed(d.done) && d.err != nil) {
			now := time.Now()
			for k, old := range s.deliveries {
				if isClosed(old.done) && now.Sub(old.at) > DeliveryMemory {
					delete(s.deliveries, k)
				}
			}
			d = &delivery{done: make(chan struct{}), at: now}
			s.deliveries[key] = d
			s.mu.Unlock()
			err := p.port.Deliver(ctx, content)
			s.mu.Lock()
			d.err, d.at = err, time.Now()
			close(d.done)
			s.mu.Unlock()
			return false, err
		}
		s.mu.Unlock()
		select {
		case <-d.done:
			if d.err == nil {
				return false, nil
			}
			// It failed: this request tries again.
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// replyError carries err with its code.
func replyError(err error) memberReply {
	return memberReply{Error: &wireError{Code: fleetstate.CodeOf(err), Message: err.Error()}}
}

// RemoteMember is the [fleetstate.Member] port of a pane that another
// daemon of the fleet serves ([Fleet.ServeMembers]): each call is a NATS
// request to that daemon, bounded by its context (or, without a deadline,
// by the fleet's timeout). It routes by the member's name, not by daemon:
// a pane whose daemon restarts, or that another daemon takes over, is
// reached again without a new RemoteMember.
//
// When no daemon serves the pane, or none answers in time, Status and Tail
// fail with [fleetstate.CodeUnavailable] (the rendezvous reads the status
// as UNKNOWN, never deliverable) and so does Deliver: never with
// [fleetstate.ErrMemberGone], since the daemon may only be restarting. The
// rendezvous then keeps the message queued, and a RemoteMember gives the
// same content the same delivery ID until an answer comes, so that a
// delivery whose answer was lost is not made twice. Errors of the pane's
// port keep their codes: errors.Is(err, fleetstate.ErrMemberGone) holds
// for a pane that is gone for good.
//
// The zero RemoteMember is not valid; use [Fleet.RemoteMember]. A
// RemoteMember is safe for concurrent use.
type RemoteMember struct {
	f    *Fleet
	name string
	tok  string

	mu      sync.Mutex
	pending *pendingDelivery // guarded by mu; the delivery whose answer is still to come
}

type pendingDelivery struct {
	id, content string
}

// RemoteMember returns the port of the member name's pane, served by
// another daemon of the fleet. The owner registers it with
// [fleetstate.Rendezvous.AddMember] for each remote pane [Fleet.WatchPanes]
// reports.
func (f *Fleet) RemoteMember(name string) *RemoteMember {
	return &RemoteMember{f: f, name: name, tok: memberToken(name)}
}

// Name returns the member's name.
func (r *RemoteMember) Name() string { return r.name }

// Deliver implements [fleetstate.Member].
func (r *RemoteMember) Deliver(ctx context.Context, content string) error {
	r.mu.Lock()
	if r.pending == nil || r.pending.content != content {
		r.pending = &pendingDelivery{id: uuid.NewString(), content: content}
	}
	p := r.pending
	r.mu.Unlock()
	req := memberRequest{ID: p.id, Content: content}
	if !r.f.fitsMessage(content) {
		// Too large for one message: the pane's daemon reads it from a
		// blob, which is purged when the call returns (a later attempt,
		// with the same delivery ID, writes its own).
		kv, err := r.f.turnBlobs(ctx)
		if err != nil {
			return err
		}
		_, ref, err := r.f.writeBlob(ctx, kv, []byte(content))
		if err != nil {
			return unavailable(fmt.Sprintf("deliver to member %q", r.name), err)
		}
		defer r.f.discardBlob(ctx, kv.Bucket(), ref.ID, "a delivered brief stays until the next owner sweeps it")
		req.Content, req.Blob = "", &ref
	}
	rep, answered, err := r.call(ctx, "deliver", req)
	if answered && !rep.InDoubt {
		r.mu.Lock()
		if r.pending == p {
			r.pending = nil
		}
		r.mu.Unlock()
	}
	return err
}

// Status implements [fleetstate.Member].
func (r *RemoteMember) Status(ctx context.Context) (fleetstate.Status, error) {
	rep, _, err := r.call(ctx, "status", memberRequest{})
	if err != nil {
		return fleetstate.StatusUnknown, err
	}
	st, err := fleetstate.ParseStatus(rep.Status)
	if err != nil {
		return fleetstate.StatusUnknown, err
	}
	return st, nil
}

// Tail implements [fleetstate.Member].
func (r *RemoteMember) Tail(ctx context.Context, lines int) (string, bool, error) {
	rep, _, err := r.call(ctx, "tail", memberRequest{Lines: lines})
	if err != nil {
		return "", false, err
	}
	return rep.Text, rep.Clipped, nil
}

// Report passes a status that the agent's hooks reported (to the owner,
// which does not have the pane) to the pane's daemon, whose port takes it
// if it implements [Reporter]; a port that does not fails with
// [fleetstate.CodeInvalidArgument]. The owner then wakes the member's
// watcher ([fleetstate.Rendezvous.Wake]) as for a local pane.
func (r *RemoteMember) Report(ctx context.Context, st fleetstate.Status) error {
	_, _, err := r.call(ctx, "report", memberRequest{Status: st.String()})
	return err
}

// Call passes body, a request of the daemons' own about the agent, to the
// daemon that serves its pane, and returns that daemon's answer
// ([ServeOptions].Call). Both must fit in a NATS message.
func (r *RemoteMember) Call(ctx context.Context, body json.RawMessage) (json.RawMessage, error) {
	rep, _, err := r.call(ctx, "call", memberRequest{Body: body})
	return rep.Body, err
}

// call makes one request of op. answered reports whether the pane's daemon
// answered, with a result or an error.
func (r *RemoteMember) call(ctx context.Context, op string, req memberRequest) (rep memberReply, answered bool, err error) {
	what := fmt.Sprintf("%s member %q", op, r.name)
	parent := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.f.timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	if left <= 0 || ctx.Err() != nil {
		if err := parent.Err(); err != nil {
			return rep, false, err
		}
		return rep, false, unavailable(what, context.DeadlineExceeded)
	}
	req.TimeoutMS = max(left.Milliseconds(), 1)
	data, err := json.Marshal(req)
	if err != nil {
		return rep, false, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: what, Err: err}
	}
	if limit := r.f.nc.MaxPayload(); limit > 0 && int64(len(data)) > limit {
		return rep, false, &fleetstate.Error{Code: fleetstate.CodeContentTooLarge, Op: what,
			Err: fmt.Errorf("%d bytes, more than the %d a NATS message may carry", len(data), limit)}
	}
	msg, err := r.f.nc.RequestWithContext(ctx, r.f.memberSubject(r.tok, op), data)
	switch {
	case err == nil:
	case errors.Is(err, nats.ErrNoResponders):
		return rep, false, unavailable(what, errors.New("no daemon of the fleet serves the member's pane"))
	case parent.Err() != nil:
		return rep, false, parent.Err()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return rep, false, unavailable(what, errors.New("the daemon of the member's pane did not answer in time"))
	default:
		return rep, false, unavailable(what, err)
	}
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return memberReply{}, true, unavailable(what, fmt.Errorf("malformed answer: %w", err))
	}
	if rep.Error != nil {
		return rep, true, &fleetstate.Error{Code: rep.Error.Code, Op: what, Err: errors.New(rep.Error.Message)}
	}
	return rep, true, nil
}

var _ fleetstate.Member = (*RemoteMember)(nil)

// Panes returns the registrations of the panes the fleet's daemons serve
// now, by agent name.
func (f *Fleet) Panes(ctx context.Context) (map[string]PaneRecord, error) {
	cctx, cancel := f.ctx(ctx)
	defer cancel()
	kv, err := f.panesKV(cctx, 0)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(cctx)
	if err != nil {
		return nil, unavailable("list the fleet's panes", err)
	}
	defer keys.Stop()
	out := map[string]PaneRecord{}
	for key := range keys.Keys() {
		name, err := memberName(key)
		if err != nil {
			continue
		}
		e, err := kv.Get(cctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // gone meanwhile
		} else if err != nil {
			return nil, unavailable("read the fleet's panes", err)
		}
		var rec PaneRecord
		if json.Unmarshal(e.Value(), &rec) == nil {
			out[name] = rec
		}
	}
	return out, nil
}

// WatchPanes tells fn which panes the fleet's daemons serve: first each
// pane registered now, with present true, before WatchPanes returns; then
// each change, as it happens: a pane registered (true), or unregistered
// or whose daemon's registration expired (false). A pane is reported
// present once until it is reported gone, however often its daemon
// refreshes it or another daemon takes it over. Panes of this daemon are
// reported too: the caller skips those it serves itself.
//
// fn is called from one goroutine at a time. The watch ends when stop is
// called or ctx ends; stop waits until fn has returned for the last time,
// so fn must not call it. If no daemon registered a pane yet, WatchPanes
// creates the bucket with DefaultPaneTTL.
func (f *Fleet) WatchPanes(ctx context.Context, fn func(name string, present bool)) (stop func(), err error) {
	cctx, cancel := f.ctx(ctx)
	kv, err := f.panesKV(cctx, 0)
	cancel()
	if err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithCancel(ctx)
	w, err := kv.WatchAll(wctx)
	if err != nil {
		wcancel()
		return nil, unavailable("watch the fleet's panes", err)
	}
	present := map[string]bool{}
	apply := func(e jetstream.KeyValueEntry) {
		name, err := memberName(e.Key())
		if err != nil {
			f.log.Warn("fleetnats: a key of the panes bucket names no member", "key", e.Key(), "err", err)
			return
		}
		is := e.Operation() == jetstream.KeyValuePut
		if present[name] == is {
			return
		}
		if is {
			present[name] = true
		} else {
			delete(present, name)
		}
		fn(name, is)
	}
	done := make(chan struct{})
	var stopped sync.Once
	stop = func() {
		stopped.Do(func() {
			wcancel()
			_ = w.Stop()
		})
		<-done
	}
	// The initial values, before WatchPanes returns.
	ictx, icancel := f.ctx(ctx)
	defer icancel()
	for initial := true; initial; {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				close(done)
				stop()
				return nil, unavailable("watch the fleet's panes", errors.New("the watch ended"))
			case e == nil:
				initial = false
			default:
				apply(e)
			}
		case <-ictx.Done():
			go drain(w, done)
			stop()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, unavailable("watch the fleet's panes", errors.New("the initial values did not come in time"))
		}
	}
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e != nil && wctx.Err() == nil {
				apply(e)
			}
		}
	}()
	return stop, nil
}

// drain reads a stopped watch's updates until the channel closes: the
// watch blocks on a full channel otherwise.
func drain(w jetstream.KeyWatcher, done chan struct{}) {
	defer close(done)
	for range w.Updates() {
	}
}
