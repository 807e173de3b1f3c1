package s3_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/s3"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

// zeros cancels its context after `after` bytes.
type zeros struct {
	n, after int
	cancel   context.CancelFunc
}

func (z *zeros) Read(p []byte) (int, error) {
	if z.n >= z.after {
		z.cancel()
	}
	clear(p)
	z.n += len(p)
	return len(p), nil
}

// A cancelled Put must abort its multipart upload, not leave parts behind
// that the bucket bills for until a lifecycle rule removes them.
func TestCancelledPutAbortsUpload(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	prefix := storetest.Prefix(t)
	s, err := open(t.Context(), endpoint, bucket, prefix, "&part_size=5MiB", access, secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := store.Checked(s).Put(ctx, "big", &zeros{after: 12 << 20, cancel: cancel}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Put = %v, want context.Canceled", err)
	}
	out, err := s.Client().ListMultipartUploads(t.Context(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket()), Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left after a cancelled Put", len(out.Uploads))
	}
}

// The recovery of a retried CompleteMultipartUpload that answers
// NoSuchUpload rests on computing the multipart ETag; check it against the
// server's.
func TestMultipartETag(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	s, err := open(t.Context(), endpoint, bucket, "", "", access, secret)
	if err != nil {
		t.Fatal(err)
	}
	c, ctx := s.Client(), t.Context()
	key := aws.String(storetest.Prefix(t) + "/mp")
	cr, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &bucket, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for i, body := range [][]byte{bytes.Repeat([]byte("a"), 5<<20), []byte("tail")} {
		n := aws.Int32(int32(i + 1))
		up, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &bucket, Key: key, UploadId: cr.UploadId, PartNumber: n, Body: bytes.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: up.ETag, PartNumber: n})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &bucket, Key: key, UploadId: cr.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &bucket, Key: key})
	if !s3.Completed(s, ctx, key, parts) {
		t.Errorf("completed object not recognised by its parts")
	}
	if s3.Completed(s, ctx, key, parts[:1]) {
		t.Errorf("object recognised by the wrong parts")
	}
}
