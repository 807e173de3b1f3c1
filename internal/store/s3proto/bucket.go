// Package s3proto is what the two S3 backends share, whichever client
// library speaks the protocol for them (store/s3: aws-sdk-go-v2; store/minio:
// minio-go): what S3 error codes mean to a user, and how an object is read
// (ranged, pinned to one version, resumed where a connection broke).
package s3proto

import (
	"context"
	"io"
	"strings"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
)

// Client is the little a backend's S3 client must do for Bucket.
type Client interface {
	// Code is the S3 error code of err ("NoSuchKey"), "" when err is not
	// an S3 error.
	Code(err error) string
	// GetObject returns length bytes of object name from offset (length
	// < 0: to the end; never 0) and the object's ETag. A non-empty etag
	// pins the version (If-Match).
	GetObject(ctx context.Context, name string, offset, length int64, etag string) (io.ReadCloser, string, error)
	// HeadObject returns the ETag of object name, pinned like GetObject's.
	HeadObject(ctx context.Context, name, etag string) (string, error)
}

// Bucket is a store's bucket, or prefix inside one, on an S3 server.
type Bucket struct {
	Store  string // the store's name in messages
	Name   string // the bucket's
	Prefix backend.Prefix
	Creds  string // where the backend takes its credentials from, for hints
	Client Client
}

// Fail builds the *store.Error for op on key: the sentinel and the hint
// its S3 error code means.
func (b *Bucket) Fail(op, key string, err error) error {
	hint, kind := Cause(b.Client.Code(err), b.Name, b.Creds)
	return backend.Fail(op, b.Store, key, kind, hint, err)
}

// Probe judges the error of the one-key listing a backend makes at open, so
// that a missing bucket or bad credentials fail there with a clear message.
// An identity that may not list passes: restore needs no listing.
func (b *Bucket) Probe(err error) error {
	if err == nil || b.Client.Code(err) == "AccessDenied" {
		return nil
	}
	return b.Fail("open", "", err)
}

// SwapFail is Fail for a conditional write. One with If-Match on an object
// deleted meanwhile answers NoSuchKey: the swap lost its race.
func (b *Bucket) SwapFail(key string, old store.Version, err error) error {
	if old != "" && b.Client.Code(err) == "NoSuchKey" {
		return backend.Fail("swap", b.Store, key, store.ErrPrecondition, "", err)
	}
	return b.Fail("swap", key, err)
}

// Get is store.Store's Get: a read that fails mid-body is resumed where it
// broke, from the version the first answer came from.
func (b *Bucket) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	name := b.Prefix.Key(key)
	fail := func(err error) error { return b.Fail("get", key, err) }
	body, etag, err := b.open(ctx, name, offset, length, "")
	if err != nil {
		return nil, fail(err)
	}
	return backend.Resume(ctx, body, offset, length, func(ctx context.Context, offset, length int64) (io.ReadCloser, error) {
		body, _, err := b.open(ctx, name, offset, length, etag)
		if err != nil {
			return nil, fail(err)
		}
		return body, nil
	}, fail), nil
}

// open is GetObject that also answers a read of nothing (length 0, or
// offset at or past the end): an empty body, if the object exists.
func (b *Bucket) open(ctx context.Context, name string, offset, length int64, etag string) (io.ReadCloser, string, error) {
	if length != 0 {
		body, tag, err := b.Client.GetObject(ctx, name, offset, length, etag)
		if err == nil || b.Client.Code(err) != "InvalidRange" {
			return body, tag, err
		}
	}
	tag, err := b.Client.HeadObject(ctx, name, etag)
	if err != nil {
		return nil, "", err
	}
	return io.NopCloser(strings.NewReader("")), tag, nil
}

// Load is store.Store's Load; the version is the object's ETag.
func (b *Bucket) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	body, etag, err := b.Client.GetObject(ctx, b.Prefix.Key(key), 0, -1, "")
	if err != nil {
		return nil, "", b.Fail("load", key, err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, "", b.Fail("load", key, err)
	}
	return data, store.Version(etag), nil
}
