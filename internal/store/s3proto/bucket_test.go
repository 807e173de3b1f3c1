package s3proto

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
)

// codeErr is an S3 error with a code.
type codeErr string

func (e codeErr) Error() string { return "S3 says " + string(e) }

// fake serves one object, "v2" of "0123456789", whose first body breaks
// after 4 bytes; it records the ETags reads were pinned to.
type fake struct {
	pins []string
}

func (f *fake) Code(err error) string {
	var c codeErr
	if errors.As(err, &c) {
		return string(c)
	}
	return ""
}

func (f *fake) GetObject(ctx context.Context, name string, offset, length int64, etag string) (io.ReadCloser, string, error) {
	f.pins = append(f.pins, etag)
	const data = "0123456789"
	switch {
	case name != "p/k":
		return nil, "", codeErr("NoSuchKey")
	case offset >= int64(len(data)):
		return nil, "", codeErr("InvalidRange")
	case etag != "" && etag != "v2":
		return nil, "", codeErr("PreconditionFailed")
	}
	body := data[offset:]
	if length >= 0 {
		body = body[:length]
	}
	if etag == "" && len(body) > 4 {
		return io.NopCloser(io.MultiReader(strings.NewReader(body[:4]), errReader{})), "v2", nil
	}
	return io.NopCloser(strings.NewReader(body)), "v2", nil
}

func (f *fake) HeadObject(ctx context.Context, name, etag string) (string, error) {
	if name != "p/k" {
		return "", codeErr("NotFound")
	}
	return "v2", nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func bucket() (*Bucket, *fake) {
	f := &fake{}
	return &Bucket{Store: "s3://b/p", Name: "b", Prefix: "p/", Creds: "THE_CREDS", Client: f}, f
}

func read(t *testing.T, b *Bucket, key string, offset, length int64) (string, error) {
	t.Helper()
	rc, err := b.Get(t.Context(), key, offset, length)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	return string(data), err
}

// TestGet: a broken read resumes pinned to the first answer's ETag; a read
// of nothing asks only whether the object exists.
func TestGet(t *testing.T) {
	b, f := bucket()
	for _, c := range []struct {
		offset, length int64
		want           string
	}{{0, -1, "0123456789"}, {2, 6, "234567"}, {3, 0, ""}, {10, -1, ""}, {12, 5, ""}} {
		f.pins = nil
		got, err := read(t, b, "k", c.offset, c.length)
		if err != nil || got != c.want {
			t.Errorf("Get(%d, %d) = %q, %v; want %q", c.offset, c.length, got, err, c.want)
		}
		for i, pin := range f.pins {
			if i > 0 && pin != "v2" {
				t.Errorf("Get(%d, %d): reopen %d pinned to %q, want v2", c.offset, c.length, i, pin)
			}
		}
	}
	_, err := read(t, b, "gone", 0, -1)
	var se *store.Error
	if !errors.Is(err, store.ErrNotExist) || !errors.As(err, &se) || se.Op != "get" || se.Key != "gone" || se.Store != "s3://b/p" {
		t.Errorf("Get(missing) = %v, want a get error on s3://b/p naming the key, wrapping ErrNotExist", err)
	}
}

func TestErrors(t *testing.T) {
	b, _ := bucket()
	if err := b.Probe(codeErr("AccessDenied")); err != nil {
		t.Errorf("Probe(AccessDenied) = %v: an identity that may not list must pass", err)
	}
	if err := b.Probe(codeErr("NoSuchBucket")); !errors.Is(err, store.ErrNotExist) || !strings.Contains(err.Error(), `bucket "b" does not exist`) {
		t.Errorf("Probe(NoSuchBucket) = %v", err)
	}
	if err := b.Fail("put", "k", codeErr("SignatureDoesNotMatch")); !strings.Contains(err.Error(), "secret key does not match the access key: check THE_CREDS") {
		t.Errorf("Fail(SignatureDoesNotMatch) = %v, want the hint naming the credentials", err)
	}
	if err := b.SwapFail("k", "v1", codeErr("NoSuchKey")); !errors.Is(err, store.ErrPrecondition) {
		t.Errorf("SwapFail(If-Match on a deleted object) = %v, want ErrPrecondition", err)
	}
	if err := b.SwapFail("k", "", codeErr("NoSuchKey")); errors.Is(err, store.ErrPrecondition) {
		t.Errorf("SwapFail(create answering NoSuchKey) = %v, want no ErrPrecondition", err)
	}
}
