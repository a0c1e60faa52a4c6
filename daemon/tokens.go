package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/fleetnats"
)

// tokenConfig is the key of the tokens in the fleet's configuration.
const tokenConfig = "tokens"

// natsTokenFile is the token file of a fleet on NATS: the key tokenConfig
// of the fleet's configuration bucket, which every daemon of the fleet
// and the token command share. Load answers from a watch of the key;
// Reread reads the key itself, for a token or a member not found, which
// the watch may not have brought yet; Update swaps the key by its
// revision (fleetnats.Fleet.UpdateConfig). Of the values watched, read
// and written, the one of the highest revision is kept, so that a value
// still on its way in the watch never replaces a newer one.
type natsTokenFile struct {
	f    *fleetnats.Fleet
	stop func() // ends the watch

	mu   sync.Mutex
	data []byte // guarded by mu; the key's value of revision rev
	rev  uint64 // guarded by mu; the highest revision watched, read or written
}

// rereadTimeout bounds Reread: a call waits that long at most for NATS
// before it is answered from what the watch brought.
const rereadTimeout = time.Second

// OpenTokens opens the tokens of the fleet n names, kept in its
// configuration on NATS, and follows their changes until close is
// called; close also closes the connection.
func (n *NATSConfig) OpenTokens(ctx context.Context) (tokens *auth.Tokens, close func(), err error) {
	f, err := n.Connect(ctx, slog.New(slog.DiscardHandler), "fleetstate token")
	if err != nil {
		return nil, nil, err
	}
	tokens, stop, err := openNATSTokens(ctx, f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return tokens, func() { stop(); f.Close() }, nil
}

// openNATSTokens opens the tokens of the fleet f (openNATSTokenFile).
// stop ends their watch.
func openNATSTokens(ctx context.Context, f *fleetnats.Fleet) (tokens *auth.Tokens, stop func(), err error) {
	file, err := openNATSTokenFile(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	if tokens, err = auth.NewTokens(file); err != nil {
		file.stop()
		return nil, nil, err
	}
	return tokens, file.stop, nil
}

// openNATSTokenFile opens the token file of the fleet f once the watch of
// its configuration has answered, within natsStoreTimeout. Its stop ends
// the watch.
func openNATSTokenFile(ctx context.Context, f *fleetnats.Fleet) (*natsTokenFile, error) {
	file := &natsTokenFile{f: f}
	first := make(chan struct{})
	var once sync.Once
	var err error
	file.stop, err = f.WatchConfig(ctx, tokenConfig, func(data []byte, rev uint64) {
		file.keep(data, rev)
		once.Do(func() { close(first) })
	})
	if err != nil {
		return nil, err
	}
	select {
	case <-first:
		return file, nil
	case <-time.After(natsStoreTimeout):
		file.stop()
		return nil, &fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "read the fleet's tokens", Err: errors.New("no answer from NATS")}
	}
}

// keep makes data, the key's value of revision rev, the one Load
// returns, unless a newer one was seen.
func (t *natsTokenFile) keep(data []byte, rev uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rev >= t.rev {
		t.data, t.rev = data, rev
	}
}

// Load returns the key's newest value seen.
func (t *natsTokenFile) Load() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.data, nil
}

// Reread reads the key from the bucket, within rereadTimeout, and
// returns its newest value seen then, as Load does.
func (t *natsTokenFile) Reread() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rereadTimeout)
	defer cancel()
	data, rev, err := t.f.ReadConfig(ctx, tokenConfig)
	if err != nil {
		return nil, err
	}
	t.keep(data, rev)
	return t.Load()
}

// Update swaps the key's value in the bucket, and Load returns the value
// written from then on (or a newer one), so that a Tokens sees its own
// change at once.
func (t *natsTokenFile) Update(change func(old []byte) ([]byte, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), natsStoreTimeout)
	defer cancel()
	var written []byte
	rev, err := t.f.UpdateConfig(ctx, tokenConfig, func(old []byte) ([]byte, error) {
		data, err := change(old)
		written = data
		return data, err
	})
	if err != nil {
		return err
	}
	t.keep(written, rev)
	return nil
}
