package fleetnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reads that the leader of a stream answers. A direct get, what a
// key-value bucket's Get and a stream's GetMsg make, is answered by any
// replica, which may lag behind what the leader has acknowledged; the
// stream API's message get is answered by the leader alone, whether or
// not the stream allows direct gets.

// leaderKV is a bucket whose Get its stream's leader answers; its other
// methods are the bucket's own.
type leaderKV struct {
	jetstream.KeyValue
	f *Fleet
}

// Get returns the entry of key as the stream's leader has it. A key never
// written, deleted or purged is [jetstream.ErrKeyNotFound].
func (kv leaderKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	m, err := kv.f.leaderMsg(ctx, kv.Bucket(), msgGet{LastFor: kvSubject(kv.Bucket(), key)})
	if err != nil {
		return nil, err
	}
	if m.Header.Get(kvOpHeader) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return nil, jetstream.ErrKeyNotFound // a delete or purge marker
	}
	return leaderEntry{bucket: kv.Bucket(), key: key, msg: m}, nil
}

// leaderEntry is an entry that leaderKV.Get read.
type leaderEntry struct {
	bucket, key string
	msg         storedMsg
}

func (e leaderEntry) Bucket() string                  { return e.bucket }
func (e leaderEntry) Key() string                     { return e.key }
func (e leaderEntry) Value() []byte                   { return e.msg.Data }
func (e leaderEntry) Revision() uint64                { return e.msg.Seq }
func (e leaderEntry) Created() time.Time              { return e.msg.Time }
func (e leaderEntry) Delta() uint64                   { return 0 }
func (e leaderEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// msgGet is a request of the stream API's message get: the message of a
// sequence, or the last one of a subject.
type msgGet struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
}

// storedMsg is a message the stream API's message get returned.
type storedMsg struct {
	Seq    uint64      `json:"seq"`
	Hdrs   []byte      `json:"hdrs"`
	Data   []byte      `json:"data"`
	Time   time.Time   `json:"time"`
	Header nats.Header `json:"-"`
}

// kvSubject is the subject of key in bucket (a pattern when key is one).
func kvSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// leaderMsg asks the leader of bucket's stream for the message req names. No such
// message is [jetstream.ErrKeyNotFound]; an error the API answers is a
// [*jetstream.APIError], so that an election in progress reads as the
// backend being unavailable.
func (f *Fleet) leaderMsg(ctx context.Context, bucket string, req msgGet) (storedMsg, error) {
	stream := "KV_" + bucket
	body, err := json.Marshal(req)
	if err != nil {
		return storedMsg{}, err
	}
	reply, err := f.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return storedMsg{}, err
	}
	var resp struct {
		Message *storedMsg          `json:"message"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return storedMsg{}, fmt.Errorf("a message get of %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return storedMsg{}, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return storedMsg{}, fmt.Errorf("a message get of %s: %w", stream, resp.Error)
	case resp.Message == nil:
		return storedMsg{}, fmt.Errorf("a message get of %s: an answer without a message", stream)
	}
	m := *resp.Message
	if len(m.Hdrs) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(m.Hdrs); err != nil {
			return storedMsg{}, fmt.Errorf("a message get of %s: its headers: %w", stream, err)
		}
	}
	return m, nil
}

// freshWatch reads the live entries of kv under the keys of filters with
// a watch, calling each for every one (a deletion's marker is skipped),
// after reset. A watch's consumer may sit on a replica that lags behind
// the stream's leader, so freshWatch first asks the leader for the
// sequence of the newest message under filters, and watches again (reset,
// then each anew; within ctx) until a watch has seen that far: what it
// reads includes every write acknowledged before it was called. On a
// single replica, the leader's own, one watch does.
func (f *Fleet) freshWatch(ctx context.Context, kv jetstream.KeyValue, filters []string, reset func(), each func(jetstream.KeyValueEntry)) error {
	several, err := f.replicated(ctx, kv.Bucket())
	if err != nil {
		return err
	}
	var newest uint64
	for _, filter := range filters {
		if !several {
			break // nothing to catch up with
		}
		m, err := f.leaderMsg(ctx, kv.Bucket(), msgGet{LastFor: kvSubject(kv.Bucket(), filter)})
		switch {
		case isNotFound(err):
		case err != nil:
			return err
		default:
			newest = max(newest, m.Seq)
		}
	}
	for try := 0; ; try++ {
		reset()
		seen, err := watchAll(ctx, kv, filters, each)
		if err != nil || seen >= newest {
			return err
		}
		f.log.Info("fleetnats: a watch was served by a replica behind the leader; watching again",
			"fleet", f.name, "bucket", kv.Bucket(), "seen", seen, "newest", newest)
		select {
		case <-ctx.Done():
			return fmt.Errorf("a replica caught up with sequence %d: %w", newest, ctx.Err())
		case <-time.After(min(time.Duration(try+1)*50*time.Millisecond, time.Second)):
		}
	}
}

// watchAll is one watch of freshWatch: it returns the highest revision
// it saw, a deletion's included.
func watchAll(ctx context.Context, kv jetstream.KeyValue, filters []string, each func(jetstream.KeyValueEntry)) (uint64, error) {
	// A copy: WatchFiltered writes its subjects over the keys it is given.
	w, err := kv.WatchFiltered(ctx, slices.Clone(filters))
	if err != nil {
		return 0, err
	}
	defer stopWatch(w)
	var seen uint64
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case u, ok := <-w.Updates():
			if !ok {
				return 0, errors.New("watch ended")
			}
			e = u
		}
		if e == nil {
			return seen, nil
		}
		seen = max(seen, e.Revision())
		if e.Operation() == jetstream.KeyValuePut {
			each(e)
		}
	}
}
