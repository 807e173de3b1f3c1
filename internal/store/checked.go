package store

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
)

// Checked wraps a backend with what every store does alike, so that each
// backend does only its own work. It refuses an invalid key (or a List
// prefix leading out of the store) before the backend sees it: one rule, so
// that a key valid on one store is valid on all, and a file store's key
// never leaves its directory. And it ends a Put's reading of its reader
// once ctx is done, where an uploader would drain the whole reader before
// noticing. Open wraps every store it opens; code that opens a backend
// directly wraps it the same way. A store already wrapped is returned as it
// is.
func Checked(s Store) Store {
	if c, ok := s.(checked); ok {
		return c
	}
	return checked{s}
}

type checked struct{ Store }

func (c checked) Unwrap() Store { return c.Store }

func (c checked) check(op, key string) error {
	if err := CheckKey(key); err != nil {
		return &Error{Op: op, Store: c.String(), Key: key, Err: err}
	}
	return nil
}

func (c checked) Put(ctx context.Context, key string, r io.Reader) error {
	if err := c.check("put", key); err != nil {
		return err
	}
	return c.Store.Put(ctx, key, ContextReader(ctx, r))
}

func (c checked) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := c.check("get", key); err != nil {
		return nil, err
	}
	return c.Store.Get(ctx, key, offset, length)
}

// List refuses a prefix no valid key can start with in a way that leaves
// the store ("../", "/"), and so no listing walks outside it.
func (c checked) List(ctx context.Context, prefix string, fn func(Object) error) error {
	if CheckKey(prefix+"x") != nil {
		return &Error{Op: "list", Store: c.String(), Key: prefix, Err: fmt.Errorf("invalid prefix %q: want a relative slash-separated path", prefix)}
	}
	return c.Store.List(ctx, prefix, fn)
}

// Delete checks every key before deleting any, so that a bad key in a
// batch leaves the store as it was.
func (c checked) Delete(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		if err := c.check("delete", key); err != nil {
			return err
		}
	}
	return c.Store.Delete(ctx, keys...)
}

func (c checked) Load(ctx context.Context, key string) ([]byte, Version, error) {
	if err := c.check("load", key); err != nil {
		return nil, "", err
	}
	return c.Store.Load(ctx, key)
}

func (c checked) Swap(ctx context.Context, key string, data []byte, old Version) (Version, error) {
	if err := c.check("swap", key); err != nil {
		return "", err
	}
	return c.Store.Swap(ctx, key, data, old)
}

// CheckKey rejects keys that are not clean relative slash paths, the same
// rule for every backend so that a key valid on one store is valid on all.
func CheckKey(key string) error {
	if key == "" || key == "." || strings.HasPrefix(key, "/") || path.Clean(key) != key || key == ".." || strings.HasPrefix(key, "../") {
		return fmt.Errorf("invalid key %q: want a relative slash-separated path", key)
	}
	return nil
}

// ContextReader ends a long read with ctx's error once ctx is done, for
// uploaders that would otherwise drain the whole reader before noticing.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
