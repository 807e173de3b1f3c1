// Package s3 stores objects in Amazon S3 with aws-sdk-go-v2, the client for
// users on AWS itself:
//
//	s3://bucket/prefix?region=eu-west-1
//	s3://bucket/prefix?endpoint=http://127.0.0.1:7070&path_style=true
//
// Credentials come from the SDK's default chain (environment, shared config
// and profile=, IRSA web identity, EKS pod identity, instance role), and
// objects can be encrypted with SSE-KMS. Options: region, endpoint,
// path_style, profile, ca_file, sse (AES256, aws:kms), kms_key_id,
// storage_class, part_size, upload_concurrency, list_page_size,
// max_attempts.
//
// The URL scheme chooses the client: s3:// for AWS (or an S3-compatible
// server reached with AWS's credential chain), minio:// (package
// store/minio) for S3-compatible servers such as MinIO, SeaweedFS or Ceph
// with static keys. What the two share lives in store/s3proto.
package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
	"github.com/homesnap/homesnap/internal/store/s3proto"
)

func init() {
	store.Register("s3", func(ctx context.Context, u *url.URL) (store.Store, error) { return Open(ctx, u) })
}

// S3 limits a multipart upload to 10000 parts and a DeleteObjects call to
// 1000 keys.
const (
	maxParts    = 10000
	deleteBatch = 1000
)

// Store is an S3 bucket, or a prefix inside one.
type Store struct {
	client      *s3.Client
	bucket      string
	prefix      backend.Prefix
	name        string
	partSize    int64
	concurrency int
	pageSize    int32
	sse         types.ServerSideEncryption
	kmsKeyID    *string
	class       types.StorageClass
	bufs        sync.Pool // of *[]byte of partSize
	objects     *s3proto.Bucket
}

// Open opens the store named by u. optFns are applied after the defaults
// (tests use them to pass static credentials).
func Open(ctx context.Context, u *url.URL, optFns ...func(*config.LoadOptions) error) (*Store, error) {
	bucket, prefix, name, err := backend.BucketURL(u, "bucket")
	if err != nil {
		return nil, err
	}
	o := backend.NewOptions(u)
	endpoint := o.Endpoint("endpoint")
	region := o.String("region", "")
	pathStyle := o.Bool("path_style", endpoint != "")
	profile := o.String("profile", "")
	caPEM := o.File("ca_file")
	s := &Store{
		bucket:      bucket,
		prefix:      prefix,
		name:        name,
		partSize:    o.Size("part_size", backend.DefaultPartSize, 5<<20, 5<<30),
		concurrency: o.Int("upload_concurrency", backend.DefaultConcurrency, 1, 64),
		pageSize:    int32(o.Int("list_page_size", backend.DefaultPageSize, 1, 1000)),
		sse:         types.ServerSideEncryption(o.String("sse", "")),
		class:       types.StorageClass(o.String("storage_class", "")),
	}
	s.bufs.New = func() any { b := make([]byte, s.partSize); return &b }
	if k := o.String("kms_key_id", ""); k != "" {
		s.kmsKeyID = aws.String(k)
	}
	attempts := o.Int("max_attempts", 10, 1, 100)
	if err := o.Err(); err != nil {
		return nil, err
	}
	fail := func(err error) error { return &store.Error{Op: "open", Store: name, Err: err} }
	switch {
	case s.sse != "" && !slices.Contains(s.sse.Values(), s.sse):
		return nil, fail(fmt.Errorf("option sse: want one of %v", s.sse.Values()))
	case s.kmsKeyID != nil && !strings.HasPrefix(string(s.sse), "aws:kms"):
		return nil, fail(errors.New("option kms_key_id needs sse=aws:kms"))
	}

	opts := []func(*config.LoadOptions) error{
		// Checksums only where an operation requires them: S3-compatible
		// servers differ in which trailing checksums they accept, and the
		// SigV4 payload hash already protects each request.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = 20 * time.Second
				// A daemon must not run out of client-side retry tokens
				// during a long outage and then fail every call.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if caPEM != nil {
		opts = append(opts, config.WithCustomCABundle(bytes.NewReader(caPEM)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, append(opts, optFns...)...)
	if err != nil {
		return nil, fail(fmt.Errorf("loading AWS configuration: %w", err))
	}
	if cfg.Region == "" {
		if endpoint == "" {
			return nil, fail(errors.New("no region: add ?region=... to the store URL or set AWS_REGION"))
		}
		cfg.Region = "us-east-1" // S3-compatible servers mostly ignore it
	}
	s.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
	})
	s.objects = &s3proto.Bucket{Store: name, Name: bucket, Prefix: prefix, Creds: creds, Client: (*objectClient)(s)}
	if err := s.probe(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// probe lists one key (see s3proto.Bucket.Probe). A GET is used rather
// than HeadBucket because a HEAD error has no body to tell the causes apart.
func (s *Store) probe(ctx context.Context) error {
	_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(string(s.prefix)), MaxKeys: aws.Int32(1)})
	return s.objects.Probe(shorten(err))
}

func (s *Store) String() string { return s.name }

func (s *Store) Close() error { return nil }

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	// Part buffers are recycled between Puts: most objects are small, and
	// a fresh partSize buffer for each would be garbage for the GC to chase.
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp) // idle again: putMultipart waits for its uploads
	first := *bp
	n, err := io.ReadFull(r, first)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		_, err = s.client.PutObject(ctx, s.putInput(key, first[:n]))
	case err == nil:
		err = s.putMultipart(ctx, key, first, r)
	}
	if err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

func (s *Store) putInput(key string, data []byte) *s3.PutObjectInput {
	return &s3.PutObjectInput{
		Bucket: &s.bucket, Key: aws.String(s.prefix.Key(key)), Body: bytes.NewReader(data),
		ServerSideEncryption: s.sse, SSEKMSKeyId: s.kmsKeyID, StorageClass: s.class,
	}
}

// putMultipart uploads first and the rest of r as a multipart upload with at
// most s.concurrency parts in flight, so memory stays at (concurrency+1)
// part buffers. The part size grows by partSize every 1000 parts so that
// the 10000-part limit allows 55000 × partSize (440 GiB at the default 8 MiB). The
// upload is aborted on any failure: no partial object ever becomes visible.
func (s *Store) putMultipart(ctx context.Context, key string, first []byte, r io.Reader) (err error) {
	name := aws.String(s.prefix.Key(key))
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: name,
		ServerSideEncryption: s.sse, SSEKMSKeyId: s.kmsKeyID, StorageClass: s.class,
	})
	if err != nil {
		return err
	}
	id := created.UploadId
	defer func() {
		if err != nil {
			// The caller's context may be what failed: abort regardless,
			// once and briefly (backend.CleanupTimeout).
			actx, cancel := backend.CleanupContext(ctx)
			defer cancel()
			s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: name, UploadId: id},
				func(o *s3.Options) { o.RetryMaxAttempts = 1 })
		}
	}()

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.concurrency)
	free := make(chan []byte, s.concurrency+1) // recycled part buffers
	var mu sync.Mutex
	var parts []types.CompletedPart
	buf, last := first, false
	for num := int32(1); ; num++ {
		if num > maxParts {
			g.Wait()
			return fmt.Errorf("object larger than %d parts: raise part_size", maxParts)
		}
		part := buf
		g.Go(func() error {
			defer func() { free <- part[:cap(part)] }()
			out, err := s.client.UploadPart(gctx, &s3.UploadPartInput{
				Bucket: &s.bucket, Key: name, UploadId: id, PartNumber: aws.Int32(num), Body: bytes.NewReader(part),
			})
			if err != nil {
				return err
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
			mu.Unlock()
			return nil
		})
		if last || gctx.Err() != nil {
			break
		}
		size := s.partSize * int64(1+int(num)/1000)
		select {
		case buf = <-free:
		default:
			buf = nil
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		n, err := io.ReadFull(r, buf[:size])
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			last = true
		default:
			g.Wait()
			return err
		}
		if buf = buf[:n]; n == 0 {
			break // the previous part was the last
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: name, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if code(err) == "NoSuchUpload" && s.completed(ctx, name, parts) {
		// A retried Complete whose first attempt succeeded finds no
		// upload any more; the object carries our parts' ETag.
		return nil
	}
	return err
}

// completed reports whether object name is the one S3 assembles from
// parts, by the multipart ETag: the MD5 of the parts' binary MD5s, a dash
// and the part count. (Not computable under SSE-KMS, where ETags are not
// MD5s: then it reports false.)
func (s *Store) completed(ctx context.Context, name *string, parts []types.CompletedPart) bool {
	h := md5.New()
	for _, p := range parts {
		b, err := hex.DecodeString(strings.Trim(aws.ToString(p.ETag), `"`))
		if err != nil || len(b) != md5.Size {
			return false
		}
		h.Write(b)
	}
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: name})
	return err == nil && strings.Trim(aws.ToString(head.ETag), `"`) == fmt.Sprintf("%x-%d", h.Sum(nil), len(parts))
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.objects.Get(ctx, key, offset, length)
}

func (s *Store) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	return s.objects.Load(ctx, key)
}

// objectClient is the Store as s3proto reads objects through it.
type objectClient Store

func (c *objectClient) Code(err error) string { return code(err) }

func (c *objectClient) GetObject(ctx context.Context, name string, offset, length int64, etag string) (io.ReadCloser, string, error) {
	in := &s3.GetObjectInput{Bucket: &c.bucket, Key: &name}
	if etag != "" {
		in.IfMatch = &etag
	}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := c.client.GetObject(ctx, in)
	if err != nil {
		return nil, "", shorten(err)
	}
	return out.Body, aws.ToString(out.ETag), nil
}

func (c *objectClient) HeadObject(ctx context.Context, name, etag string) (string, error) {
	in := &s3.HeadObjectInput{Bucket: &c.bucket, Key: &name}
	if etag != "" {
		in.IfMatch = &etag
	}
	out, err := c.client.HeadObject(ctx, in)
	if err != nil {
		return "", shorten(err)
	}
	return aws.ToString(out.ETag), nil
}

func (s *Store) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: &s.bucket, Prefix: aws.String(s.prefix.Key(prefix)), MaxKeys: aws.Int32(s.pageSize),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.fail("list", prefix, err)
		}
		for _, o := range page.Contents {
			obj := store.Object{Key: s.prefix.Trim(aws.ToString(o.Key)), Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)}
			if err := fn(obj); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for batch := range slices.Chunk(keys, deleteBatch) {
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, key := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(s.prefix.Key(key))}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &s.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return s.fail("delete", batch[0], err)
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) != "NoSuchKey" {
				return s.fail("delete", s.prefix.Trim(aws.ToString(e.Key)), fmt.Errorf("%s: %s", aws.ToString(e.Code), aws.ToString(e.Message)))
			}
		}
	}
	return nil
}

func (s *Store) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	in := s.putInput(key, data)
	if old == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(string(old))
	}
	out, err := s.client.PutObject(ctx, in)
	if err != nil {
		return "", s.objects.SwapFail(key, old, shorten(err))
	}
	return store.Version(aws.ToString(out.ETag)), nil
}
