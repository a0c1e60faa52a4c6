package fleetnats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// Blobs: content too large for one message of JetStream, cut into chunks
// under the keys BLOB.0, BLOB.1, ... of a key-value bucket, BLOB a fresh
// UUID. A blob is never changed once written: whoever names it switches a
// key of another bucket to it with a fenced or compare-and-swap write, and
// purges the blob it replaced after that write landed. A writer that dies
// between writing a blob and naming it leaves the blob unnamed; the
// bucket's owner sweeps those (see Store.Clean and turnLog.load).

// blobRef is what an entry that names a blob holds after kindBlob.
type blobRef struct {
	ID     string `json:"id"`
	Size   int64  `json:"size"`
	Chunks int    `json:"chunks"`
}

// chunkSize returns the largest chunk of a blob on the connection's
// server: chunkMax, or less on a server whose max_payload is lower.
func (f *Fleet) chunkSize() int {
	chunk := chunkMax
	if mp := int(f.nc.MaxPayload()); mp > 0 && mp-envelope < chunk {
		chunk = max(mp-envelope, 1)
	}
	return chunk
}

// writeBlob writes content as a new blob of kv and returns the entry that
// names it: kindBlob, then its blobRef. A blob of which a chunk could not
// be written is purged, best effort.
func (f *Fleet) writeBlob(ctx context.Context, kv jetstream.KeyValue, content []byte) (entry []byte, ref blobRef, err error) {
	chunk := f.chunkSize()
	ref = blobRef{ID: uuid.NewString(), Size: int64(len(content))}
	for off := 0; off < len(content); off += chunk {
		end := min(off+chunk, len(content))
		if _, err := kv.Put(ctx, ref.ID+"."+strconv.Itoa(ref.Chunks), content[off:end]); err != nil {
			f.discardBlob(ctx, kv.Bucket(), ref.ID, "a blob cut short stays until it is swept")
			return nil, ref, err
		}
		ref.Chunks++
	}
	j, err := json.Marshal(ref)
	if err != nil {
		return nil, ref, &fleetstate.Error{Code: fleetstate.CodeInternal, Err: err}
	}
	return append([]byte{kindBlob}, j...), ref, nil
}

func kindOf(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func parseBlobRef(v []byte) (blobRef, error) {
	var ref blobRef
	if kindOf(v) != kindBlob {
		return ref, errors.New("fleetnats: not a blob entry")
	}
	err := json.Unmarshal(v[1:], &ref)
	return ref, err
}

// errBlobGone says that a chunk of a blob was purged while it was read,
// or before.
var errBlobGone = errors.New("fleetnats: blob gone")

// readBlob reads the blob ref names from kv, whole. A chunk is read with
// a direct get, which any replica may answer; one that has not applied
// the chunk yet finds nothing, so a chunk not found is asked of the
// stream's leader before the blob counts as gone.
func (f *Fleet) readBlob(ctx context.Context, kv jetstream.KeyValue, ref blobRef) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(ref.Size))
	for i := range ref.Chunks {
		key := ref.ID + "." + strconv.Itoa(i)
		e, err := kv.Get(ctx, key)
		if err == nil {
			buf.Write(e.Value())
			continue
		}
		if !isNotFound(err) {
			return nil, err
		}
		e, err = leaderKV{KeyValue: kv, f: f}.Get(ctx, key)
		if isNotFound(err) {
			return nil, errBlobGone
		}
		if err != nil {
			return nil, err
		}
		buf.Write(e.Value())
	}
	if int64(buf.Len()) != ref.Size {
		return nil, &fleetstate.Error{Code: fleetstate.CodeInternal,
			Err: fmt.Errorf("fleetnats: blob %s holds %d bytes; its entry says %d", ref.ID, buf.Len(), ref.Size)}
	}
	return buf.Bytes(), nil
}

// discardBlob purges the chunks of blob id from the bucket named bucket
// (its full name), best effort and within blobCleanupTimeout, whether or
// not ctx has ended: a blob left behind is named by nothing, so only its
// space is lost until it is swept, which is what a failure logs (stays).
func (f *Fleet) discardBlob(ctx context.Context, bucket, id, stays string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), blobCleanupTimeout)
	defer cancel()
	st, err := f.stream(ctx, bucket)
	if err == nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(bucket, id+".>")))
	}
	if err != nil {
		f.log.Warn("fleetnats: "+stays, "fleet", f.name, "blob", id, "err", err)
	}
}
