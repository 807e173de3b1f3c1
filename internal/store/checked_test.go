package store

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// recorder is a backend that records the keys it is asked for.
type recorder struct {
	Store // nil: methods not overridden are not called
	keys  []string
	read  error // what Put's reading of its reader ended with
}

func (r *recorder) String() string { return "mem://test" }

func (r *recorder) Put(ctx context.Context, key string, body io.Reader) error {
	r.keys = append(r.keys, key)
	_, r.read = io.Copy(io.Discard, body)
	return r.read
}

func (r *recorder) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	r.keys = append(r.keys, key)
	return io.NopCloser(strings.NewReader("")), nil
}

func (r *recorder) List(ctx context.Context, prefix string, fn func(Object) error) error {
	return nil
}

func (r *recorder) Delete(ctx context.Context, keys ...string) error {
	r.keys = append(r.keys, keys...)
	return nil
}

func (r *recorder) Load(ctx context.Context, key string) ([]byte, Version, error) {
	r.keys = append(r.keys, key)
	return nil, "v", nil
}

func (r *recorder) Swap(ctx context.Context, key string, data []byte, old Version) (Version, error) {
	r.keys = append(r.keys, key)
	return "v", nil
}

// TestCheckedRefusesBadKeys: no backend sees an invalid key, and the error
// names the operation, the store and the key, as a backend's would.
func TestCheckedRefusesBadKeys(t *testing.T) {
	ctx := t.Context()
	rec := &recorder{}
	s := Checked(rec)
	for _, bad := range []string{"", ".", "/abs", "../up", "a/../../up", "a//b", "a/./b", "dir/"} {
		ops := map[string]error{
			"put":    s.Put(ctx, bad, strings.NewReader("x")),
			"delete": s.Delete(ctx, "fine", bad),
			"swap":   func() error { _, err := s.Swap(ctx, bad, nil, ""); return err }(),
			"load":   func() error { _, _, err := s.Load(ctx, bad); return err }(),
			"get":    func() error { _, err := s.Get(ctx, bad, 0, -1); return err }(),
		}
		if bad != "" && bad != "." && bad != "dir/" { // valid prefixes
			ops["list"] = s.List(ctx, bad, func(Object) error { return nil })
		}
		for op, err := range ops {
			var se *Error
			if !errors.As(err, &se) || se.Op != op || se.Store != "mem://test" || se.Key != bad || !strings.Contains(err.Error(), "invalid ") {
				t.Errorf("%s(%q) = %v, want a *store.Error of %s on mem://test naming the key as invalid", op, bad, err, op)
			}
		}
	}
	if len(rec.keys) != 0 {
		t.Errorf("the backend was asked for %q; a batch with a bad key must delete nothing", rec.keys)
	}
	for _, prefix := range []string{"", "a", "a/", "archives/2026", "..x"} {
		if err := s.List(ctx, prefix, func(Object) error { return nil }); err != nil {
			t.Errorf("List(%q) = %v", prefix, err)
		}
	}
	if err := s.Delete(ctx, "a", "b/c"); err != nil || len(rec.keys) != 2 {
		t.Errorf("Delete(valid keys) = %v, backend saw %q", err, rec.keys)
	}
}

// TestCheckedPutStopsReading: once ctx is done, the backend's reader ends
// with ctx's error instead of running on to its end.
func TestCheckedPutStopsReading(t *testing.T) {
	rec := &recorder{}
	ctx, cancel := context.WithCancel(t.Context())
	body := &cancelAfter{n: 3, cancel: cancel}
	err := Checked(rec).Put(ctx, "k", body)
	if !errors.Is(err, context.Canceled) || !errors.Is(rec.read, context.Canceled) || body.reads != 3 {
		t.Errorf("Put = %v after %d reads, want context.Canceled after 3", err, body.reads)
	}
}

// cancelAfter is a long reader (1000 reads) that cancels its context
// after n.
type cancelAfter struct {
	n, reads int
	cancel   context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	c.reads++
	if c.reads == c.n {
		c.cancel()
	}
	if c.reads > 1000 {
		return 0, io.EOF
	}
	return len(p), nil
}

func TestCheckedWrapsOnce(t *testing.T) {
	s := Checked(&recorder{})
	if Checked(s) != s {
		t.Errorf("Checked(Checked(s)) wraps twice")
	}
}
