package minio_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

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

func TestWrongCredentials(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (store.Store, error) {
		return open(ctx, endpoint, bucket, "p", "", access, "wrong-secret")
	}, "open minio://", bucket, "secret key does not match", "MINIO_SECRET_KEY")
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

func TestLostAnswers(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	u, _ := url.Parse(endpoint)
	addr := storetest.Proxy(t, u.Host, storetest.CutAnswers)
	prefix := storetest.Prefix(t)
	flaky, err := open(t.Context(), "http://"+addr, bucket, prefix, "&part_size=5MiB", access, secret)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := open(t.Context(), endpoint, bucket, prefix, "", access, secret)
	if err != nil {
		t.Fatal(err)
	}
	storetest.LostAnswers(t, flaky, direct)
}

func TestResumedReads(t *testing.T) {
	endpoint := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	u, _ := url.Parse(endpoint)
	addr := storetest.Proxy(t, u.Host, storetest.CutEvery(3<<20))
	prefix := storetest.Prefix(t)
	flaky, err := open(t.Context(), "http://"+addr, bucket, prefix, "", access, secret)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := open(t.Context(), endpoint, bucket, prefix, "", access, secret)
	if err != nil {
		t.Fatal(err)
	}
	storetest.ResumedReads(t, flaky, direct)
}
