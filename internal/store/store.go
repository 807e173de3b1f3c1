// Package store defines the small object-storage interface homesnap needs and
// the registry that opens a backend from a URL. Every backend lives in its own
// sub-package and registers itself for one or more URL schemes; Open wraps
// each with Checked, so that a backend sees only valid keys.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Store is a flat key/value object store. Keys are slash-separated and
// relative to the store's prefix. Implementations must be safe for
// concurrent use.
type Store interface {
	// Put streams r into key, replacing any existing object. The length of r
	// is not known in advance; implementations must upload with bounded
	// memory and no temporary files outside the store itself. The object is
	// visible only once Put returns nil.
	Put(ctx context.Context, key string, r io.Reader) error

	// Get returns length bytes of key starting at offset; length < 0 reads
	// to the end. It returns an error wrapping ErrNotExist when key is absent.
	Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// List calls fn for every object whose key starts with prefix, in
	// lexical key order, paging through the backend as needed. An error
	// returned by fn stops the listing and is returned.
	List(ctx context.Context, prefix string, fn func(Object) error) error

	// Delete removes keys. Absent keys are not an error.
	Delete(ctx context.Context, keys ...string) error

	// Load reads a small object whole, with the version token that Swap
	// compares against. It returns an error wrapping ErrNotExist when key is
	// absent.
	Load(ctx context.Context, key string) ([]byte, Version, error)

	// Swap writes a small object only if key is still at version old; the
	// empty Version means key must not exist yet (a conditional create). It
	// returns the new version, or an error wrapping ErrPrecondition when the
	// object changed (or appeared) in the meantime. Callers use
	// CompareAndSwap, which also resolves retried writes that were applied.
	Swap(ctx context.Context, key string, data []byte, old Version) (Version, error)

	// String names the store for messages (its URL without credentials).
	String() string

	// Close releases the store's resources.
	Close() error
}

// Version is an opaque token naming one state of an object: an ETag, a
// generation number, a content hash. The empty Version means "absent".
type Version string

// Object describes one listed object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

var (
	// ErrNotExist means the object (or the bucket) does not exist.
	ErrNotExist = errors.New("does not exist")
	// ErrPrecondition means a conditional write lost its race.
	ErrPrecondition = errors.New("precondition failed: the object was changed by another writer")
)

// Error wraps a backend failure with the operation, the store and the key,
// so that every message names what failed.
type Error struct {
	Op    string // "put", "get", "list", "delete", "load", "swap", "open"
	Store string // the store's String()
	Key   string
	Err   error
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Store, e.Err)
	}
	return fmt.Sprintf("%s %s/%s: %v", e.Op, e.Store, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
