package minio_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/minio"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

var bucket, access, secret = storetest.Bucket, storetest.AccessKey, storetest.SecretKey

// open opens bucket/prefix on the server at endpoint (http://host:port).
func open(ctx context.Context, endpoint, bucket, prefix, query, key, secret string) (*minio.Store, error) {
	ep, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	u := &url.URL{Scheme: "minio", User: url.UserPassword(key, secret), Host: ep.Host, Path: "/" + bucket + "/" + prefix, RawQuery: "secure=false" + query}
	return minio.Open(ctx, u)
}

func TestVersityGW(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	prefix := storetest.Prefix(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := open(t.Context(), endpoint, bucket, prefix, "&part_size=5MiB&list_page_size=250", access, secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestBadURL(t *testing.T) {
	for raw, want := range map[string]string{
		"minio://host:9000":                      "want minio://HOST:PORT/BUCKET",
		"minio://k:s@host:9000/b?secure=perhaps": "option secure",
		"minio://k:s@host:9000/b?part_size=1":    "option part_size",
	} {
		_, err := store.Open(t.Context(), raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one mentioning %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "k:s@") {
			t.Errorf("%s: error %v shows the credentials", raw, err)
		}
	}
}
