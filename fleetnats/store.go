package fleetnats

// The store's sessions and files in JetStream.
//
// Everything but large content lives in one key-value bucket, the index
// ("NAME-files", keys in keys.go), so that Clean is one purge of one
// stream and a put is one compare-and-swap of one key:
//
//   - "run" holds the current session and the run log, as the state
//     directory's current_run.txt and previous_run_log.txt would: the
//     first line "ID:::NAME" (empty when there is none), then one line per
//     session that was current before. StartSession changes it with
//     Update(revision), so the new session and its log line are one step.
//   - A file's key holds its content inline ("f" then the bytes) when it
//     is at most inlineMax bytes, or a reference to an immutable blob ("b"
//     then JSON). A folder marker is "d".
//
// A blob is content cut into chunks of at most chunkMax bytes, under the
// keys BLOB.0, BLOB.1, ... of the "NAME-blobs" bucket, BLOB a fresh UUID.
// It is written whole before an index entry names it and never changes:
// an overwrite writes a new blob and switches the entry with
// Update(revision), then purges the old blob. A reader that finds a chunk
// gone was overtaken by such an overwrite and reads the entry again. A
// writer that dies between writing a blob and switching the entry leaves
// the blob behind, unnamed; Clean removes it.
//
// Messages of JetStream are at most the server's max_payload (1 MiB by
// default) and a reconnecting client buffers nothing (see Connect), so a
// call that failed for want of the server did not happen later either.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sizes of what the store writes in one message.
const (
	// inlineMax is the largest content kept in its index entry: a get of
	// it is one read, and a list reads it with its entry.
	inlineMax = 256 << 10
	// replicatedInlineMax is inlineMax where the buckets have several
	// replicas. There the index is read through its stream's leader (see
	// Fleet.leaderReads), whose answer carries the content as base64 in
	// JSON: about 16 µs more per KiB than a direct get, which a blob's
	// chunk, never changed, may use. Past about 8 KiB a blob reads faster.
	replicatedInlineMax = 8 << 10
	// chunkMax is the largest chunk of a blob, well below the 1 MiB
	// max_payload of a default server; a server configured lower gets
	// smaller chunks (see limits).
	chunkMax = 512 << 10
	// envelope is room left in a message for its headers and subject.
	envelope = 8 << 10
	// blobCleanupTimeout bounds the removal of a blob that a failed put
	// wrote, after the put's own context may have ended.
	blobCleanupTimeout = 5 * time.Second
)

// Kinds of index entries: the first byte of the value.
const (
	kindFolder = 'd'
	kindInline = 'f'
	kindBlob   = 'b'
)

// Store returns the fleet's store of sessions and files, for
// [fleetstate.OpenBackend]. It is safe for concurrent use, and any number
// of processes may use the same fleet's store: it keeps nothing in memory
// that another could change.
func (f *Fleet) Store() fleetstate.Backend { return &store{f: f} }

// store is the [fleetstate.Backend] of a fleet.
type store struct {
	f *Fleet
}

var _ fleetstate.Backend = (*store)(nil)

// index returns the bucket of the fleet's sessions and files.
func (s *store) index(ctx context.Context) (jetstream.KeyValue, error) {
	return s.bucket(ctx, "files", "sessions and files", "open the file index")
}

// blobs returns the bucket of the content of large files.
func (s *store) blobs(ctx context.Context) (jetstream.KeyValue, error) {
	return s.bucket(ctx, "blobs", "content of large files", "open the blobs")
}

// bucket returns the store's bucket of kind, which holds what, keeping one
// version of each key; op names the step in an error.
func (s *store) bucket(ctx context.Context, kind, what, op string) (jetstream.KeyValue, error) {
	kv, err := s.f.kv(ctx, kind, jetstream.KeyValueConfig{
		Description: "fleetstate: " + what + " of fleet " + s.f.name,
		History:     1,
	})
	if err != nil {
		return nil, storeError(op, err)
	}
	return kv, nil
}

// limits returns the largest inline content and blob chunk that fit in a
// message of the server the connection is on.
func (s *store) limits() (inline, chunk int) {
	chunk = s.f.chunkSize()
	inline = inlineMax
	if s.f.replicas > 1 {
		inline = replicatedInlineMax
	}
	return min(inline, chunk-1), chunk
}

// ---- sessions ----------------------------------------------------------------

// runRecord is the value of the run key: the current session's line, then
// the run log's lines, each ending in a newline.
type runRecord struct {
	current string // "ID:::NAME", or "" for none
	log     string // the run log, lines "ID:::NAME\n"
}

func parseRunRecord(v []byte) runRecord {
	cur, log, _ := strings.Cut(string(v), "\n")
	return runRecord{current: cur, log: log}
}

func (r runRecord) bytes() []byte { return []byte(r.current + "\n" + r.log) }

// session parses the current session as the file store does: a line that
// is not "ID:::NAME" with a lower-case UUID means none.
func (r runRecord) session() (fleetstate.Session, bool) {
	id, name, ok := strings.Cut(r.current, ":::")
	if !ok {
		return fleetstate.Session{}, false
	}
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return fleetstate.Session{}, false
	}
	return fleetstate.Session{ID: id, Name: name}, true
}

func (s *store) CurrentSession(ctx context.Context) (fleetstate.Session, bool, error) {
	idx, err := s.index(ctx)
	if err != nil {
		return fleetstate.Session{}, false, err
	}
	e, err := idx.Get(ctx, runKey)
	if isNotFound(err) {
		return fleetstate.Session{}, false, nil
	}
	if err != nil {
		return fleetstate.Session{}, false, storeError("read the current session", err)
	}
	sess, ok := parseRunRecord(e.Value()).session()
	return sess, ok, nil
}

func (s *store) StartSession(ctx context.Context, next fleetstate.Session) error {
	idx, err := s.index(ctx)
	if err != nil {
		return err
	}
	_, limit := s.limits()
	for {
		e, err := idx.Get(ctx, runKey)
		var rec runRecord
		var rev uint64
		switch {
		case err == nil:
			rec, rev = parseRunRecord(e.Value()), e.Revision()
		case !isNotFound(err):
			return storeError("read the current session", err)
		}
		if rec.current != "" {
			rec.log += rec.current + "\n"
		}
		rec.current = next.String()
		v := rec.bytes()
		if len(v) > limit {
			return &fleetstate.Error{Code: fleetstate.CodeInternal, Err: fmt.Errorf(
				"fleetnats: the run log is full (%d bytes, limit %d): clean the sessions", len(v), limit)}
		}
		if rev == 0 {
			_, err = idx.Create(ctx, runKey, v)
		} else {
			_, err = idx.Update(ctx, runKey, v, rev)
		}
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return storeError("start the session", err)
		}
		// Another process started a session meanwhile: archive that one.
	}
}

// RunLog returns the run log as the state directory's
// previous_run_log.txt would hold it: a line "ID:::NAME" for each session
// that was current before the current one, oldest first.
func (s *store) RunLog(ctx context.Context) (string, error) {
	idx, err := s.index(ctx)
	if err != nil {
		return "", err
	}
	e, err := idx.Get(ctx, runKey)
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", storeError("read the run log", err)
	}
	return parseRunRecord(e.Value()).log, nil
}

// ---- files -------------------------------------------------------------------

func (s *store) Put(ctx context.Context, id fleetstate.FileID, content []byte, overwrite bool) error {
	idx, err := s.index(ctx)
	if err != nil {
		return err
	}
	keys := fileKeys(id.Session(), id.Agent(), id.Name())
	key := keys[len(keys)-1]
	// prefixes are the keys of the markers above the file, outermost
	// first: session, agent, folders.
	prefixes := append([]string{sessionKey(id.Session()), agentKey(id.Session(), id.Agent())}, keys[:len(keys)-1]...)

	var value []byte   // the new entry, made once
	var newBlob string // the blob it names, removed unless the put succeeds
	defer func() {
		if newBlob != "" {
			s.dropBlob(ctx, newBlob)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return storeError("put", err)
		}
		e, err := idx.Get(ctx, key)
		exists := err == nil
		switch {
		case exists && kindOf(e.Value()) == kindFolder:
			return pathConflict(id.Name(), "is a folder")
		case exists && !overwrite:
			return &fleetstate.Error{Code: fleetstate.CodeFileExists, Err: errors.New(quote(id.String()))}
		case !exists && !isNotFound(err):
			return storeError("read the file index", err)
		case !exists:
			// A file's entry exists only below its markers, so only a new
			// file needs them checked and made.
			if err := s.makeFolders(ctx, idx, id, prefixes); err != nil {
				return err
			}
		}
		if value == nil {
			if value, newBlob, err = s.entry(ctx, content); err != nil {
				return err
			}
		}
		if exists {
			_, err = idx.Update(ctx, key, value, e.Revision())
		} else {
			_, err = idx.Create(ctx, key, value)
		}
		if err == nil {
			newBlob = "" // named by the entry now
			if exists && kindOf(e.Value()) == kindBlob {
				if ref, err := parseBlobRef(e.Value()); err == nil {
					s.dropBlob(ctx, ref.ID)
				}
			}
			return nil
		}
		if !isConflict(err) {
			return storeError("write the file index", err)
		}
		// The key changed since it was read: a file or folder of that
		// name was made, or the file overwritten. Read it again, which
		// tells which.
	}
}

// makeFolders makes the markers of prefixes (session, agent, folders) that
// do not exist yet, and fails with ERR_PATH_CONFLICT where one is a file.
// It reads them all before it makes any, so that a put refused for a
// conflict changes nothing.
func (s *store) makeFolders(ctx context.Context, idx jetstream.KeyValue, id fleetstate.FileID, prefixes []string) error {
	// Markers are made outermost first and never removed (but by Clean):
	// when the innermost is a folder, so are the others.
	if e, err := idx.Get(ctx, prefixes[len(prefixes)-1]); err == nil && kindOf(e.Value()) == kindFolder {
		return nil
	}
	var missing []int
	for i, key := range prefixes {
		e, err := idx.Get(ctx, key)
		switch {
		case err == nil && kindOf(e.Value()) != kindFolder:
			return folderConflict(id, i)
		case isNotFound(err):
			missing = append(missing, i)
		case err != nil:
			return storeError("read the file index", err)
		}
	}
	for _, i := range missing {
		_, err := idx.Create(ctx, prefixes[i], []byte{kindFolder})
		if err == nil {
			continue
		}
		if !isConflict(err) {
			return storeError("write the file index", err)
		}
		// Made meanwhile: by another put as a folder, or as a file.
		e, err := idx.Get(ctx, prefixes[i])
		switch {
		case err == nil && kindOf(e.Value()) != kindFolder:
			return folderConflict(id, i)
		case err != nil && !isNotFound(err):
			return storeError("read the file index", err)
		}
	}
	return nil
}

// folderConflict is the error of a put whose folder, the prefix at index
// i (0 the session, 1 the agent, 2 the first folder), is a file.
func folderConflict(id fleetstate.FileID, i int) error {
	segs := strings.Split(id.Name(), "/")
	return pathConflict(strings.Join(segs[:max(i-1, 1)], "/"), "is a file, not a folder")
}

func pathConflict(name, what string) error {
	return &fleetstate.Error{Code: fleetstate.CodePathConflict, Err: errors.New(quote(name) + " " + what)}
}

// entry returns the index entry of content: inline, or naming a blob it
// writes.
func (s *store) entry(ctx context.Context, content []byte) (value []byte, blob string, err error) {
	if inline, _ := s.limits(); len(content) <= inline {
		value = make([]byte, 1+len(content))
		value[0] = kindInline
		copy(value[1:], content)
		return value, "", nil
	}
	kv, err := s.blobs(ctx)
	if err != nil {
		return nil, "", err
	}
	value, ref, err := s.f.writeBlob(ctx, kv, content)
	if err != nil {
		return nil, "", storeError("write a blob", err)
	}
	return value, ref.ID, nil
}

// dropBlob purges a blob's chunks, best effort: a blob left behind is
// named by no entry, so only its space is lost, until Clean.
func (s *store) dropBlob(ctx context.Context, id string) {
	s.f.discardBlob(ctx, s.f.bucketName("blobs"), id, "a blob of an overwritten file stays until the sessions are cleaned")
}

func (s *store) readBlob(ctx context.Context, ref blobRef) ([]byte, error) {
	kv, err := s.blobs(ctx)
	if err != nil {
		return nil, err
	}
	data, err := s.f.readBlob(ctx, kv, ref)
	var fe *fleetstate.Error
	if err != nil && !errors.Is(err, errBlobGone) && !errors.As(err, &fe) {
		err = storeError("read a blob", err)
	}
	return data, err
}

func (s *store) Get(ctx context.Context, id fleetstate.FileID) ([]byte, error) {
	idx, err := s.index(ctx)
	if err != nil {
		return nil, err
	}
	keys := fileKeys(id.Session(), id.Agent(), id.Name())
	key := keys[len(keys)-1]
	var lastRev uint64
	for {
		e, err := idx.Get(ctx, key)
		if isNotFound(err) {
			return nil, s.missing(ctx, idx, id)
		}
		if err != nil {
			return nil, storeError("read the file index", err)
		}
		v := e.Value()
		switch kindOf(v) {
		case kindInline:
			return v[1:], nil
		case kindBlob:
		default:
			return nil, &fleetstate.Error{Code: fleetstate.CodeFileNotFound, Err: errors.New(quote(id.String()))}
		}
		ref, err := parseBlobRef(v)
		if err != nil {
			return nil, &fleetstate.Error{Code: fleetstate.CodeInternal, Err: fmt.Errorf("fleetnats: entry of %s: %w", quote(id.String()), err)}
		}
		data, err := s.readBlob(ctx, ref)
		if !errors.Is(err, errBlobGone) {
			return data, err
		}
		if e.Revision() == lastRev {
			// The entry did not change, yet its blob is gone.
			return nil, &fleetstate.Error{Code: fleetstate.CodeInternal,
				Err: fmt.Errorf("fleetnats: the content of %s is lost", quote(id.String()))}
		}
		// An overwrite replaced the blob while it was read: read the new.
		lastRev = e.Revision()
	}
}

// missing tells which part of id does not exist, as the file store does.
func (s *store) missing(ctx context.Context, idx jetstream.KeyValue, id fleetstate.FileID) error {
	for _, p := range []struct {
		key  string
		code fleetstate.Code
		msg  string
	}{
		{sessionKey(id.Session()), fleetstate.CodeSessionNotValid, quote(id.Session())},
		{agentKey(id.Session(), id.Agent()), fleetstate.CodeAgentNotValid, quote(id.Agent()) + " in session " + id.Session()},
	} {
		_, err := idx.Get(ctx, p.key)
		if isNotFound(err) {
			return &fleetstate.Error{Code: p.code, Err: errors.New(p.msg)}
		}
		if err != nil {
			return storeError("read the file index", err)
		}
	}
	return &fleetstate.Error{Code: fleetstate.CodeFileNotFound, Err: errors.New(quote(id.String()))}
}

func (s *store) List(ctx context.Context, session, agent string) ([]fleetstate.FileInfo, bool, error) {
	idx, err := s.index(ctx)
	if err != nil {
		return nil, false, err
	}
	if _, err := idx.Get(ctx, sessionKey(session)); isNotFound(err) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, storeError("read the file index", err)
	}
	// An agent without files lists as empty, as in a state directory.
	filter := sessionKey(session) + ".>"
	if agent != "" {
		filter = agentKey(session, agent) + ".>"
	}
	var files []fleetstate.FileInfo
	err = s.f.freshWatch(ctx, idx, []string{filter}, func() { files = []fleetstate.FileInfo{} }, func(e jetstream.KeyValueEntry) {
		v := e.Value()
		var size int64
		switch kindOf(v) {
		case kindInline:
			size = int64(len(v) - 1)
		case kindBlob:
			ref, err := parseBlobRef(v)
			if err != nil {
				return
			}
			size = ref.Size
		default:
			return // a marker
		}
		sess, a, name, err := decodeFileKey(e.Key())
		if err != nil {
			return
		}
		id, err := fleetstate.NewFileID(sess, a, name)
		if err != nil {
			return
		}
		files = append(files, fleetstate.FileInfo{ID: id, Size: size, ModTime: e.Created()})
	})
	if err != nil {
		return nil, false, storeError("list the file index", err)
	}
	return files, true, nil
}

// stopWatch stops a watcher and lets its delivery end: the watcher blocks
// while its channel is full, so the channel is drained until it closes.
func stopWatch(w jetstream.KeyWatcher) {
	_ = w.Stop()
	for range w.Updates() {
	}
}

// Clean purges the index, which removes every file, marker and the run
// record in one step, then the blobs.
func (s *store) Clean(ctx context.Context) error {
	for _, kind := range []string{"files", "blobs"} {
		var err error
		if kind == "files" {
			_, err = s.index(ctx)
		} else {
			_, err = s.blobs(ctx)
		}
		if err != nil {
			return err
		}
		st, err := s.f.stream(ctx, s.f.bucketName(kind))
		if err == nil {
			err = st.Purge(ctx)
		}
		if err != nil {
			return storeError("clean the sessions", err)
		}
	}
	return nil
}

// ---- errors ------------------------------------------------------------------

func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// isConflict reports a failed Create or Update: the key exists, or its
// revision is not the one read.
func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// storeError makes err a [fleetstate.Error] with an empty Op, which the
// Store fills in: [fleetstate.CodeUnavailable] when JetStream could not be
// reached or answer in time, else [fleetstate.CodeInternal].
func storeError(what string, err error) error {
	var fe *fleetstate.Error
	if errors.As(err, &fe) {
		if fe.Op == "" {
			return fe
		}
		return &fleetstate.Error{Code: fe.Code, Err: fmt.Errorf("fleetnats: %s: %w", fe.Op, fe.Err)}
	}
	code := fleetstate.CodeInternal
	if isUnreachable(err) {
		code = fleetstate.CodeUnavailable
	}
	return &fleetstate.Error{Code: code, Err: fmt.Errorf("fleetnats: %s: %w", what, err)}
}

// isUnreachable reports an error of the connection or of a cluster
// without a leader, as opposed to one JetStream answered with.
func isUnreachable(err error) bool {
	for _, target := range []error{
		context.DeadlineExceeded, context.Canceled,
		nats.ErrTimeout, nats.ErrNoResponders, nats.ErrConnectionClosed,
		nats.ErrConnectionReconnecting, nats.ErrDisconnected, nats.ErrReconnectBufExceeded,
		nats.ErrNoServers, nats.ErrStaleConnection, nats.ErrConnectionDraining,
		jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		// JetStream system temporarily unavailable (503, 10008), the
		// cluster cannot handle the request (10009), stream offline
		// (10118): no leader, as during an election.
		switch api.ErrorCode {
		case 10008, 10009, 10118:
			return true
		}
		return api.Code == 503
	}
	return false
}

// quote quotes a name for a message, clipped so that a message stays
// short.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
