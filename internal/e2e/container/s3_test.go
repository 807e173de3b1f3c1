package container

import (
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testenv"
)

// TestS3OverTLSWithTheImagesCertificates: the image talks to a real S3
// server (versitygw) over TLS, trusting what its CA bundle at
// /etc/ssl/certs/ca-certificates.crt trusts. The TLS front is a reverse
// proxy in this test (the test servers speak plain HTTP); it keeps the
// client's Host so SigV4 signatures still verify at the server. With the
// image's own bundle the front's self-signed certificate is refused; with
// a bundle naming it, a snapshot and a restore go through.
func TestS3OverTLSWithTheImagesCertificates(t *testing.T) {
	testenv.Needs(t, "a container runtime and the S3 test server")
	endpoint, bucket := os.Getenv("HOMESNAP_TEST_S3_ENDPOINT"), os.Getenv("HOMESNAP_TEST_BUCKET")
	if endpoint == "" || bucket == "" {
		testenv.Missing(t, "no S3 server: HOMESNAP_TEST_S3_ENDPOINT or HOMESNAP_TEST_BUCKET is unset; run scripts/start-servers.sh and export what it prints")
	}
	needImage(t)
	backend, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewUnstartedServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(backend)
		r.Out.Host = r.In.Host // what the client signed
	}})
	front.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	front.StartTLS()
	defer front.Close()
	ca := filepath.Join(t.TempDir(), "ca-certificates.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}

	home, prefix := jenkinsHome(t), fmt.Sprintf("container-test/%d", time.Now().UnixNano())
	storeURL := fmt.Sprintf("s3://%s/%s?region=us-east-1&endpoint=%s", bucket, prefix, url.QueryEscape(front.URL))
	with := func(dir string, trustFront bool, query string) container {
		c := container{network: "host", // the servers listen on the host's 127.0.0.1
			volumes: map[string]string{dir: "/var/jenkins_home"},
			env: []string{"HOMESNAP_STORE=" + storeURL + query,
				"AWS_ACCESS_KEY_ID=" + os.Getenv("HOMESNAP_TEST_S3_ACCESS_KEY"),
				"AWS_SECRET_ACCESS_KEY=" + os.Getenv("HOMESNAP_TEST_S3_SECRET_KEY")}}
		if trustFront {
			c.volumes[ca] = "/etc/ssl/certs/ca-certificates.crt:ro"
		}
		return c
	}

	r := with(home, false, "&max_attempts=1").run(t, "snapshot", "--once", "--timeout", "60s")
	if r.code == 0 || !strings.Contains(r.stderr, "certificate signed by unknown authority") {
		t.Fatalf("with the image's own CA bundle, a self-signed server was accepted or refused for another reason: exit %d\n%s", r.code, tail(r.stderr))
	}

	id := ok(t, "snapshot --once over TLS", with(home, true, "").run(t, "snapshot", "--once", "--timeout", "60s"))
	fresh := volume(t)
	r = with(fresh, true, "").run(t, "restore", "--timeout", "60s")
	if action, got := decision(r); r.code != 0 || action != "restore" || got != id {
		t.Fatalf("restore over TLS: exit %d, %q %q; want restore of %s\n%s", r.code, action, got, id, tail(r.stderr))
	}
	same(t, "the home restored over TLS", selected(t, home), restored(t, fresh))
}
