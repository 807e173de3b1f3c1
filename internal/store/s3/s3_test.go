package s3_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/s3"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

var bucket, access, secret = storetest.Bucket, storetest.AccessKey, storetest.SecretKey

func open(ctx context.Context, endpoint, bucket, prefix, query, key, secret string) (*s3.Store, error) {
	u := &url.URL{Scheme: "s3", Host: bucket, Path: "/" + prefix, RawQuery: "endpoint=" + url.QueryEscape(endpoint) + query}
	return s3.Open(ctx, u, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(key, secret, "")))
}

func conformance(t *testing.T, name, envVar, query string) {
	t.Parallel()
	endpoint := storetest.Server(t, name, envVar)
	prefix := storetest.Prefix(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := open(t.Context(), endpoint, bucket, prefix, query, access, secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Small parts so that the 20 MiB test object takes several, uploaded
// concurrently.
func TestVersityGW(t *testing.T) {
	conformance(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT", "&part_size=5MiB")
}

func TestSeaweedFS(t *testing.T) {
	conformance(t, "SeaweedFS", "HOMESNAP_TEST_SEAWEED_ENDPOINT", "&part_size=5MiB&list_page_size=100")
}

func TestWrongCredentials(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	t.Run("UnknownKey", func(t *testing.T) {
		storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (store.Store, error) {
			return open(ctx, endpoint, bucket, "p", "", "nosuchkey", secret)
		}, "open s3://"+bucket+"/p", "access key is not known", "AWS_ACCESS_KEY_ID")
	})
	t.Run("WrongSecret", func(t *testing.T) {
		storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (store.Store, error) {
			return open(ctx, endpoint, bucket, "p", "", access, "wrong-secret")
		}, "open s3://"+bucket+"/p", "secret key does not match", "AWS_SECRET_ACCESS_KEY")
	})
}

func TestMissingBucket(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	var err error
	storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (s store.Store, _ error) {
		s, err = open(ctx, endpoint, "homesnap-no-such-bucket", "p", "", access, secret)
		return s, err
	}, `bucket "homesnap-no-such-bucket" does not exist: create it or fix --store`)
	if !errors.Is(err, store.ErrNotExist) {
		t.Errorf("error does not wrap ErrNotExist")
	}
}

// Bad options fail before any request, so this needs no server.
func TestBadOptions(t *testing.T) {
	for query, want := range map[string]string{
		"?part_sise=8MiB":            "unknown option part_sise",
		"?part_size=1MiB":            "option part_size",
		"?sse=AES":                   "option sse: want one of",
		"?kms_key_id=k":              "kms_key_id needs sse=aws:kms",
		"?list_page_size=5000":       "option list_page_size",
		"?path_style=maybe&region=x": "option path_style",
		"?endpoint=127.0.0.1:7070":   "option endpoint: want http(s)://HOST",
		"?region=a&region=b":         "option region given more than once",
		"?ca_file=/nonexistent":      "option ca_file: cannot read the file: no such file",
	} {
		_, err := store.Open(t.Context(), "s3://bucket/prefix"+query)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one mentioning %q", query, err, want)
		}
	}
}
