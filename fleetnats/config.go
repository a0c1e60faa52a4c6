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
// has none, and its revision: each change of the file has a higher one
// than the change before (see WatchConfig); no file has revision 0.
func (f *Fleet) ReadConfig(ctx context.Context, name string) ([]byte, uint64, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	kv, err := f.configKV(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, unavailable("read "+name, err)
	}
	return e.Value(), e.Revision(), nil
}

// UpdateConfig replaces the configuration file name by what change makes
// of its content (nil when there is none), atomically: a concurrent
// change of another process makes it read again and call change again.
// It returns the revision of the file written.
func (f *Fleet) UpdateConfig(ctx context.Context, name string, change func(old []byte) ([]byte, error)) (uint64, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	kv, err := f.configKV(ctx)
	if err != nil {
		return 0, err
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
			return 0, unavailable("read "+name, err)
		}
		data, err := change(old)
		if err != nil {
			return 0, err
		}
		var written uint64
		if rev == 0 {
			written, err = kv.Create(ctx, name, data)
		} else {
			written, err = kv.Update(ctx, name, data, rev)
		}
		if err == nil {
			return written, nil
		}
		if !isWrongSequence(err) {
			return 0, unavailable("write "+name, err)
		}
		if ctx.Err() != nil {
			return 0, unavailable("write "+name, ctx.Err())
		}
	}
}

// WatchConfig calls fn with the content of the configuration file name
// now (nil when there is none) and after each change, with its revision
// (as ReadConfig's; 0 when there never was a file), until stop is
// called. fn runs on one goroutine, never after stop returns.
func (f *Fleet) WatchConfig(ctx context.Context, name string, fn func(data []byte, rev uint64)) (stop func(), err error) {
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
					fn(nil, 0)
				}
				sawInitial = true
			case e.Operation() == jetstream.KeyValuePut:
				sawInitial = true
				fn(e.Value(), e.Revision())
			default:
				sawInitial = true
				fn(nil, e.Revision())
			}
		}
	}()
	return func() {
		wcancel()
		_ = w.Stop()
		<-done
	}, nil
}
