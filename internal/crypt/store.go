package crypt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// Store encrypts the objects that carry home content (repo.CarriesContent)
// for its recipients and decrypts them with its identities; every other
// object (marker, head) passes through unchanged. Callers use the plain
// keys; the wrapped store holds repo.EncryptedKey(key).
type Store struct {
	inner      store.Store
	recipients []age.Recipient
	identities []age.Identity
	// need names the recipients the objects read through this store are
	// expected to be encrypted to, for the message when no identity fits.
	need []string

	mu      sync.Mutex
	headers map[string]*payload // opened age headers by plain key, for ranged reads
}

// maxHeaders bounds the cache of opened headers; a restore reads a bounded
// number of archives, and an evicted header is simply read again.
const maxHeaders = 256

// Wrap returns a store that encrypts to recipients (nil: read-only for
// content) and decrypts with identities (nil: write-only for content).
// need lists the fingerprints an identity must match, for messages.
func Wrap(inner store.Store, recipients []age.Recipient, identities []age.Identity, need []string) *Store {
	return &Store{inner: inner, recipients: recipients, identities: identities, need: need, headers: map[string]*payload{}}
}

// Unwrap returns the store holding the encrypted objects.
func (s *Store) Unwrap() store.Store { return s.inner }

// NoIdentityError means none of the identities given can decrypt an object.
type NoIdentityError struct {
	Object string   // the store object (with its .age suffix)
	Need   []string // fingerprints of the recipients it is (likely) encrypted to
	Have   []string // fingerprints of the identities given
}

func (e *NoIdentityError) Error() string {
	have := "no age identity was given"
	if len(e.Have) > 0 {
		have = "the identities given are for " + list(e.Have)
	}
	return fmt.Sprintf("%s is encrypted with age and %s: it needs the identity of one of the recipients %s (fingerprints)",
		e.Object, have, list(e.Need))
}

// ErrTampered marks an encrypted object that fails authentication: a
// corrupt snapshot, as a damaged plain archive is.
var ErrTampered = fmt.Errorf("%w: failed authentication: the object is damaged or was tampered with", archive.ErrCorrupt)

func (s *Store) stored(key string) string { return repo.EncryptedKey(key) }

func (s *Store) name(key string) string { return repo.Name(s.inner, s.stored(key)) }

// fail turns an error met while decrypting key into one that names the
// object: a missing identity names the recipients needed, a failed read of
// the store passes through, anything else means the ciphertext is damaged.
func (s *Store) fail(key string, err error) error {
	var nomatch *age.NoIdentityMatchError
	var se *store.Error
	var ae *auth.Error
	switch {
	case errors.As(err, &ae):
		return err // the stored bytes failed authentication: that says more than age would
	case errors.As(err, &nomatch) || len(s.identities) == 0:
		return &NoIdentityError{Object: s.name(key), Need: s.need, Have: IdentityFingerprints(s.identities)}
	case errors.As(err, &se), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("%s: %w (%v)", s.name(key), ErrTampered, err)
}

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if !repo.CarriesContent(key) {
		return s.inner.Put(ctx, key, r)
	}
	if len(s.recipients) == 0 {
		return fmt.Errorf("put %s: this store was opened without age recipients and cannot write content", s.name(key))
	}
	enc, err := age.EncryptReader(r, s.recipients...)
	if err != nil {
		return fmt.Errorf("put %s: %w", s.name(key), err)
	}
	s.forget(key)
	return s.inner.Put(ctx, s.stored(key), enc)
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if !repo.CarriesContent(key) {
		return s.inner.Get(ctx, key, offset, length)
	}
	if offset == 0 && length < 0 {
		return s.getWhole(ctx, key)
	}
	return s.getRange(ctx, key, offset, length)
}

// getWhole decrypts a whole object with age's own stream reader, which also
// proves the object is complete.
func (s *Store) getWhole(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.inner.Get(ctx, s.stored(key), 0, -1)
	if err != nil {
		return nil, err
	}
	if len(s.identities) == 0 {
		rc.Close()
		return nil, s.fail(key, nil)
	}
	plain, err := age.Decrypt(rc, s.identities...)
	if err != nil {
		rc.Close()
		return nil, s.fail(key, err)
	}
	return &namedReader{r: plain, c: rc, s: s, key: key}, nil
}

// namedReader names the object in errors raised while decrypting.
type namedReader struct {
	r   io.Reader
	c   io.Closer
	s   *Store
	key string
}

func (n *namedReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if err != nil && err != io.EOF {
		err = n.s.fail(n.key, err)
	}
	return k, err
}

func (n *namedReader) Close() error { return n.c.Close() }

func (s *Store) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	return s.inner.List(ctx, prefix, func(o store.Object) error {
		if repo.CarriesContent(o.Key) {
			o.Key, _ = repo.PlainKey(o.Key) // Size stays the stored size
		}
		return fn(o)
	})
}

// Delete removes both forms of a content key, so that prune works on a
// store migrated from plain to encrypted (or back).
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	all := make([]string, 0, len(keys))
	for _, k := range keys {
		all = append(all, k)
		if repo.CarriesContent(k) {
			all = append(all, s.stored(k))
		}
	}
	s.forget(keys...)
	return s.inner.Delete(ctx, all...)
}

func (s *Store) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	if !repo.CarriesContent(key) {
		return s.inner.Load(ctx, key)
	}
	data, v, err := s.inner.Load(ctx, s.stored(key))
	if err != nil {
		return nil, "", err
	}
	if len(s.identities) == 0 {
		return nil, "", s.fail(key, nil)
	}
	r, err := age.Decrypt(bytes.NewReader(data), s.identities...)
	if err != nil {
		return nil, "", s.fail(key, err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return nil, "", s.fail(key, err)
	}
	return plain, v, nil
}

func (s *Store) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	if !repo.CarriesContent(key) {
		return s.inner.Swap(ctx, key, data, old)
	}
	if len(s.recipients) == 0 {
		return "", fmt.Errorf("swap %s: this store was opened without age recipients and cannot write content", s.name(key))
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, s.recipients...)
	if err != nil {
		return "", err
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		return "", err
	}
	s.forget(key)
	return s.inner.Swap(ctx, s.stored(key), buf.Bytes(), old)
}

// forget drops the opened headers of keys about to change.
func (s *Store) forget(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.headers, k)
	}
}

func (s *Store) String() string { return s.inner.String() }

func (s *Store) Close() error { return s.inner.Close() }

var _ store.Store = (*Store)(nil)
