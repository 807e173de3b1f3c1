// Package backend holds what only the object-storage backends share: URL
// options, the key prefix inside a bucket, error wrapping, resumed reads,
// bounded parallelism and cleanup deadlines. Consumers of a store never
// need it: they use package store, the interface, its errors and its
// layers.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/store"
)

// Common option defaults, shared so that every backend behaves alike. An
// upload holds up to (concurrency+2) part buffers, 40 MiB by default: small
// enough for the sidecar's memory budget, and raised per URL when a faster
// link wants more in flight.
const (
	DefaultPartSize    = 8 << 20 // bytes buffered per part/block/chunk of an upload
	DefaultConcurrency = 3       // parts uploaded at once by one Put
	DefaultPageSize    = 1000    // keys per List request (the S3 maximum)
	DeleteParallelism  = 16      // single-object deletes in flight for APIs without batches
)

// Options reads the query options of a store URL. It remembers which names
// were read so that Err can reject unknown ones: a typo in an option must
// not silently fall back to a default.
type Options struct {
	u    *url.URL
	v    url.Values
	read map[string]bool
	errs []error
}

// NewOptions starts reading u's query options.
func NewOptions(u *url.URL) *Options {
	o := &Options{u: u, read: map[string]bool{}}
	var err error
	if o.v, err = url.ParseQuery(u.RawQuery); err != nil {
		// What does parse is kept, so that the errors name every problem.
		o.errs = append(o.errs, errors.New("the query does not parse: a % not followed by two hex digits, or a ; (the query is not shown: it may hold credentials)"))
	}
	return o
}

// String returns option name, or def when it is absent.
func (o *Options) String(name, def string) string {
	o.read[name] = true
	if v := o.v.Get(name); v != "" {
		return v
	}
	return def
}

// Endpoint returns option name as a service's base URL: http or https, a
// host, and no user info, query or fragment. Credentials belong where the
// backend takes them, not in a URL that errors and logs repeat.
func (o *Options) Endpoint(name string) string {
	s := o.String(name, "")
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		o.errs = append(o.errs, fmt.Errorf("option %s: want http(s)://HOST[:PORT][/PATH] with no user info or query (the value is not shown: it may hold credentials)", name))
		return ""
	}
	return s
}

// File returns the content of the file named by option name, nil when the
// option is absent. A failure names the option, not the path, so that a
// credential pasted in its place is not repeated.
func (o *Options) File(name string) []byte {
	p := o.String(name, "")
	if p == "" {
		return nil
	}
	b, err := readBounded(p, maxOptionFile)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if err != nil {
		o.errs = append(o.errs, fmt.Errorf("option %s: cannot read the file: %w", name, err))
		return nil
	}
	return b
}

// maxOptionFile bounds a file an option names (a CA bundle is a few KiB).
const maxOptionFile = 4 << 20

func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	return b, err
}

// Bool returns option name as a boolean (true/false/1/0/yes/no).
func (o *Options) Bool(name string, def bool) bool {
	s := o.String(name, "")
	switch strings.ToLower(s) {
	case "":
		return def
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	o.errs = append(o.errs, fmt.Errorf("option %s: want true or false", name))
	return def
}

// Int returns option name as an integer in [lo, hi].
func (o *Options) Int(name string, def, lo, hi int) int {
	s := o.String(name, "")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		o.errs = append(o.errs, fmt.Errorf("option %s: want an integer from %d to %d", name, lo, hi))
		return def
	}
	return n
}

// Size returns option name as a byte count in [lo, hi]; it accepts plain
// numbers and the suffixes KiB, MiB and GiB (or K, M, G).
func (o *Options) Size(name string, def, lo, hi int64) int64 {
	s := o.String(name, "")
	if s == "" {
		return def
	}
	n, err := parseSize(s)
	if err != nil || n < lo || n > hi {
		o.errs = append(o.errs, fmt.Errorf("option %s: want a size from %d to %d bytes (e.g. 16MiB)", name, lo, hi))
		return def
	}
	return n
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	u := strings.ToUpper(strings.TrimSpace(s))
	for _, suf := range []struct {
		s string
		m int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSpace(strings.TrimSuffix(u, suf.s)), suf.m
			break
		}
	}
	n, err := strconv.ParseInt(u, 10, 64)
	return n * mult, err
}

// Err reports malformed options and options no backend code asked for.
func (o *Options) Err() error {
	errs := o.errs
	var unknown, twice []string
	for name, vals := range o.v {
		if !o.read[name] {
			unknown = append(unknown, name)
		} else if len(vals) > 1 {
			twice = append(twice, name)
		}
	}
	if len(twice) > 0 {
		sort.Strings(twice)
		errs = append(errs, fmt.Errorf("option %s given more than once: give each once", strings.Join(twice, ", ")))
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		var known []string
		for name := range o.read {
			known = append(known, name)
		}
		sort.Strings(known)
		knows := "takes no options"
		if len(known) > 0 {
			knows = "knows " + strings.Join(known, ", ")
		}
		errs = append(errs, fmt.Errorf("unknown option %s (%s:// %s)", optionNames(unknown), o.u.Scheme, knows))
	}
	if len(errs) == 0 {
		return nil
	}
	return &store.Error{Op: "open", Store: store.RedactURL(o.u), Err: errors.Join(errs...)}
}

// Prefix is a store's key prefix inside its bucket or container: empty, or
// slash-separated segments ending in "/".
type Prefix string

// CleanPrefix turns the path of a store URL into a Prefix.
func CleanPrefix(p string) Prefix {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return Prefix(p + "/")
}

// Key is the full object name of key.
func (p Prefix) Key(key string) string { return string(p) + key }

// Trim turns a full object name back into a key.
func (p Prefix) Trim(name string) string { return strings.TrimPrefix(name, string(p)) }

// BucketURL splits a bucket URL (scheme://bucket/prefix) into its bucket
// and prefix, and returns the name the store uses in messages.
func BucketURL(u *url.URL, what string) (bucket string, prefix Prefix, name string, err error) {
	bucket, prefix = u.Host, CleanPrefix(u.Path)
	name = u.Scheme + "://" + bucket + "/" + strings.TrimSuffix(string(prefix), "/")
	if bucket == "" {
		return "", "", "", &store.Error{Op: "open", Store: name, Err: fmt.Errorf("no %s name: use %s://%s-name/optional/prefix", what, u.Scheme, what)}
	}
	if u.User != nil {
		// Ignored, a credential would sit in a URL that manifests and
		// command lines show, and the user would think it in use.
		return "", "", "", &store.Error{Op: "open", Store: name, Err: fmt.Errorf("user info in the URL: %s:// takes no credentials there; remove it and give them as the Store URLs table of docs/usage.md says", u.Scheme)}
	}
	return bucket, prefix, strings.TrimSuffix(name, "/"), nil
}

// Fail builds the *store.Error for op on key of the store named name.
// kind, when not nil, is the sentinel (store.ErrNotExist,
// store.ErrPrecondition) the failure means; hint, when not empty, says
// what went wrong and what to do, and is shown in place of kind.
func Fail(op, name, key string, kind error, hint string, err error) error {
	switch {
	case hint != "":
		err = &cause{kind: kind, err: fmt.Errorf("%s (%w)", hint, err)}
	case kind != nil && !errors.Is(err, kind):
		err = fmt.Errorf("%w: %w", kind, err)
	}
	return &store.Error{Op: op, Store: name, Key: key, Err: err}
}

// cause is an error that matches kind without repeating its text.
type cause struct{ kind, err error }

func (c *cause) Error() string { return c.err.Error() }

func (c *cause) Unwrap() []error {
	if c.kind == nil {
		return []error{c.err}
	}
	return []error{c.kind, c.err}
}

// MissingBucket is the hint for a bucket or container that does not exist:
// almost always a typo in the store URL or a bucket nobody created yet.
func MissingBucket(what, name string) string {
	return fmt.Sprintf("%s %q does not exist: create it or correct the store URL", what, name)
}

// Parallel calls fn for every key with at most n calls in flight and
// returns the first error.
func Parallel(ctx context.Context, n int, keys []string, fn func(ctx context.Context, key string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, key := range keys {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, key) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// Retext shows err as msg while still unwrapping to it: SDK errors can be
// long multi-line dumps that bury the one line a user needs.
func Retext(msg string, err error) error { return &retext{msg, err} }

type retext struct {
	msg string
	err error
}

func (e *retext) Error() string { return e.msg }
func (e *retext) Unwrap() error { return e.err }

// Reopen opens an object's bytes from offset on (length < 0: to the end).
type Reopen func(ctx context.Context, offset, length int64) (io.ReadCloser, error)

// resumeTries bounds the reopens of a read that makes no progress.
const resumeTries = 5

// Resume wraps body, the bytes of [offset, offset+length), so that a read
// that fails mid-body (a dropped connection) reopens the object where it
// broke: SDKs retry requests, not reads of a body they already returned.
// reopen must pin the object's version (If-Match), so that a resumed read
// never mixes two versions. fail turns a read error into the backend's
// *store.Error.
func Resume(ctx context.Context, body io.ReadCloser, offset, length int64, reopen Reopen, fail func(error) error) io.ReadCloser {
	return &resumer{ctx: ctx, body: body, pos: offset, left: length, reopen: reopen, fail: fail}
}

type resumer struct {
	ctx    context.Context
	body   io.ReadCloser
	pos    int64
	left   int64 // < 0: to the end
	failed int   // reopens since the last progress
	reopen Reopen
	fail   func(error) error
}

func (r *resumer) Read(p []byte) (int, error) {
	for {
		n, err := r.body.Read(p)
		r.pos += int64(n)
		if r.left >= 0 {
			r.left -= int64(n)
		}
		if n > 0 {
			r.failed = 0
		}
		switch {
		case err == nil || err == io.EOF:
			return n, err
		case r.left == 0:
			return n, io.EOF // everything arrived before the break
		case r.ctx.Err() != nil || r.failed >= resumeTries:
			var se *store.Error
			if !errors.As(err, &se) {
				err = r.fail(err)
			}
			return n, err
		}
		r.failed++
		r.body.Close()
		body, rerr := r.reopen(r.ctx, r.pos, r.left)
		if rerr != nil {
			r.body = io.NopCloser(errReader{rerr})
			return n, rerr
		}
		r.body = body
		if n > 0 {
			return n, nil
		}
	}
}

func (r *resumer) Close() error { return r.body.Close() }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// CleanupTimeout bounds the best-effort cleanup after a failed upload
// (aborting a multipart upload). It must stay short: the caller may be past
// its own deadline, such as the final snapshot within a pod's grace period.
// Uploads it fails to abort are left to the bucket's lifecycle rule.
const CleanupTimeout = 3 * time.Second

// CleanupContext returns a context for that cleanup: it survives the
// cancellation of ctx but lasts at most CleanupTimeout.
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}

var optionNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// optionNames lists names for a message, leaving out any that does not
// look like an option's name: a token pasted into the query with no "="
// arrives as a name.
func optionNames(names []string) string {
	var shown []string
	hidden := 0
	for _, n := range names {
		if optionNameRE.MatchString(n) {
			shown = append(shown, n)
		} else {
			hidden++
		}
	}
	if hidden > 0 {
		shown = append(shown, fmt.Sprintf("%d name(s) not shown (they may be credentials)", hidden))
	}
	return strings.Join(shown, ", ")
}
