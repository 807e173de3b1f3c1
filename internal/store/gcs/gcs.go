// Package gcs stores objects in Google Cloud Storage:
//
//	gs://bucket/prefix
//
// Credentials are Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// GKE workload identity, the metadata server). With STORAGE_EMULATOR_HOST
// set, the client talks to that emulator without authentication. Options:
// endpoint, part_size (the resumable upload chunk), list_page_size,
// max_attempts.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
)

func init() {
	store.Register("gs", func(ctx context.Context, u *url.URL) (store.Store, error) { return Open(ctx, u) })
}

// creds tells the user where this backend's credentials come from.
const creds = "GOOGLE_APPLICATION_CREDENTIALS or the pod's workload identity"

// Store is a GCS bucket, or a prefix inside one.
type Store struct {
	client    *storage.Client
	bucket    *storage.BucketHandle
	name      string
	bucketID  string
	prefix    backend.Prefix
	chunkSize int
	pageSize  int
}

// Open opens the store named by u; opts are passed to the client (tests
// use them for credentials).
func Open(ctx context.Context, u *url.URL, opts ...option.ClientOption) (*Store, error) {
	bucket, prefix, name, err := backend.BucketURL(u, "bucket")
	if err != nil {
		return nil, err
	}
	o := backend.NewOptions(u)
	endpoint := o.Endpoint("endpoint")
	s := &Store{
		name:     name,
		bucketID: bucket,
		prefix:   prefix,
		// Resumable uploads send chunks of a multiple of 256 KiB.
		chunkSize: int(o.Size("part_size", backend.DefaultPartSize, 256<<10, 1<<30)) &^ (256<<10 - 1),
		pageSize:  o.Int("list_page_size", backend.DefaultPageSize, 1, 1000),
	}
	attempts := o.Int("max_attempts", 10, 1, 100)
	if err := o.Err(); err != nil {
		return nil, err
	}
	if endpoint != "" {
		opts = append([]option.ClientOption{option.WithEndpoint(endpoint)}, opts...)
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, &store.Error{Op: "open", Store: name, Err: fmt.Errorf("%w: check %s", err, creds)}
	}
	// Every write is safe to repeat: Put rewrites the whole object, and a
	// conditional write that was applied answers 412 on its retry, which
	// store.CompareAndSwap resolves.
	client.SetRetry(
		storage.WithPolicy(storage.RetryAlways),
		storage.WithBackoff(gax.Backoff{Initial: 200 * time.Millisecond, Max: 20 * time.Second, Multiplier: 2}),
		storage.WithMaxAttempts(attempts),
	)
	s.client, s.bucket = client, client.Bucket(bucket)
	if err := s.probe(ctx); err != nil {
		client.Close()
		return nil, err
	}
	return s, nil
}

// probe lists one key so that a missing bucket or bad credentials fail at
// open; an identity that may not list passes (restore needs no listing).
func (s *Store) probe(ctx context.Context) error {
	it := s.bucket.Objects(ctx, &storage.Query{Prefix: string(s.prefix)})
	it.PageInfo().MaxSize = 1
	if _, err := it.Next(); err != nil && err != iterator.Done && status(err) != http.StatusForbidden {
		return s.fail("open", "", err)
	}
	return nil
}

func (s *Store) String() string { return s.name }

func (s *Store) Close() error { return s.client.Close() }

func status(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func (s *Store) fail(op, key string, err error) error {
	var kind error
	hint := ""
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		kind, hint = store.ErrNotExist, backend.MissingBucket("bucket", s.bucketID)
	case errors.Is(err, storage.ErrObjectNotExist) || status(err) == http.StatusNotFound:
		kind = store.ErrNotExist
	case status(err) == http.StatusPreconditionFailed:
		kind = store.ErrPrecondition
	case status(err) == http.StatusUnauthorized:
		hint = "the credentials were rejected: check " + creds
	case status(err) == http.StatusForbidden:
		hint = fmt.Sprintf("access denied: grant the identity from %s roles/storage.objectAdmin on bucket %q", creds, s.bucketID)
	}
	return backend.Fail(op, s.name, key, kind, hint, err)
}

func (s *Store) object(key string) *storage.ObjectHandle {
	return s.bucket.Object(s.prefix.Key(key))
}

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	// Cancelling the writer's context is what abandons the upload.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.object(key).NewWriter(wctx)
	w.ChunkSize = s.chunkSize
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		w.Close()
		return s.fail("put", key, err)
	}
	if err := w.Close(); err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		if _, err := s.object(key).Attrs(ctx); err != nil {
			return nil, s.fail("get", key, err)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	r, err := s.object(key).NewRangeReader(ctx, offset, length)
	if status(err) == http.StatusRequestedRangeNotSatisfiable {
		return s.Get(ctx, key, offset, 0) // offset at or past the end
	}
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return rangeReader{r}, nil
}

// rangeReader ends a range at its last byte. A manifest reader reads on
// past its trailer to prove nothing follows; there the client was seen
// reopening the object at its end (against fake-gcs-server), which the
// server answers with 416, instead of returning io.EOF.
type rangeReader struct{ *storage.Reader }

func (r rangeReader) Read(p []byte) (int, error) {
	if r.Remain() == 0 {
		return 0, io.EOF
	}
	return r.Reader.Read(p)
}

func (s *Store) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	q := &storage.Query{Prefix: s.prefix.Key(prefix)}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return s.fail("list", prefix, err)
	}
	it := s.bucket.Objects(ctx, q)
	it.PageInfo().MaxSize = s.pageSize
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return nil
		}
		if err != nil {
			return s.fail("list", prefix, err)
		}
		if err := fn(store.Object{Key: s.prefix.Trim(a.Name), Size: a.Size, Modified: a.Updated}); err != nil {
			return err
		}
	}
}

// Delete removes keys with parallel single deletes: the JSON API's batch
// endpoint is not in the Go client.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	return backend.Parallel(ctx, backend.DeleteParallelism, keys, func(ctx context.Context, key string) error {
		if err := s.object(key).Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
			return s.fail("delete", key, err)
		}
		return nil
	})
}

func (s *Store) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	r, err := s.object(key).NewReader(ctx)
	if err != nil {
		return nil, "", s.fail("load", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, "", s.fail("load", key, err)
	}
	return data, store.Version(strconv.FormatInt(r.Attrs.Generation, 10)), nil
}

// Swap writes with a generation precondition: DoesNotExist for a create,
// GenerationMatch otherwise. The version is the object's generation.
func (s *Store) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	cond := storage.Conditions{DoesNotExist: true}
	if old != "" {
		gen, err := strconv.ParseInt(string(old), 10, 64)
		if err != nil || gen <= 0 {
			return "", s.fail("swap", key, fmt.Errorf("version %q is not a GCS generation", old))
		}
		cond = storage.Conditions{GenerationMatch: gen}
	}
	w := s.object(key).If(cond).NewWriter(ctx)
	// One chunk holds the whole object: a single request that can still be
	// retried (ChunkSize 0 could not be).
	w.ChunkSize = (len(data) + 256<<10) &^ (256<<10 - 1)
	if _, err := w.Write(data); err != nil {
		w.Close()
		return "", s.fail("swap", key, err)
	}
	if err := w.Close(); err != nil {
		if old != "" && status(err) == http.StatusNotFound {
			return "", backend.Fail("swap", s.name, key, store.ErrPrecondition, "", err)
		}
		return "", s.fail("swap", key, err)
	}
	return store.Version(strconv.FormatInt(w.Attrs().Generation, 10)), nil
}
