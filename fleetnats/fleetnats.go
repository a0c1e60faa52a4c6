// Package fleetnats keeps a fleet's whole state in NATS JetStream, so that
// any number of fleetstate daemons, on one machine or many, serve one
// fleet: the store's sessions and files ([Fleet.Store], a
// [fleetstate.Backend]), the rendezvous's turns ([Fleet.Own], a
// [fleetstate.Journal] held by the one daemon that owns the fleet), and
// the server's tokens.
//
// Every bucket and stream of a fleet is named after it ("NAME-files",
// "NAME-turns", ...), created on first use with the fleet's replication
// factor. Nothing is cached that another daemon could change: each call
// reads JetStream, and each change is a compare-and-swap on a revision, so
// two daemons never both win a race.
package fleetnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultFleet is the fleet's name when [Options.Fleet] is empty.
const DefaultFleet = "fleetstate"

// DefaultTimeout bounds each call to JetStream when [Options.Timeout] is
// zero.
const DefaultTimeout = 10 * time.Second

// Options configure [Connect].
type Options struct {
	// URL is one NATS server URL or several, comma-separated
	// ("nats://a:4222,nats://b:4222"), tried in that order: the first
	// that answers is connected to, and a reconnect tries the others in
	// the same order, the lost one last. User and password or a token
	// may be in a URL; tls:// URLs connect with TLS.
	URL string
	// Conn, when not nil, is used instead of dialling URL. Close does not
	// close it.
	Conn *nats.Conn
	// InProcess, when not nil and Conn is nil, is a NATS server embedded
	// in this process (a *server.Server of nats-server), which Connect
	// reaches through memory rather than over TCP, saving the loopback
	// hop of every call (BENCHMARKS.md has the figures). URL is then
	// ignored; the server's cluster, if it has one, still replicates the
	// fleet, and other processes still reach the server at its client
	// port. Close closes the connection.
	InProcess nats.InProcessConnProvider
	// Fleet names the fleet: daemons with the same servers and the same
	// name serve the same fleet. Letters, digits, '-' and '_', at most 32.
	// Empty means DefaultFleet.
	Fleet string
	// CredsFile is a NATS credentials file (user JWT and seed).
	CredsFile string
	// Replicas is the replication factor of the buckets this fleet
	// creates. Zero means 3 when the cluster has at least 3 servers, else
	// 1. Buckets that exist keep theirs.
	Replicas int
	// Timeout bounds each call to JetStream. Zero means DefaultTimeout.
	Timeout time.Duration
	// Name is the NATS connection's name, as the servers' monitoring shows
	// it.
	Name string
	// Logger receives what a call cannot return. Nil means slog.Default().
	Logger *slog.Logger
}

// Fleet is a connection to one fleet's state in JetStream. It is safe for
// concurrent use.
type Fleet struct {
	nc       *nats.Conn
	ownConn  bool
	js       jetstream.JetStream
	name     string
	replicas int
	timeout  time.Duration
	log      *slog.Logger

	// opening serializes the opening of buckets: the first calls of a
	// fleet, all at once, would otherwise each create (or look up, or
	// probe) the same replicated bucket, a burst the cluster can take
	// seconds to answer. A buffer of one: holding it is sending to it.
	opening chan struct{}
	mu      sync.Mutex
	buckets map[string]jetstream.KeyValue
	streams map[string]jetstream.Stream // by bucket: see stream
}

var fleetName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ValidateFleetName reports whether name can name a fleet.
func ValidateFleetName(name string) error {
	if !fleetName.MatchString(name) {
		return fmt.Errorf("fleetnats: fleet name %q: use 1 to 32 letters, digits, '-' or '_'", name)
	}
	return nil
}

// Connect connects to the fleet's NATS servers. It fails when none can be
// reached within the timeout or JetStream is not enabled there.
func Connect(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.Fleet == "" {
		opts.Fleet = DefaultFleet
	}
	if err := ValidateFleetName(opts.Fleet); err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Fleet{
		nc:       opts.Conn,
		name:     opts.Fleet,
		replicas: opts.Replicas,
		timeout:  opts.Timeout,
		log:      opts.Logger,
		buckets:  map[string]jetstream.KeyValue{},
		opening:  make(chan struct{}, 1),
		streams:  map[string]jetstream.Stream{},
	}
	// where names the servers in messages.
	where := Redact(opts.URL)
	if f.nc == nil {
		if opts.URL == "" && opts.InProcess == nil {
			return nil, errors.New("fleetnats: no NATS server URL")
		}
		no := []nats.Option{
			nats.Timeout(opts.Timeout),
			// The servers in the order given: the first is tried first
			// (the one on this machine, say), not one at random.
			nats.DontRandomize(),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250 * time.Millisecond),
			nats.RetryOnFailedConnect(false),
			// No buffer while reconnecting: a write that failed for want
			// of a server must not be sent when one is back, after its
			// caller was told ERR_UNAVAILABLE.
			nats.ReconnectBufSize(-1),
		}
		if opts.Name != "" {
			no = append(no, nats.Name(opts.Name))
		}
		if opts.CredsFile != "" {
			no = append(no, nats.UserCredentials(opts.CredsFile))
		}
		if opts.InProcess != nil {
			// Every connection, the first and each after a reconnect, is
			// made in memory to this server.
			no = append(no, nats.InProcessServer(opts.InProcess))
			opts.URL, where = "", "the NATS server in this process"
		}
		nc, err := nats.Connect(opts.URL, no...)
		if err != nil {
			return nil, fmt.Errorf("fleetnats: connect to %s: %w", where, err)
		}
		f.nc, f.ownConn = nc, true
	} else {
		where = Redact(f.nc.ConnectedUrlRedacted())
	}
	js, err := jetstream.New(f.nc)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fleetnats: %w", err)
	}
	f.js = js
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if _, err := js.AccountInfo(cctx); err != nil {
		f.Close()
		return nil, fmt.Errorf("fleetnats: JetStream at %s: %w", where, err)
	}
	if f.replicas <= 0 {
		f.replicas = 1
		if len(f.nc.Servers()) >= 3 {
			f.replicas = 3
		}
	}
	return f, nil
}

// Redact hides the passwords and tokens in a list of NATS URLs, for logs
// and messages.
func Redact(urls string) string {
	var out []string
	for _, u := range strings.Split(urls, ",") {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			if i := strings.Index(u, "://"); i >= 0 && i < at {
				u = u[:i+3] + "***" + u[at:]
			} else {
				u = "***" + u[at:]
			}
		}
		out = append(out, u)
	}
	return strings.Join(out, ",")
}

// Name returns the fleet's name.
func (f *Fleet) Name() string { return f.name }

// Replicas returns the replication factor of the buckets the fleet creates.
func (f *Fleet) Replicas() int { return f.replicas }

// Conn returns the NATS connection.
func (f *Fleet) Conn() *nats.Conn { return f.nc }

// JetStream returns the JetStream context.
func (f *Fleet) JetStream() jetstream.JetStream { return f.js }

// Close closes the connection, unless it was given in [Options.Conn].
func (f *Fleet) Close() {
	if f.ownConn {
		f.nc.Close()
	}
}

// ctx returns the context of one call to JetStream.
func (f *Fleet) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, f.timeout)
}

// bucketName returns the name of the fleet's bucket or stream of kind.
func (f *Fleet) bucketName(kind string) string { return f.name + "-" + kind }

// kv returns the fleet's key-value bucket of kind, created with cfg (its
// name and replicas filled in) if it does not exist.
func (f *Fleet) kv(ctx context.Context, kind string, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	f.mu.Lock()
	kv, ok := f.buckets[kind]
	f.mu.Unlock()
	if ok {
		return kv, nil
	}
	select {
	case f.opening <- struct{}{}:
		defer func() { <-f.opening }()
	case <-ctx.Done():
		return nil, unavailable("open bucket "+f.bucketName(kind), ctx.Err())
	}
	f.mu.Lock()
	kv, ok = f.buckets[kind]
	f.mu.Unlock()
	if ok {
		return kv, nil // opened while this call waited
	}
	cfg.Bucket = f.bucketName(kind)
	if cfg.Replicas == 0 {
		cfg.Replicas = f.replicas
	}
	// A server may refuse a creation for a moment (a concurrent creation
	// of the same bucket by another daemon, a store it could not set up
	// at once, a cluster whose servers are still joining), or not answer
	// a lookup of a bucket another daemon has just created (seen on a
	// loaded cluster: no answer in 10 s): a few tries, each bounded by
	// openTryTimeout, within ctx, before the bucket counts as unavailable.
	open := func(ctx context.Context) (jetstream.KeyValue, error) {
		kv, err := f.js.KeyValue(ctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = f.js.CreateKeyValue(ctx, cfg)
			if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				kv, err = f.js.KeyValue(ctx, cfg.Bucket)
			}
		}
		if err == nil && !directReads[kind] {
			kv, err = f.leaderReads(ctx, kv)
		}
		return kv, err
	}
	var err error
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, openTryTimeout)
		kv, err = open(tctx)
		cancel()
		passing := isServerRefusal(err) || errors.Is(err, context.DeadlineExceeded)
		if err == nil || try == createTries-1 || ctx.Err() != nil || !passing {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try+1) * 50 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, unavailable("open bucket "+cfg.Bucket, err)
	}
	// A replicated bucket just created may not answer reads for a moment
	// (no responders while its stream's replicas start): wait, a few
	// tries within ctx, until a read of a key finds it or not.
	for try := 0; try < createTries && ctx.Err() == nil; try++ {
		tctx, cancel := context.WithTimeout(ctx, openTryTimeout)
		_, err := kv.Get(tctx, probeKey)
		cancel()
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try+1) * 50 * time.Millisecond):
		}
	}
	f.mu.Lock()
	f.buckets[kind] = kv
	f.mu.Unlock()
	return kv, nil
}

// directReads are the buckets that keep direct gets, for their speed: a
// get through the leader costs twice a direct one at 1 KiB and four times
// at 64 KiB (the leader's API sends the content as base64 in JSON). The
// blobs' keys are written once and never changed, so a direct get returns
// the right content or nothing, and readBlob asks the leader on nothing;
// a pane's registration read a moment late is what its TTL allows for.
var directReads = map[string]bool{"blobs": true, turnBlobsBucket: true, panesBucket: true}

// leaderReads returns kv, or, where its stream has several replicas, kv
// with its gets answered by the stream's leader (leaderKV).
//
// A get of a key-value bucket is a direct get, which any replica of the
// stream answers, and a follower may not have applied a write that the
// leader has already acknowledged: on a loaded three-node cluster a read
// right after a put returned the previous content about one time in
// twenty, even on the writer's own server. The leader has applied every
// write it acknowledged, so a get it answers sees every put that returned
// before it, on any daemon, as on a state directory. The stream's
// configuration is left alone: turning its direct gets off would break
// the handles other daemons bound with them, and needs a permission the
// fleet's other work does not.
func (f *Fleet) leaderReads(ctx context.Context, kv jetstream.KeyValue) (jetstream.KeyValue, error) {
	if several, err := f.replicated(ctx, kv.Bucket()); err != nil || !several {
		return kv, err
	}
	return leaderKV{KeyValue: kv, f: f}, nil
}

// replicated reports whether the stream of bucket has several replicas:
// with one, that replica is the leader, and nothing it answers lags.
func (f *Fleet) replicated(ctx context.Context, bucket string) (bool, error) {
	st, err := f.stream(ctx, bucket)
	if err != nil {
		return false, err
	}
	return st.CachedInfo().Config.Replicas > 1, nil
}

// probeKey is the key read to see that a bucket answers; no one writes it.
const probeKey = "fleetstate-probe"

// stream returns the stream of the bucket named bucket (its full name),
// looked up once: a purge by subject needs only the stream's name, and a
// lookup is a request to the server each time.
func (f *Fleet) stream(ctx context.Context, bucket string) (jetstream.Stream, error) {
	f.mu.Lock()
	st, ok := f.streams[bucket]
	f.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := f.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.streams[bucket] = st
	f.mu.Unlock()
	return st, nil
}

// createTries bounds the tries of a bucket's creation that a server
// refuses for a moment: about 2.2 s of waits in all, enough for a server
// that joined a cluster to be known to its JetStream leader.
const createTries = 10

// openTryTimeout bounds each try of opening a bucket (see Fleet.kv).
const openTryTimeout = 2 * time.Second

// isServerRefusal reports an error the JetStream API answered (not one of
// the connection or of the context) that may pass: a server error, or a
// cluster that lacks the servers to place a bucket's replicas on (those
// that just started are placed once the leader has their statistics).
func isServerRefusal(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.Code >= 500 || apiErr.ErrorCode == errCodeNoPeers)
}

// errCodeNoPeers is the server's JSClusterNoPeersErrF ("no suitable peers
// for placement"), which the client does not name.
const errCodeNoPeers jetstream.ErrorCode = 10005

// unavailable reports a failure to reach JetStream as
// [fleetstate.CodeUnavailable].
func unavailable(op string, err error) error {
	return &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: op, Err: err}
}

// stopLoop ends the life of something with a background loop: it sets
// *closed under mu, closes stop and waits for the loop to close done. It
// does nothing and returns false when *closed was set already, so that
// Close and its kin are idempotent.
func stopLoop(mu *sync.Mutex, closed *bool, stop, done chan struct{}) bool {
	mu.Lock()
	if *closed {
		mu.Unlock()
		return false
	}
	*closed = true
	mu.Unlock()
	close(stop)
	<-done
	return true
}
