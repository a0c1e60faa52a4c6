package fleetnats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// How the turns are kept.
//
// The bucket NAME-turns holds one key per live turn, "t.TURN", whose value
// is the turn's last record; a finished turn's key is deleted. The owner
// writes by publishing to the bucket's stream with the stream's expected
// last sequence set to the sequence of its own last write: a write of any
// other daemon in between makes it fail, and this owner then knows it was
// replaced (see lease.go). Each owner's first write is the key "epoch",
// which fences out the owner before it.

const (
	turnsBucket = "turns"
	turnPrefix  = "t."
	epochKey    = "epoch"
	// ownerHeader names the ownership that wrote a message, so that an
	// owner whose write timed out can tell whether it landed.
	ownerHeader = "Fleetstate-Owner"
	kvOpHeader  = "KV-Operation"
)

// turnLog is the owner's handle on NAME-turns.
type turnLog struct {
	f       *Fleet
	kv      jetstream.KeyValue
	stream  jetstream.Stream
	subject string // "$KV.BUCKET."
	owner   string // the ownership's ID
	// ownerVal is owner as a header's values, shared by every message:
	// nats.go only reads it.
	ownerVal []string

	mu   sync.Mutex
	last uint64 // the stream's sequence after this owner's last write
	// lastID is the message ID of this owner's last write when it was a
	// deletion not waited for (see release), else empty.
	lastID string
	why    error // set when the ownership is lost: every write fails
	// lost ends when the ownership is lost, with why as its cause: a
	// write waiting on the server (one that was paused) stops waiting
	// then, rather than hold mu, and the loss, up for its whole bound.
	lost     context.Context
	loseWith context.CancelCauseFunc
	// fenced, if set, is told (on a goroutine of its own) when a write
	// finds that another daemon took the fleet over: the ownership whose
	// log this is ends then, not at its lease's next renewal.
	fenced func(error)
	// released is the acknowledgement, not waited for, of the last
	// deletion of a finished turn (see release), and releasedID its turn.
	released   jetstream.PubAckFuture
	releasedID string
	// big holds the turns that had a "b." key in this ownership (records
	// too large for one message: see journal_big.go), each with the blob
	// that key names now, or "" when the record is back under "t.".
	big map[string]string
}

func (f *Fleet) openTurnLog(ctx context.Context, owner string) (*turnLog, error) {
	kv, err := f.kv(ctx, turnsBucket, jetstream.KeyValueConfig{
		Description: "the turns of the fleet " + f.name,
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, err
	}
	name := f.bucketName(turnsBucket)
	stream, err := f.stream(ctx, name)
	if err != nil {
		return nil, unavailable("open the turns", err)
	}
	lost, loseWith := context.WithCancelCause(context.Background())
	return &turnLog{f: f, kv: kv, stream: stream, subject: kvSubject(name, ""), owner: owner, ownerVal: []string{owner},
		lost: lost, loseWith: loseWith}, nil
}

// fence writes this owner's epoch record, expecting the stream's last
// sequence as read just before: from then on no earlier owner's write can
// land. A write of an earlier owner in between (one it sent before it
// stopped, say, which the server stores after this owner's read) makes it
// read and try again.
func (l *turnLog) fence(ctx context.Context) error {
	const op = "take the fleet's turns over"
	for {
		info, err := l.stream.Info(ctx)
		if err != nil {
			return unavailable(op, err)
		}
		err = l.epoch(ctx, info.State.LastSeq)
		if err == nil {
			return nil
		}
		if !isWrongSequence(err) {
			return unavailable(op, err)
		}
		if ctx.Err() != nil {
			return unavailable(op, ctx.Err())
		}
	}
}

// epoch writes this owner's epoch record, expecting last as the stream's
// last sequence. A refusal is the server's: unlike [turnLog.publish], it
// does not end the ownership, which has not begun.
func (l *turnLog) epoch(ctx context.Context, last uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last, l.lastID = last, ""
	seq, err := l.request(ctx, l.message(epochKey, []byte(l.owner), ""))
	if err == nil {
		l.last = seq
	}
	return err
}

// leadWait bounds how long lead tries to have the owner's server elected
// leader of the turns' stream (and half the lease does too: Own waits for
// it), and leadTries how many times it asks.
const (
	leadWait  = 3 * time.Second
	leadTries = 3
)

// lead moves the leadership of the turns' stream to the server this
// owner's connection reaches, when the stream is replicated and that
// server holds a replica but not the leadership. Every write of the owner
// goes to the stream's leader: from another server it crosses a route to
// the leader and its acknowledgement comes back the same way, one hop more
// each way per write (on three nodes on loopback the round trip of a
// delegation was 16% faster with the leader on the owner's server; across
// machines a hop is a network round trip). It is best effort, at the start
// of an ownership: the stream stays available through the move (an
// election without the wait for a lost leader to time out), and a
// refusal, an error or an election elsewhere (a replica that lags is not
// elected) is logged and changes nothing else.
func (l *turnLog) lead(ctx context.Context, within time.Duration) {
	here := l.f.nc.ConnectedServerName()
	if here == "" {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start, from, asked := time.Now(), "", 0
	var stepErr, infoErr error // the last stepdown request's, the last look's
	for {
		info, err := l.stream.Info(wctx)
		if infoErr = err; err == nil {
			if info.Cluster == nil || info.Cluster.Leader == "" && asked == 0 {
				return // not replicated, or no leader to move
			}
			if info.Cluster.Leader == here {
				if asked > 0 {
					l.f.log.Info("fleetnats: the turns' stream is led by the owner's server", "fleet", l.f.name, "from", from, "to", here, "took", time.Since(start))
				}
				return
			}
			if asked == 0 && !slices.ContainsFunc(info.Cluster.Replicas, func(p *jetstream.PeerInfo) bool { return p.Name == here && !p.Offline }) {
				return // no replica here: it cannot lead
			}
			if info.Cluster.Leader != "" { // else an election is on: wait for it
				if asked == leadTries {
					l.f.log.Warn("fleetnats: the turns' stream is not led by the owner's server", "fleet", l.f.name, "leader", info.Cluster.Leader, "owner's server", here, "asked", asked, "err", stepErr)
					return
				}
				if from == "" {
					from = info.Cluster.Leader
				}
				asked++
				stepErr = l.stepDown(wctx, info.Config.Name, here)
			}
		}
		select {
		case <-wctx.Done():
			l.f.log.Warn("fleetnats: the turns' stream is not led by the owner's server", "fleet", l.f.name, "was led by", from, "owner's server", here, "asked", asked, "within", within, "err", errors.Join(stepErr, infoErr))
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stepDown asks the leader of the stream to hand its leadership to the
// server named preferred.
func (l *turnLog) stepDown(ctx context.Context, stream, preferred string) error {
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": preferred}})
	resp, err := l.f.nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, body)
	if err != nil {
		return err
	}
	var r struct {
		Success bool                `json:"success"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return err
	}
	if r.Error != nil {
		return r.Error
	}
	if !r.Success {
		return errors.New("the stream's leader did not step down")
	}
	return nil
}

// lose makes every later write fail with why, and ends the one in flight.
func (l *turnLog) lose(why error) {
	l.loseWith(why)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.why == nil {
		l.why = why
	}
}

// publish writes one message of the bucket, key's value data or, with op
// "DEL", its deletion, fenced by the stream's last sequence, and waits for
// the server's acknowledgement.
func (l *turnLog) publish(ctx context.Context, key string, data []byte, op string) error {
	const what = "write the fleet's turns"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.why != nil {
		return l.why
	}
	l.checkReleased()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.lost, cancel)()
	msg := l.message(key, data, op)
	seq, err := l.request(ctx, msg)
	if err == nil {
		l.last, l.lastID = seq, ""
		return nil
	}
	if isWrongSequence(err) || isWrongMsgID(err) {
		// Another daemon wrote: unless the write was this owner's own,
		// which landed although its acknowledgement was lost, or a
		// deletion it did not wait for did not land, the fleet has a new
		// owner.
		if seq, ok := l.ownLast(ctx); ok {
			l.last, l.lastID = seq, ""
			msg = l.message(key, data, op)
			seq, err = l.request(ctx, msg)
			if err == nil {
				l.last = seq
				return nil
			}
		}
		if isWrongSequence(err) || isWrongMsgID(err) {
			l.why = &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: what, Err: errors.New("another daemon took the fleet over")}
			if l.fenced != nil {
				go l.fenced(l.why)
			}
			return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: what, Err: err}
		}
	}
	return unavailable(what, err)
}

// message returns the next write of the bucket, key's value data or, with
// op "DEL", its deletion, with the fence of fenceHeaders. l.mu is held.
func (l *turnLog) message(key string, data []byte, op string) *nats.Msg {
	h := nats.Header{ownerHeader: l.ownerVal}
	if op != "" {
		h[kvOpHeader] = []string{op}
	}
	l.fenceHeaders(h)
	return &nats.Msg{Subject: l.subject + key, Data: data, Header: h}
}

// request publishes msg and waits for the stream's acknowledgement: the
// sequence msg got, or the server's refusal as a [*jetstream.APIError]. It
// is what jetstream's PublishMsg does, short of what the journal does not
// use: its options and a decoding of the acknowledgement by reflection
// (the profile of a round trip in process showed it).
func (l *turnLog) request(ctx context.Context, msg *nats.Msg) (uint64, error) {
	resp, err := l.f.nc.RequestMsgWithContext(ctx, msg)
	// No responders: the stream has no leader for a moment (an
	// election); a few tries, as jetstream's PublishMsg makes.
	for try := 0; errors.Is(err, nats.ErrNoResponders) && try < noResponderTries; try++ {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(noResponderWait):
		}
		resp, err = l.f.nc.RequestMsgWithContext(ctx, msg)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return 0, err
	}
	return parsePubAck(resp.Data)
}

// The tries of a write that no server answers, and the wait before each,
// as jetstream's PublishMsg has them.
const (
	noResponderTries = jetstream.DefaultPubRetryAttempts
	noResponderWait  = jetstream.DefaultPubRetryWait
)

// parsePubAck returns the sequence of an acknowledgement,
// {"stream":"KV_NAME-turns","seq":N,...}, or the error it carries.
func parsePubAck(data []byte) (uint64, error) {
	if !bytes.Contains(data, []byte(`"error":`)) {
		if i := bytes.Index(data, []byte(`"seq":`)); i >= 0 {
			rest := data[i+len(`"seq":`):]
			n := 0
			for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
				n++
			}
			if seq, err := strconv.ParseUint(string(rest[:n]), 10, 64); err == nil && seq > 0 {
				return seq, nil
			}
		}
	}
	var ack struct {
		Error  *jetstream.APIError `json:"error"`
		Stream string              `json:"stream"`
		Seq    uint64              `json:"seq"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return 0, jetstream.ErrInvalidJSAck
	}
	return ack.Seq, nil
}

// ownLast returns the stream's last sequence if its last message is this
// owner's.
func (l *turnLog) ownLast(ctx context.Context) (uint64, bool) {
	info, err := l.stream.Info(ctx)
	if err != nil || info.State.LastSeq == 0 {
		return 0, false
	}
	// A message at a sequence never changes, so any replica that has it
	// may answer (a direct get, which also answers while the leader is
	// being elected); one that does not have it yet sends this to the
	// leader.
	if m, err := l.stream.GetMsg(ctx, info.State.LastSeq); err == nil && m.Header.Get(ownerHeader) == l.owner {
		return info.State.LastSeq, true
	}
	m, err := l.f.leaderMsg(ctx, l.kv.Bucket(), msgGet{Seq: info.State.LastSeq})
	if err != nil || m.Header.Get(ownerHeader) != l.owner {
		return 0, false
	}
	return info.State.LastSeq, true
}

func (l *turnLog) save(ctx context.Context, id string, rec []byte) error {
	if !validKeyToken(id) {
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "write the fleet's turns", Err: errors.New("turn ID " + id + " is no key")}
	}
	if !l.fits(rec) {
		return l.saveBig(ctx, id, rec)
	}
	if err := l.publish(ctx, turnPrefix+id, rec, ""); err != nil {
		return err
	}
	if _, big := l.bigOf(id); big {
		l.unbig(ctx, id)
	}
	return nil
}

// release deletes the turn's key without waiting for the server to
// acknowledge it: the turn is finished and its last record, already
// acknowledged, says so, so the deletion is housekeeping that no caller
// waits for (a deletion that never lands leaves a finished turn that a
// later owner restores as finished, as a crash between the two would).
// The round trip of a delegation no longer pays for it.
//
// The deletion is fenced like any write, and the write after it expects
// the sequence the deletion gets if it lands: this owner's last plus one,
// since a stream numbers its messages one by one and one connection's
// messages are stored in the order sent. If it did not land, or landed
// with another sequence, that write fails its fence, finds its own
// message last in the stream (ownLast), and is sent again; if another
// daemon wrote, the fleet has a new owner, as for any write.
func (l *turnLog) release(ctx context.Context, id string) error {
	const what = "forget a finished turn"
	if !validKeyToken(id) {
		return nil
	}
	if blob, big := l.bigOf(id); big {
		return l.releaseBig(ctx, id, blob)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.why != nil {
		return l.why
	}
	l.checkReleased()
	msg := l.message(turnPrefix+id, nil, "DEL")
	msgID := l.owner + "." + strconv.FormatUint(l.last+1, 10)
	msg.Header[jetstream.MsgIDHeader] = []string{msgID}
	ack, err := l.f.js.PublishMsgAsync(msg)
	if err != nil {
		// Not sent: the stream's last message is still this owner's.
		return unavailable(what, err)
	}
	l.last, l.lastID = l.last+1, msgID
	l.released, l.releasedID = ack, id
	return nil
}

// fenceHeaders sets in h the fence of the next write: the stream's last
// sequence is this owner's last, and when that last was a deletion not
// waited for, the last message is that deletion, named by its message ID.
// The sequence alone would not do then: had the deletion been refused and
// another daemon written one message, that message would have the very
// sequence expected. l.mu is held.
func (l *turnLog) fenceHeaders(h nats.Header) {
	h[jetstream.ExpectedLastSeqHeader] = []string{strconv.FormatUint(l.last, 10)}
	if l.lastID != "" {
		h[jetstream.ExpectedLastMsgIDHeader] = []string{l.lastID}
	}
}

// isWrongMsgID reports a write refused because the stream's last message
// is not the one its fence names.
func isWrongMsgID(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLastMsgID
}

// errCodeWrongLastMsgID is the server's JSStreamWrongLastMsgIDErrF, which
// the client does not name.
const errCodeWrongLastMsgID jetstream.ErrorCode = 10070

// checkReleased logs the failure of the last deletion, if its outcome is
// known: the next write's fence corrects the sequence, and the finished
// turn stays in the bucket until the sessions are reset. l.mu is held.
func (l *turnLog) checkReleased() {
	if l.released == nil {
		return
	}
	select {
	case <-l.released.Ok():
		l.settled(nil)
	case err := <-l.released.Err():
		l.settled(err)
	default:
	}
}

// settled forgets the last deletion, whose outcome err is known (an
// acknowledgement future says it once). l.mu is held.
func (l *turnLog) settled(err error) {
	if err != nil {
		l.f.log.Warn("fleetnats: a finished turn was not forgotten", "fleet", l.f.name, "turn", l.releasedID, "err", err)
	}
	l.released, l.releasedID = nil, ""
}

// drain waits, within ctx, for the outcome of the last deletion of a
// finished turn, so that what follows (a load, the ownership's end) sees
// it landed or failed.
func (l *turnLog) drain(ctx context.Context) {
	l.mu.Lock()
	ack := l.released
	l.mu.Unlock()
	if ack == nil {
		return
	}
	var err error
	select {
	case <-ack.Ok():
	case err = <-ack.Err():
	case <-ctx.Done():
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released == ack {
		l.settled(err)
	}
}

// load returns the live turns' records.
//
// It reads them with freshWatch, so that a watch served by a replica
// behind the leader does not miss a turn the previous owner had written
// and had acknowledged.
func (l *turnLog) load(ctx context.Context) ([][]byte, error) {
	const op = "read the fleet's turns"
	l.drain(ctx)
	var turns map[string]loadedTurn
	var order []string
	err := l.f.freshWatch(ctx, l.kv, []string{turnPrefix + ">", bigPrefix + ">"},
		func() { turns, order = make(map[string]loadedTurn), nil },
		func(e jetstream.KeyValueEntry) {
			id, big := strings.CutPrefix(e.Key(), bigPrefix)
			if !big {
				id = strings.TrimPrefix(e.Key(), turnPrefix)
			}
			lt, ok := turns[id]
			if !ok {
				order = append(order, id)
			}
			if big {
				lt.b = e
			} else {
				lt.t = e
			}
			turns[id] = lt
		})
	if err != nil {
		return nil, unavailable(op, err)
	}
	l.mu.Lock()
	l.big = nil
	l.mu.Unlock()
	recs := make([][]byte, 0, len(order))
	for _, id := range order {
		rec, ok, err := l.resolve(ctx, id, turns[id])
		if err != nil {
			return nil, err
		}
		if ok {
			recs = append(recs, rec)
		}
	}
	return recs, l.sweep(ctx)
}

// reset deletes every turn, fenced like any write.
func (l *turnLog) reset(ctx context.Context) error {
	const op = "reset the fleet's turns"
	lister, err := l.kv.ListKeysFiltered(ctx, turnPrefix+">", bigPrefix+">")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return unavailable(op, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	if err := ctx.Err(); err != nil {
		// The list ends early when ctx does: deleting part of it
		// would report a reset that left turns behind.
		return unavailable(op, err)
	}
	for _, k := range keys {
		if err := l.publish(ctx, k, nil, "DEL"); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.big = nil
	l.mu.Unlock()
	return l.sweep(ctx)
}

// validKeyToken reports whether s can be one token of a key.
func validKeyToken(s string) bool {
	if s == "" || strings.ContainsAny(s, ".*> ") {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '=') {
			return false
		}
	}
	return true
}
