package backend

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
)

func TestOptions(t *testing.T) {
	u, _ := url.Parse("s3://b/p?part_size=8MiB&n=3&flag=yes&typo=1")
	o := NewOptions(u)
	if got := o.Size("part_size", 0, 0, 1<<30); got != 8<<20 {
		t.Errorf("Size = %d", got)
	}
	if got := o.Int("n", 1, 0, 10); got != 3 {
		t.Errorf("Int = %d", got)
	}
	if !o.Bool("flag", false) || o.String("absent", "def") != "def" {
		t.Errorf("Bool/String defaults wrong")
	}
	err := o.Err()
	if err == nil || !strings.Contains(err.Error(), "unknown option typo") || !strings.Contains(err.Error(), "part_size") {
		t.Errorf("Err = %v, want the unknown option named with the known ones", err)
	}
	u, _ = url.Parse("s3://b/p?n=11&part_size=1X")
	o = NewOptions(u)
	o.Int("n", 1, 0, 10)
	o.Size("part_size", 0, 0, 1<<30)
	if err := o.Err(); err == nil || !strings.Contains(err.Error(), "option n:") || !strings.Contains(err.Error(), "option part_size:") {
		t.Errorf("Err = %v, want both bad options named", err)
	}
	u, _ = url.Parse("s3://b/p?n=1&n=2")
	o = NewOptions(u)
	o.Int("n", 1, 0, 10)
	if err := o.Err(); err == nil || !strings.Contains(err.Error(), "option n given more than once") {
		t.Errorf("Err = %v, want the repeated option refused", err)
	}
}

func TestPrefixAndKeys(t *testing.T) {
	for in, want := range map[string]Prefix{"": "", "/": "", "/a/b/": "a/b/", "a": "a/"} {
		if got := CleanPrefix(in); got != want {
			t.Errorf("CleanPrefix(%q) = %q, want %q", in, got, want)
		}
	}
	p := CleanPrefix("x")
	if p.Key("k") != "x/k" || p.Trim("x/k") != "k" {
		t.Errorf("Key/Trim wrong")
	}
	u, _ := url.Parse("gs://bucket/a/b/")
	if b, p, name, err := BucketURL(u, "bucket"); b != "bucket" || p != "a/b/" || name != "gs://bucket/a/b" || err != nil {
		t.Errorf("BucketURL = %q %q %q %v", b, p, name, err)
	}
	u, _ = url.Parse("s3://AKIA:" + secret + "@bucket/p")
	if _, _, _, err := BucketURL(u, "bucket"); err == nil || !strings.Contains(err.Error(), "user info") || strings.Contains(err.Error(), secret) {
		t.Errorf("BucketURL with user info: %v, want a refusal that does not show it", err)
	}
}

func TestFail(t *testing.T) {
	orig := errors.New("sdk: 404 NoSuchBucket")
	err := Fail("get", "s3://b", "k", store.ErrNotExist, MissingBucket("bucket", "b"), Retext("short", orig))
	if !errors.Is(err, store.ErrNotExist) || !errors.Is(err, orig) {
		t.Errorf("Fail lost a wrapped error: %v", err)
	}
	if want := `get s3://b/k: bucket "b" does not exist: create it or correct the store URL (short)`; err.Error() != want {
		t.Errorf("message\n%s, want\n%s", err, want)
	}
	err = Fail("swap", "s3://b", "k", store.ErrPrecondition, "", orig)
	if !errors.Is(err, store.ErrPrecondition) || !strings.Contains(err.Error(), "precondition failed") {
		t.Errorf("Fail = %v", err)
	}
}

// brokenBody returns its bytes in one read, then the error.
type brokenBody struct {
	data string
	err  error
}

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.data == "" {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *brokenBody) Close() error { return nil }

func TestResume(t *testing.T) {
	const obj = "0123456789abcdefghij"
	cut := errors.New("connection reset")
	// Every body breaks after 3 bytes.
	open := func(off, n int64) io.ReadCloser {
		end := int64(len(obj))
		if n >= 0 {
			end = min(off+n, end)
		}
		part := obj[off:end]
		if len(part) > 3 {
			return &brokenBody{part[:3], cut}
		}
		return &brokenBody{part, io.EOF}
	}
	reopen := func(_ context.Context, off, n int64) (io.ReadCloser, error) { return open(off, n), nil }
	fail := func(err error) error { return &store.Error{Op: "get", Store: "x", Key: "k", Err: err} }
	for _, c := range [][2]int64{{0, -1}, {5, 10}, {2, 3}} {
		r := Resume(context.Background(), open(c[0], c[1]), c[0], c[1], reopen, fail)
		got, err := io.ReadAll(r)
		want := obj[c[0]:]
		if c[1] >= 0 {
			want = want[:c[1]]
		}
		if err != nil || string(got) != want {
			t.Errorf("Resume(%d, %d) = %q, %v; want %q", c[0], c[1], got, err, want)
		}
	}
	// A body that never makes progress gives up with a *Error.
	dead := func(context.Context, int64, int64) (io.ReadCloser, error) { return &brokenBody{"", cut}, nil }
	_, err := io.ReadAll(Resume(context.Background(), &brokenBody{"", cut}, 0, -1, dead, fail))
	var se *store.Error
	if !errors.Is(err, cut) || !errors.As(err, &se) {
		t.Errorf("dead body: %v, want the cut wrapped in *Error", err)
	}
}

// secret stands for a credential; no message may hold it.
const secret = "Zq7SECRETvalue"

// TestOptionErrorsHoldNoValue: an option's value may be a credential put in
// the wrong place, and a name that is not an option's may be a token.
func TestOptionErrorsHoldNoValue(t *testing.T) {
	for _, q := range []string{
		"part_size=" + secret,
		"n=" + secret,
		"flag=" + secret,
		"endpoint=" + url.QueryEscape("http://AKIA:"+secret+"@127.0.0.1:9"),
		"endpoint=" + url.QueryEscape("http://127.0.0.1:9/?sig="+secret),
		"endpoint=" + secret,
		"sig=" + secret,
		secret,
		secret + "=1",
		"sig=" + secret + "%zz",
		"ca_file=/nonexistent/" + secret,
	} {
		u := &url.URL{Scheme: "s3", Host: "b", Path: "/p", RawQuery: q}
		o := NewOptions(u)
		o.Size("part_size", 0, 0, 1<<30)
		o.Int("n", 1, 0, 10)
		o.Bool("flag", false)
		o.Endpoint("endpoint")
		o.File("ca_file")
		err := o.Err()
		if err == nil {
			t.Errorf("?%s: no error", q)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(strings.ToLower(err.Error()), strings.ToLower(secret)) {
			t.Errorf("?%s: %q holds the value", q, err)
		}
	}
}
