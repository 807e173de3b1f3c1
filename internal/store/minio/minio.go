// Package minio stores objects with minio-go, the client for users of
// S3-compatible servers such as MinIO, SeaweedFS or Ceph RGW:
//
//	minio://HOST:PORT/BUCKET/PREFIX?secure=false
//	minio://ACCESS:SECRET@HOST:PORT/BUCKET/PREFIX
//
// The server is the URL's host, and buckets are addressed by path unless
// path_style=false. Static keys come from the URL's user info,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN), or
// MINIO_ACCESS_KEY and MINIO_SECRET_KEY. Options: secure (TLS, default
// true), ca_file, region, path_style, part_size, upload_concurrency,
// list_page_size, max_attempts.
//
// The URL scheme chooses the client: minio:// for such servers, s3://
// (package store/s3) for AWS itself, with its credential chain (IRSA, EKS
// pod identity, profiles) and SSE-KMS. What the two share lives in
// store/s3proto.
package minio

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
	"github.com/homesnap/homesnap/internal/store/s3proto"
)

func init() {
	store.Register("minio", func(ctx context.Context, u *url.URL) (store.Store, error) { return Open(ctx, u) })
}

// creds tells the user where this backend's credentials come from.
const creds = "the store URL's user info, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or MINIO_ACCESS_KEY/MINIO_SECRET_KEY"

// Store is a bucket, or a prefix inside one, on an S3-compatible server.
type Store struct {
	client      *minio.Client
	bucket      string
	prefix      backend.Prefix
	name        string
	partSize    uint64
	concurrency uint
	pageSize    int
	bufs        sync.Pool // of *[]byte of partSize, reused between Puts
	objects     *s3proto.Bucket
}

// Open opens the store named by u.
func Open(ctx context.Context, u *url.URL) (*Store, error) {
	bucket, rest, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	prefix := backend.CleanPrefix(rest)
	name := strings.TrimSuffix("minio://"+u.Host+"/"+bucket+"/"+string(prefix), "/")
	fail := func(err error) error { return &store.Error{Op: "open", Store: name, Err: err} }
	if u.Host == "" || bucket == "" {
		return nil, fail(errors.New("want minio://HOST:PORT/BUCKET/optional/prefix"))
	}
	o := backend.NewOptions(u)
	secure := o.Bool("secure", true)
	caPEM := o.File("ca_file")
	pathStyle := o.Bool("path_style", true)
	s := &Store{
		bucket:      bucket,
		prefix:      prefix,
		name:        name,
		partSize:    uint64(o.Size("part_size", backend.DefaultPartSize, 5<<20, 5<<30)),
		concurrency: uint(o.Int("upload_concurrency", backend.DefaultConcurrency, 1, 64)),
		pageSize:    o.Int("list_page_size", backend.DefaultPageSize, 1, 1000),
	}
	s.bufs.New = func() any { b := make([]byte, s.partSize); return &b }
	opts := &minio.Options{
		Secure:     secure,
		Region:     o.String("region", "us-east-1"), // set, so no GetBucketLocation round trip
		MaxRetries: o.Int("max_attempts", 10, 1, 100),
	}
	if err := o.Err(); err != nil {
		return nil, err
	}
	if pathStyle {
		opts.BucketLookup = minio.BucketLookupPath
	}
	opts.Creds = staticCreds(u)
	if opts.Creds == nil {
		return nil, fail(errors.New("no credentials: set " + creds))
	}
	if caPEM != nil {
		tr, err := minio.DefaultTransport(secure)
		if err != nil {
			return nil, fail(err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fail(errors.New("option ca_file: the file holds no PEM certificate"))
		}
		tr.TLSClientConfig.RootCAs = pool
		opts.Transport = tr
	}
	client, err := minio.New(u.Host, opts)
	if err != nil {
		return nil, fail(err)
	}
	s.client = client
	s.objects = &s3proto.Bucket{Store: name, Name: bucket, Prefix: prefix, Creds: creds, Client: (*objectClient)(s)}
	if err := s.probe(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func staticCreds(u *url.URL) *credentials.Credentials {
	if u.User != nil {
		secret, _ := u.User.Password()
		return credentials.NewStaticV4(u.User.Username(), secret, "")
	}
	if k, s := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); k != "" && s != "" {
		return credentials.NewStaticV4(k, s, os.Getenv("AWS_SESSION_TOKEN"))
	}
	if k, s := os.Getenv("MINIO_ACCESS_KEY"), os.Getenv("MINIO_SECRET_KEY"); k != "" && s != "" {
		return credentials.NewStaticV4(k, s, "")
	}
	return nil
}

// probe lists one key (see s3proto.Bucket.Probe).
func (s *Store) probe(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The first result is enough; cancel stops the listing.
	o, ok := <-s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: string(s.prefix), Recursive: true, MaxKeys: 1})
	if !ok {
		return nil
	}
	return s.objects.Probe(o.Err)
}

func (s *Store) String() string { return s.name }

func (s *Store) Close() error { return nil }

func (s *Store) fail(op, key string, err error) error { return s.objects.Fail(op, key, err) }

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	name := s.prefix.Key(key)
	// An object that fits one part goes up in one request: minio-go would
	// allocate all its part buffers even for a few bytes.
	bp := s.bufs.Get().(*[]byte)
	inUse := false    // still read by an upload abandoned at the deadline
	streamed := false // a multipart upload was started
	defer func() {
		if !inUse {
			s.bufs.Put(bp)
		}
	}()
	first := *bp
	n, err := io.ReadFull(r, first)
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		_, err = s.client.PutObject(ctx, s.bucket, name, bytes.NewReader(first[:n]), int64(n), minio.PutObjectOptions{})
	case nil:
		streamed = true
		inUse, err = s.putStream(ctx, name, io.MultiReader(bytes.NewReader(first), r))
	}
	if err != nil {
		if streamed && !inUse {
			// minio-go aborted with the caller's context, which may be the
			// very thing that was cancelled: try once more, briefly. (An
			// abandoned upload is still aborting in the background.)
			actx, cancel := backend.CleanupContext(ctx)
			defer cancel()
			s.client.RemoveIncompleteUpload(actx, s.bucket, name)
		}
		return s.fail("put", key, err)
	}
	return nil
}

// putStream uploads r as a multipart upload. Size -1 streams: minio-go fills
// concurrency buffers of partSize and uploads them in parallel; objects may
// reach 10000 × part_size. After a failure minio-go aborts the upload with
// its own minute-long retries, so the caller's deadline is enforced here:
// once ctx ends, Put returns and the abort finishes in the background (the
// upload can no longer complete, so nothing becomes visible).
// abandoned reports that the upload may still be reading r.
func (s *Store) putStream(ctx context.Context, name string, r io.Reader) (abandoned bool, err error) {
	done := make(chan error, 1)
	go func() {
		_, err := s.client.PutObject(ctx, s.bucket, name, r, -1, minio.PutObjectOptions{
			PartSize: s.partSize, NumThreads: s.concurrency, ConcurrentStreamParts: true,
		})
		done <- err
	}()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.objects.Get(ctx, key, offset, length)
}

func (s *Store) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	return s.objects.Load(ctx, key)
}

// objectClient is the Store as s3proto reads objects through it.
type objectClient Store

func (c *objectClient) Code(err error) string { return minio.ToErrorResponse(err).Code }

func (c *objectClient) GetObject(ctx context.Context, name string, offset, length int64, etag string) (io.ReadCloser, string, error) {
	var opts minio.GetObjectOptions
	if etag != "" {
		opts.SetMatchETag(etag)
	}
	switch {
	case length > 0:
		opts.SetRange(offset, offset+length-1)
	case offset > 0:
		opts.SetRange(offset, 0)
	}
	body, info, _, err := minio.Core{Client: c.client}.GetObject(ctx, c.bucket, name, opts)
	return body, info.ETag, err
}

func (c *objectClient) HeadObject(ctx context.Context, name, etag string) (string, error) {
	var opts minio.StatObjectOptions
	if etag != "" {
		opts.SetMatchETag(etag)
	}
	info, err := c.client.StatObject(ctx, c.bucket, name, opts)
	return info.ETag, err
}

func (s *Store) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's listing goroutine when fn fails
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix.Key(prefix), Recursive: true, MaxKeys: s.pageSize}) {
		if o.Err != nil {
			return s.fail("list", prefix, o.Err)
		}
		if err := fn(store.Object{Key: s.prefix.Trim(o.Key), Size: o.Size, Modified: o.LastModified}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) Delete(ctx context.Context, keys ...string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objs := make(chan minio.ObjectInfo)
	go func() {
		defer close(objs)
		for _, key := range keys {
			select {
			case objs <- minio.ObjectInfo{Key: s.prefix.Key(key)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	// RemoveObjects sends DeleteObjects requests of up to 1000 keys.
	for e := range s.client.RemoveObjects(ctx, s.bucket, objs, minio.RemoveObjectsOptions{}) {
		if minio.ToErrorResponse(e.Err).Code != "NoSuchKey" {
			return s.fail("delete", s.prefix.Trim(e.ObjectName), e.Err)
		}
	}
	return ctx.Err()
}

func (s *Store) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	var opts minio.PutObjectOptions
	if old == "" {
		opts.SetMatchETagExcept("*")
	} else {
		opts.SetMatchETag(string(old))
	}
	info, err := s.client.PutObject(ctx, s.bucket, s.prefix.Key(key), bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		return "", s.objects.SwapFail(key, old, err)
	}
	return store.Version(info.ETag), nil
}
