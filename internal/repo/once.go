package repo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"github.com/homesnap/homesnap/internal/store"
)

// ReadOnce returns s for a command that reads the store's small objects
// (the marker, the head, records, a manifest's tags) and does not change
// them, such as a restore: each is loaded from s once, and every later
// Load of it gets the same bytes and version. Through a store's latency
// each repeated read was a round trip before the first archive byte; and
// every step of the command sees one head, so the head whose rollback was
// checked is the head restored. The prefetch keys are loaded at once, in
// the background, since the command needs them all: they travel together
// instead of one after another. Whatever reads through s (internal/auth)
// checks what it is given each time, as it would a fresh read.
//
// Only an answer is kept (the object or its absence), never a failure, so
// that a later read tries again. A Put, Swap or Delete passes through and
// forgets the keys it changes.
func ReadOnce(ctx context.Context, s store.Store, prefetch ...string) store.Store {
	o := &onceStore{Store: s, loads: map[string]*loaded{}}
	for _, key := range prefetch {
		go o.Load(ctx, key) // its answer waits for the command in loads
	}
	return o
}

type onceStore struct {
	store.Store
	mu    sync.Mutex
	loads map[string]*loaded
}

func (o *onceStore) Unwrap() store.Store { return o.Store }

// loaded is one Load of a key: done closes when its answer is in.
type loaded struct {
	done chan struct{}
	data []byte
	v    store.Version
	err  error
}

func (o *onceStore) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	o.mu.Lock()
	l, waiting := o.loads[key]
	if !waiting {
		l = &loaded{done: make(chan struct{})}
		o.loads[key] = l
	}
	o.mu.Unlock()
	if waiting {
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	} else {
		l.data, l.v, l.err = o.Store.Load(ctx, key)
		if l.err != nil && !errors.Is(l.err, store.ErrNotExist) {
			o.forget(key, l)
		}
		close(l.done)
	}
	if l.err != nil {
		return nil, "", l.err
	}
	return bytes.Clone(l.data), l.v, nil // a caller may change its copy
}

// forget drops key's answer (only l's, when given: a newer one stays).
func (o *onceStore) forget(key string, l *loaded) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l == nil || o.loads[key] == l {
		delete(o.loads, key)
	}
}

func (o *onceStore) Put(ctx context.Context, key string, r io.Reader) error {
	defer o.forget(key, nil)
	return o.Store.Put(ctx, key, r)
}

func (o *onceStore) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	defer o.forget(key, nil)
	return o.Store.Swap(ctx, key, data, old)
}

func (o *onceStore) Delete(ctx context.Context, keys ...string) error {
	defer func() {
		for _, k := range keys {
			o.forget(k, nil)
		}
	}()
	return o.Store.Delete(ctx, keys...)
}
