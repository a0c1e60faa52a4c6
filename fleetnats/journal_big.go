package fleetnats

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Records too large for one message.
//
// A turn's record carries its brief, question, answer and outcome, each up
// to the store's content limit (16 MiB), while a message of JetStream
// carries at most the server's max_payload (1 MiB by default). A record
// that does not fit is written first as a blob of the bucket
// NAME-turnblobs (see blob.go); then the key "b.TURN" gets the blob's
// reference, by the same fenced write as any record, so a daemon that
// lost the fleet may leave a blob behind but never changes a key. Records
// are opaque, so which kind a turn's record is shows in its key, not its
// value: "t.TURN" holds a record itself, "b.TURN" names a blob.
//
// A turn whose record changes kind has its other key deleted after the
// new one is written, so should a crash leave both, the later (the higher
// revision) is the turn's record; a turn that had a "b." key in this
// ownership is forgotten by deleting both, the one not current first. The
// blob a key named before is purged once the key names another or is
// deleted; a blob that no current key names (its writer died between the
// two writes, or its fenced write was refused) is swept by the next
// owner's load. The bucket is apart from the store's NAME-blobs, which
// cleaning the sessions purges.

const (
	turnBlobsBucket = "turnblobs"
	bigPrefix       = "b."
)

// fits reports whether rec goes into one message.
func (l *turnLog) fits(rec []byte) bool { return len(rec) <= l.f.chunkSize() }

// turnBlobs returns NAME-turnblobs, created if it does not exist: the
// blobs of turn records, and of briefs to panes of other daemons, too
// large for one message.
func (f *Fleet) turnBlobs(ctx context.Context) (jetstream.KeyValue, error) {
	return f.kv(ctx, turnBlobsBucket, jetstream.KeyValueConfig{
		Description: "the turn records and briefs of fleet " + f.name + " too large for one message",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
}

// bigOf reports whether the turn had a "b." key in this ownership, and the
// blob that key names now ("" if the record went back into "t.").
func (l *turnLog) bigOf(id string) (blob string, big bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	blob, big = l.big[id]
	return blob, big
}

// setBig notes what the turn's "b." key names (blob, or "" when it is
// deleted or stale) and returns what it named before.
func (l *turnLog) setBig(id, blob string) (old string, was bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, was = l.big[id]
	if l.big == nil {
		l.big = make(map[string]string)
	}
	l.big[id] = blob
	return old, was
}

// saveBig writes rec, too large for one message, as a blob named by the
// turn's "b." key.
func (l *turnLog) saveBig(ctx context.Context, id string, rec []byte) error {
	kv, err := l.f.turnBlobs(ctx)
	if err != nil {
		return err
	}
	entry, ref, err := l.f.writeBlob(ctx, kv, rec)
	if err != nil {
		return unavailable("write a large turn record", err)
	}
	if err := l.publish(ctx, bigPrefix+id, entry, ""); err != nil {
		// The write may have landed with its acknowledgement lost, so
		// the blob stays; if no key names it, the next load sweeps it.
		return err
	}
	if old, _ := l.setBig(id, ref.ID); old != "" {
		l.dropBlob(ctx, old)
		return nil
	}
	// The record before, if any, was under "t.".
	l.deleteStale(ctx, turnPrefix+id)
	return nil
}

// deleteStale deletes the key of a turn's record that a later write of its
// other key replaced. The record is already durable, so a deletion that
// fails is only logged: should the stale key stay, it is the one of lower
// revision, which a load passes over, and forgetting the turn deletes
// both keys.
func (l *turnLog) deleteStale(ctx context.Context, key string) {
	if err := l.publish(ctx, key, nil, "DEL"); err != nil {
		l.f.log.Warn("fleetnats: a turn's replaced record stays until the turn is forgotten", "fleet", l.f.name, "key", key, "err", err)
	}
}

// unbig follows a record written under "t." for a turn that had a "b." key.
func (l *turnLog) unbig(ctx context.Context, id string) {
	old, _ := l.setBig(id, "")
	if old != "" {
		l.deleteStale(ctx, bigPrefix+id)
		l.dropBlob(ctx, old)
	}
}

// releaseBig forgets a turn that had a "b." key in this ownership: both
// keys deleted, the one not current first, waited for; then its blob.
func (l *turnLog) releaseBig(ctx context.Context, id, blob string) error {
	keys := []string{bigPrefix + id, turnPrefix + id}
	if blob != "" {
		keys[0], keys[1] = keys[1], keys[0]
	}
	for _, k := range keys {
		if err := l.publish(ctx, k, nil, "DEL"); err != nil {
			return err
		}
	}
	l.mu.Lock()
	delete(l.big, id)
	l.mu.Unlock()
	if blob != "" {
		l.dropBlob(ctx, blob)
	}
	return nil
}

func (l *turnLog) dropBlob(ctx context.Context, blob string) {
	l.f.discardBlob(ctx, l.f.bucketName(turnBlobsBucket), blob, "a large turn record stays until the next owner sweeps it")
}

// loadedTurn is what a load found of one turn: the entries of its two
// keys, either may be nil.
type loadedTurn struct {
	t, b jetstream.KeyValueEntry
}

// resolve returns the turn's record from what a load found, notes a turn
// with a "b." key, and ok false for a turn whose record is lost (its blob
// was purged: it was being forgotten).
func (l *turnLog) resolve(ctx context.Context, id string, lt loadedTurn) (rec []byte, ok bool, err error) {
	if lt.b == nil {
		return lt.t.Value(), true, nil
	}
	if lt.t != nil && lt.t.Revision() > lt.b.Revision() {
		l.setBig(id, "")
		return lt.t.Value(), true, nil
	}
	ref, perr := parseBlobRef(lt.b.Value())
	if perr != nil {
		l.f.log.Warn("fleetnats: a turn's key names no blob; the turn is skipped", "fleet", l.f.name, "turn", id, "err", perr)
		return nil, false, nil
	}
	kv, err := l.f.turnBlobs(ctx)
	if err != nil {
		return nil, false, err
	}
	rec, err = l.f.readBlob(ctx, kv, ref)
	if errors.Is(err, errBlobGone) {
		l.f.log.Warn("fleetnats: the large record of a turn is gone; the turn is skipped", "fleet", l.f.name, "turn", id)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, unavailable("read a large turn record", err)
	}
	l.setBig(id, ref.ID)
	return rec, true, nil
}

// sweep purges the blobs of NAME-turnblobs, if it exists, that no turn's
// current key names.
func (l *turnLog) sweep(ctx context.Context) error {
	const op = "sweep the large turn records"
	kv, err := l.f.js.KeyValue(ctx, l.f.bucketName(turnBlobsBucket))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return unavailable(op, err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return unavailable(op, err)
	}
	l.mu.Lock()
	named := make(map[string]bool, len(l.big))
	for _, b := range l.big {
		named[b] = true
	}
	l.mu.Unlock()
	var unnamed []string
	for k := range lister.Keys() {
		b, _, _ := strings.Cut(k, ".")
		if !named[b] {
			named[b] = true // once
			unnamed = append(unnamed, b)
		}
	}
	for _, b := range unnamed {
		l.dropBlob(ctx, b)
	}
	return nil
}
