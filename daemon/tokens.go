package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetnats"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// tokenConfig is the key of the tokens in the fleet's configuration.
const tokenConfig = "tokens"

// natsTokenFile is the token file of a fleet on NATS: the key tokenConfig
// of the fleet's configuration bucket, which every daemon of the fleet
// and the token command share. Load answers from a watch of the key;
// Update swaps the key by its revision (fleetnats.Fleet.UpdateConfig).
type natsTokenFile struct {
	f    *fleetnats.Fleet
	stop func() // ends the watch

	mu   sync.Mutex
	data []byte // guarded by mu; the key's value as last watched or written
}

// OpenTokens opens the tokens of the fleet n names, kept in its
// configuration on NATS, and follows their changes until close is
// called; close also closes the connection.
func (n *NATSConfig) OpenTokens(ctx context.Context) (tokens *mcpadapter.Tokens, close func(), err error) {
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
func openNATSTokens(ctx context.Context, f *fleetnats.Fleet) (tokens *mcpadapter.Tokens, stop func(), err error) {
	file, err := openNATSTokenFile(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	if tokens, err = mcpadapter.NewTokens(file); err != nil {
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
	file.stop, err = f.WatchConfig(ctx, tokenConfig, func(data []byte) {
		file.mu.Lock()
		file.data = data
		file.mu.Unlock()
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

// Load returns the key's value as the watch last saw it.
func (t *natsTokenFile) Load() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.data, nil
}

// Update swaps the key's value in the bucket, and Load returns the value
// written from then on, so that a Tokens sees its own change at once.
// The watch brings every value in the bucket's order: one written before
// this one and still on its way is followed by this one.
func (t *natsTokenFile) Update(change func(old []byte) ([]byte, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), natsStoreTimeout)
	defer cancel()
	var written []byte
	err := t.f.UpdateConfig(ctx, tokenConfig, func(old []byte) ([]byte, error) {
		data, err := change(old)
		written = data
		return data, err
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.data = written
	t.mu.Unlock()
	return nil
}
