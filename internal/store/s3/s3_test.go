package s3_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

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
