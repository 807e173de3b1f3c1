package storetest

import (
	"cmp"
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/testenv"
)

// The test servers' bucket (or container) and S3 keys, as
// scripts/start-servers.sh sets them up.
var (
	Bucket    = cmp.Or(os.Getenv("HOMESNAP_TEST_BUCKET"), "homesnap-test")
	AccessKey = cmp.Or(os.Getenv("HOMESNAP_TEST_S3_ACCESS_KEY"), "test")
	SecretKey = cmp.Or(os.Getenv("HOMESNAP_TEST_S3_SECRET_KEY"), "testtest")
)

const howToStart = `start the test servers with: eval "$(scripts/start-servers.sh)" (stop them with scripts/stop-servers.sh)`

// Server returns the value of the environment variable env, which says where
// the test server name listens (a URL, host:port or a connection string
// holding one), after checking that something answers there. It follows
// testenv's rule: skipped under -short; without a server, skipped, or
// failed when HOMESNAP_TEST_SERVERS=1 says the servers should be running.
func Server(t testing.TB, name, env string) string {
	t.Helper()
	testenv.Needs(t, "the "+name+" test server ("+env+")")
	v := os.Getenv(env)
	if v == "" {
		testenv.Missing(t, "%s: %s is not set; %s", name, env, howToStart)
	}
	addr := hostPort.FindStringSubmatch(v)
	if addr == nil {
		t.Fatalf("%s: %s=%q names no host:port", name, env, v)
	}
	c, err := net.DialTimeout("tcp", addr[1], 3*time.Second)
	if err != nil {
		testenv.Missing(t, "%s is not reachable at %s (%s=%q): %v; %s", name, addr[1], env, v, err, howToStart)
	}
	c.Close()
	return v
}

var hostPort = regexp.MustCompile(`(?:^|://|=)([A-Za-z0-9.\-]+:\d+)`)

// Prefix returns a key prefix unique to this test run, so that runs sharing
// a bucket do not collide.
func Prefix(t testing.TB) string {
	return "homesnap-test/" + time.Now().UTC().Format("20060102-150405") + "-" + randomHex(4)
}

// FailsFast checks that open fails within limit (no minutes of retries) with
// an error whose message contains every string in want.
func FailsFast(t *testing.T, limit time.Duration, open func(ctx context.Context) (store.Store, error), want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*limit)
	defer cancel()
	start := time.Now()
	s, err := open(ctx)
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatalf("open succeeded, want an error mentioning %q", want)
	}
	t.Logf("error after %v: %v", took.Round(time.Millisecond), err)
	if took > limit || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("open failed after %v, want under %v", took, limit)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not mention %q", err, w)
		}
	}
}
