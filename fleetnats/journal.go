package fleetnats

import (
	"context"
	"errors"
	"strings"
	"sync"

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

	mu   sync.Mutex
	last uint64 // the stream's sequence after this owner's last write
	why  error  // set when the ownership is lost: every write fails
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
	stream, err := f.js.Stream(ctx, "KV_"+name)
	if err != nil {
		return nil, unavailable("open the turns", err)
	}
	return &turnLog{f: f, kv: kv, stream: stream, subject: "$KV." + name + ".", owner: owner}, nil
}

// fence writes this owner's epoch record, expecting the stream's last
// sequence as read just before: from then on no earlier owner's write can
// land. A write of the earlier owner in between makes it read and try
// again.
func (l *turnLog) fence(ctx context.Context) error {
	const op = "take the fleet's turns over"
	for {
		info, err := l.stream.Info(ctx)
		if err != nil {
			return unavailable(op, err)
		}
		l.mu.Lock()
		l.last = info.State.LastSeq
		l.mu.Unlock()
		err = l.publish(ctx, epochKey, []byte(l.owner), "")
		if err == nil {
			return nil
		}
		if fleetstate.CodeOf(err) != fleetstate.CodeUnavailable || !isWrongSequence(errors.Unwrap(err)) {
			return err
		}
		if ctx.Err() != nil {
			return unavailable(op, ctx.Err())
		}
	}
}

// lose makes every later write fail with why.
func (l *turnLog) lose(why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.why == nil {
		l.why = why
	}
}

// publish writes one message of the bucket, key's value data or, with op
// "DEL", its deletion, fenced by the stream's last sequence.
func (l *turnLog) publish(ctx context.Context, key string, data []byte, op string) error {
	const what = "write the fleet's turns"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.why != nil {
		return l.why
	}
	msg := nats.NewMsg(l.subject + key)
	msg.Data = data
	msg.Header.Set(ownerHeader, l.owner)
	if op != "" {
		msg.Header.Set(kvOpHeader, op)
	}
	ack, err := l.f.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequence(l.last))
	if err == nil {
		l.last = ack.Sequence
		return nil
	}
	if isWrongSequence(err) {
		// Another daemon wrote: unless the write was this owner's own,
		// which landed although its acknowledgement was lost, the fleet
		// has a new owner.
		if seq, ok := l.ownLast(ctx); ok {
			l.last = seq
			ack, err = l.f.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequence(l.last))
			if err == nil {
				l.last = ack.Sequence
				return nil
			}
		}
		if isWrongSequence(err) {
			l.why = &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: what, Err: errors.New("another daemon took the fleet over")}
			return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: what, Err: err}
		}
	}
	return unavailable(what, err)
}

// ownLast returns the stream's last sequence if its last message is this
// owner's.
func (l *turnLog) ownLast(ctx context.Context) (uint64, bool) {
	info, err := l.stream.Info(ctx)
	if err != nil || info.State.LastSeq == 0 {
		return 0, false
	}
	m, err := l.stream.GetMsg(ctx, info.State.LastSeq)
	if err != nil || m.Header.Get(ownerHeader) != l.owner {
		return 0, false
	}
	return info.State.LastSeq, true
}

func (l *turnLog) save(ctx context.Context, id string, rec []byte) error {
	if !validKeyToken(id) {
		return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "write the fleet's turns", Err: errors.New("turn ID " + id + " is no key")}
	}
	return l.publish(ctx, turnPrefix+id, rec, "")
}

func (l *turnLog) release(ctx context.Context, id string) error {
	if !validKeyToken(id) {
		return nil
	}
	return l.publish(ctx, turnPrefix+id, nil, "DEL")
}

// load returns the live turns' records.
func (l *turnLog) load(ctx context.Context) ([][]byte, error) {
	const op = "read the fleet's turns"
	w, err := l.kv.Watch(ctx, turnPrefix+">", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, unavailable(op, err)
	}
	defer w.Stop()
	var recs [][]byte
	for {
		select {
		case <-ctx.Done():
			return nil, unavailable(op, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, unavailable(op, errors.New("watch ended"))
			}
			if e == nil {
				return recs, nil
			}
			recs = append(recs, e.Value())
		}
	}
}

// reset deletes every turn, fenced like any write.
func (l *turnLog) reset(ctx context.Context) error {
	const op = "reset the fleet's turns"
	lister, err := l.kv.ListKeysFiltered(ctx, turnPrefix+">")
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
	for _, k := range keys {
		if err := l.publish(ctx, k, nil, "DEL"); err != nil {
			return err
		}
	}
	return nil
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
