package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Opener opens a store from its parsed URL.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
	leftOut = map[string]leftOutBackend{} // by scheme
)

// leftOutBackend is a backend a build tag left out of this binary.
type leftOutBackend struct{ name, tag string }

// Register makes a backend available for URLs with the given scheme. It is
// called from the backend package's init function.
func Register(scheme string, open Opener) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("store: scheme registered twice: " + scheme)
	}
	openers[scheme] = open
}

// LeftOut records that the build tag tag left the backend name (GCS,
// Azure, ...) and its URL scheme out of this binary, so that Open says so
// rather than calling the scheme unknown. Called from an init function of
// a file that tag selects (internal/store/all).
func LeftOut(scheme, name, tag string) {
	mu.Lock()
	defer mu.Unlock()
	leftOut[scheme] = leftOutBackend{name, tag}
}

// SchemeError is Open's answer to a URL that no backend of this binary
// opens: a mistake in the URL, or a binary built without that backend.
type SchemeError struct {
	URL, Scheme string
	Backend     string   // the backend a build tag left out, if one did
	Tag         string   // that build tag
	Supported   []string // the schemes this binary opens
}

func (e *SchemeError) Error() string {
	if e.Backend != "" {
		return fmt.Sprintf("store %s: this homesnap was built without %s support (build tag %s); use the full image or a release binary, which have every backend (this one opens: %s)",
			e.URL, e.Backend, e.Tag, strings.Join(e.Supported, ", "))
	}
	return fmt.Sprintf("store %s: unknown scheme %q (supported: %s)", e.URL, e.Scheme, strings.Join(e.Supported, ", "))
}

// ErrNoStore is Open's answer to an empty URL.
var ErrNoStore = errors.New("no store given")

// Open opens the store named by raw. A plain path (absolute or relative)
// means the local directory store, the same as file:///abs/path. The
// backend comes wrapped by Checked.
func Open(ctx context.Context, raw string) (Store, error) {
	if raw == "" {
		return nil, ErrNoStore
	}
	u, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	mu.RLock()
	open, ok := openers[u.Scheme]
	out := leftOut[u.Scheme]
	mu.RUnlock()
	if !ok {
		return nil, &SchemeError{URL: RedactURL(u), Scheme: u.Scheme, Backend: out.name, Tag: out.tag, Supported: Schemes()}
	}
	s, err := open(ctx, u)
	if err != nil {
		return nil, err
	}
	return Checked(s), nil
}

// ParseURL parses a store URL, turning a plain path into a file:// URL.
func ParseURL(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return nil, fmt.Errorf("store path %q: %w", raw, err)
		}
		return &url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}, nil
	}
	u, err := url.Parse(raw)
	if err == nil && !validHost(u.Host) {
		err = errBadHost
	}
	if err != nil {
		return nil, parseError(raw, err)
	}
	return u, nil
}

// Schemes lists the registered URL schemes.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	var s []string
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// CompareAndSwap is Swap made safe against retried writes: a conditional
// write whose first attempt was applied but whose answer was lost is retried
// by the SDK and then reports ErrPrecondition. When that happens and the
// object now holds exactly data, the write was ours and succeeded. data must
// therefore be unique to this writer (it carries a snapshot ID), which makes
// the comparison sound.
func CompareAndSwap(ctx context.Context, s Store, key string, data []byte, old Version) (Version, error) {
	v, err := s.Swap(ctx, key, data, old)
	if err == nil || !errors.Is(err, ErrPrecondition) {
		return v, err
	}
	cur, curV, lerr := s.Load(ctx, key)
	if lerr == nil && bytes.Equal(cur, data) {
		return curV, nil
	}
	return "", err
}
