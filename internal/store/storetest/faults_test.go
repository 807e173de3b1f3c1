package storetest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"google.golang.org/api/option"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/azure"
	"github.com/homesnap/homesnap/internal/store/gcs"
	"github.com/homesnap/homesnap/internal/store/minio"
	"github.com/homesnap/homesnap/internal/store/s3"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

// creds are a backend's credentials; an empty field is the test server's.
type creds struct{ access, secret string }

func (c creds) or(access, secret string) creds {
	if c.access == "" {
		c.access = access
	}
	if c.secret == "" {
		c.secret = secret
	}
	return c
}

// refusal is credentials the server refuses, and what the error must say
// besides the store's name.
type refusal struct {
	name string
	creds
	want []string
}

// backend is one backend on its real test server.
type backend struct {
	name string
	// server checks that the server answers and returns its host:port.
	server func(t *testing.T) string
	// open opens bucket/prefix through addr (the server's host:port, or a
	// proxy's in front of it), as store.Open would.
	open func(ctx context.Context, t *testing.T, addr, bucket, prefix string, c creds) (store.Store, error)
	// noProxy, when set, says why the faults a proxy injects are not run.
	noProxy string
	refused []refusal // none: the server checks no credentials
	bucket  string    // what the backend calls a bucket in messages
}

var bucket, access, secret = storetest.Bucket, storetest.AccessKey, storetest.SecretKey

const wrongSecret = "wrong-secret"

// A new connection per request, so that a proxy may cut each one.
var noKeepAlive = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.DisableKeepAlives = true })

func hostOf(t *testing.T, endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("endpoint %q names no host:port", endpoint)
	}
	return u.Host
}

// azurite returns the parts of the Azurite connection string.
func azurite(t *testing.T) (account, key, endpoint string) {
	cs := storetest.Server(t, "Azurite", "HOMESNAP_TEST_AZURE_CONNECTION_STRING")
	for _, kv := range strings.Split(cs, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "AccountName":
			account = v
		case "AccountKey":
			key = v
		case "BlobEndpoint":
			endpoint = v
		}
	}
	return account, key, endpoint
}

// openS3 opens an s3:// store on the S3 server at addr.
func openS3(ctx context.Context, t *testing.T, addr, bucket, prefix string, c creds) (store.Store, error) {
	c = c.or(access, secret)
	u := &url.URL{Scheme: "s3", Host: bucket, Path: "/" + prefix, RawQuery: "part_size=5MiB&endpoint=" + url.QueryEscape("http://"+addr)}
	s, err := s3.Open(ctx, u,
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(c.access, c.secret, "")),
		config.WithHTTPClient(noKeepAlive))
	if err != nil {
		return nil, err
	}
	return store.Checked(s), nil
}

var backends = []backend{
	{
		name: "s3",
		server: func(t *testing.T) string {
			return hostOf(t, storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT"))
		},
		open: openS3,
		refused: []refusal{
			{"UnknownKey", creds{access: "nosuchkey"}, []string{"access key is not known", "AWS_ACCESS_KEY_ID"}},
			{"WrongSecret", creds{secret: wrongSecret}, []string{"secret key does not match", "AWS_SECRET_ACCESS_KEY"}},
		},
		bucket: "bucket",
	},
	{
		name: "s3-seaweedfs",
		server: func(t *testing.T) string {
			return hostOf(t, storetest.Server(t, "SeaweedFS", "HOMESNAP_TEST_SEAWEED_ENDPOINT"))
		},
		open: openS3,
		refused: []refusal{
			{"UnknownKey", creds{access: "nosuchkey"}, []string{"access key is not known", "AWS_ACCESS_KEY_ID"}},
			{"WrongSecret", creds{secret: wrongSecret}, []string{"secret key does not match", "AWS_SECRET_ACCESS_KEY"}},
		},
		bucket: "bucket",
	},
	{
		name: "minio",
		server: func(t *testing.T) string {
			return hostOf(t, storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT"))
		},
		open: func(ctx context.Context, t *testing.T, addr, bucket, prefix string, c creds) (store.Store, error) {
			c = c.or(access, secret)
			u := &url.URL{Scheme: "minio", User: url.UserPassword(c.access, c.secret), Host: addr, Path: "/" + bucket + "/" + prefix, RawQuery: "secure=false&part_size=5MiB"}
			s, err := minio.Open(ctx, u)
			if err != nil {
				return nil, err
			}
			return store.Checked(s), nil
		},
		refused: []refusal{
			{"WrongSecret", creds{secret: wrongSecret}, []string{"secret key does not match", "MINIO_SECRET_KEY"}},
		},
		bucket: "bucket",
	},
	{
		name:   "gcs",
		server: func(t *testing.T) string { return storetest.Server(t, "fake-gcs-server", "STORAGE_EMULATOR_HOST") },
		open: func(ctx context.Context, t *testing.T, addr, bucket, prefix string, _ creds) (store.Store, error) {
			u := &url.URL{Scheme: "gs", Host: bucket, Path: "/" + prefix, RawQuery: "part_size=1MiB"}
			s, err := gcs.Open(ctx, u, option.WithEndpoint("http://"+addr+"/storage/v1/"))
			if err != nil {
				return nil, err
			}
			return store.Checked(s), nil
		},
		// fake-gcs-server checks no credentials.
		refused: nil,
		// Through toxiproxy, fake-gcs-server answers no read (it serves
		// objects only at its public host), and it stores a resumable
		// upload's chunk twice when the client sends it again after a lost
		// answer. Seen on the way: the GCS client does not retry an answer
		// cut off in its headers ("transport connection broken"); whether
		// to make it retry needs real GCS to settle.
		noProxy: "fake-gcs-server is not faithful behind a proxy",
		bucket:  "bucket",
	},
	{
		name: "azure",
		server: func(t *testing.T) string {
			_, _, endpoint := azurite(t)
			return hostOf(t, endpoint)
		},
		// The account-key path; the conformance run takes the connection
		// string's.
		open: func(ctx context.Context, t *testing.T, addr, container, prefix string, c creds) (store.Store, error) {
			account, key, endpoint := azurite(t)
			c = c.or(account, key)
			endpoint = strings.Replace(endpoint, hostOf(t, endpoint), addr, 1)
			u := &url.URL{Scheme: "az", Host: container, Path: "/" + prefix, RawQuery: "part_size=4MiB&endpoint=" + url.QueryEscape(endpoint)}
			env := map[string]string{"AZURE_STORAGE_ACCOUNT": c.access, "AZURE_STORAGE_KEY": c.secret}
			s, err := azure.Open(ctx, u, func(name string) string { return env[name] })
			if err != nil {
				return nil, err
			}
			return store.Checked(s), nil
		},
		refused: []refusal{
			{"WrongKey", creds{secret: "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25nIGtleQ=="}, []string{"credentials were rejected", "AZURE_STORAGE_KEY"}},
		},
		bucket: "container",
	},
}

// faults is what every backend must survive or report well, on its real
// server: answers lost after the request was applied, connections cut
// mid-read, refused credentials, a missing bucket.
var faults = []struct {
	name    string
	applies func(b backend) bool
	run     func(t *testing.T, b backend, addr string)
}{
	{"LostAnswers", proxied, func(t *testing.T, b backend, addr string) {
		prefix := storetest.Prefix(t)
		flaky := open(t, b, storetest.Proxy(t, addr, storetest.CutAnswers), prefix)
		storetest.LostAnswers(t, flaky, open(t, b, addr, prefix))
	}},
	{"ResumedReads", proxied, func(t *testing.T, b backend, addr string) {
		prefix := storetest.Prefix(t)
		flaky := open(t, b, storetest.Proxy(t, addr, storetest.CutEvery(3<<20)), prefix)
		storetest.ResumedReads(t, flaky, open(t, b, addr, prefix))
	}},
	{"RefusedCredentials", func(b backend) bool { return b.refused != nil }, func(t *testing.T, b backend, addr string) {
		name := open(t, b, addr, "p").String()
		for _, r := range b.refused {
			t.Run(r.name, func(t *testing.T) {
				storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (store.Store, error) {
					return b.open(ctx, t, addr, bucket, "p", r.creds)
				}, append([]string{"open " + name + ":"}, r.want...)...)
			})
		}
	}},
	{"MissingBucket", func(backend) bool { return true }, func(t *testing.T, b backend, addr string) {
		const missing = "homesnap-no-such-bucket"
		var err error
		storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (s store.Store, _ error) {
			s, err = b.open(ctx, t, addr, missing, "p", creds{})
			return s, err
		}, b.bucket+` "`+missing+`" does not exist: create it`)
		var se *store.Error
		if !errors.Is(err, store.ErrNotExist) || !errors.As(err, &se) || se.Op != "open" || !strings.Contains(se.Store, missing) {
			t.Errorf("error %v: want a *store.Error of op open naming the %s, wrapping ErrNotExist", err, b.bucket)
		}
	}},
}

func proxied(b backend) bool { return b.noProxy == "" }

func open(t *testing.T, b backend, addr, prefix string) store.Store {
	t.Helper()
	s, err := b.open(t.Context(), t, addr, bucket, prefix, creds{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestFaults runs the fault table against every backend.
func TestFaults(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			addr := b.server(t)
			for _, f := range faults {
				if !f.applies(b) {
					t.Logf("%s: not run (see the backend's entry)", f.name)
					continue
				}
				t.Run(f.name, func(t *testing.T) { f.run(t, b, addr) })
			}
		})
	}
}
