package fleetnats

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// A fleet's configuration files (its tokens, hashed, and the operator's
// token) are values of the bucket NAME-config, one key per file, so that
// every daemon reads the same ones and a change made on any machine
// reaches all daemons.

const configBucket = "config"

func (f *Fleet) configKV(ctx context.Context) (jetstream.KeyValue, error) {
	return f.kv(ctx, configBucket, jetstream.KeyValueConfig{
		Description: "the configuration of the fleet " + f.name + " (tokens, hashed)",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
}

// ReadConfig returns the configuration file name, or nil when the fleet
// has none.
func (f *Fleet) ReadConfig(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	kv, err := f.configKV(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("read "+name, err)
	}
	return e.Value(), nil
}

// UpdateConfig replaces the configuration file name by what change makes
// of its content (nil when there is none), atomically: a concurrent
// change of another process makes it read again and call change again.
func (f *Fleet) UpdateConfig(ctx context.Context, name string, change func(old []byte) ([]byte, error)) error {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	kv, err := f.configKV(ctx)
	if err != nil {
		return err
	}
	for {
		var old []byte
		var rev uint64
		e, err := kv.Get(ctx, name)
		switch {
		case err == nil:
			old, rev = e.Value(), e.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return unavailable("read "+name, err)
		}
		data, err := change(old)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, name, data)
		} else {
			_, err = kv.Update(ctx, name, data, rev)
		}
		if err == nil {
			return nil
		}
		if !isWrongSequence(err) {
			return unavailable("write "+name, err)
		}
		if ctx.Err() != nil {
			return unavailable("write "+name, ctx.Err())
		}
	}
}

// WatchConfig calls fn with the content of the configuration file name
// now (nil when there is none) and after each change, until stop is
// called. fn runs on one goroutine, never after stop returns.
func (f *Fleet) WatchConfig(ctx context.Context, name string, fn func(data []byte)) (stop func(), err error) {
	cctx, cancel := f.ctx(ctx)
	kv, err := f.configKV(cctx)
	cancel()
	if err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithCancel(context.Background())
	w, err := kv.Watch(wctx, name)
	if err != nil {
		wcancel()
		return nil, unavailable("watch "+name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sawInitial := false
		for e := range w.Updates() {
			switch {
			case e == nil:
				if !sawInitial {
					fn(nil)
				}
				sawInitial = true
			case e.Operation() == jetstream.KeyValuePut:
				sawInitial = true
				fn(e.Value())
			default:
				sawInitial = true
				fn(nil)
			}
		}
	}()
	return func() {
		wcancel()
		_ = w.Stop()
		<-done
	}, nil
}
