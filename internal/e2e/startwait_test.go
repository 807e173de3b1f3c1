package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testhome"
)

// freeAddr returns a local address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var waitingForJenkins = regexp.MustCompile(`waiting for Jenkins to answer`)

// TestSidecarWaitsForJenkinsBeforeItsFirstSnapshot plays the Jenkins
// operator's pod, where the restore runs in Jenkins' container: Jenkins
// answers only once the restore is over. Until then the sidecar is alive
// but takes nothing; its first snapshot follows Jenkins' first answer.
func TestSidecarWaitsForJenkinsBeforeItsFirstSnapshot(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	// Until up, Jenkins takes each poll's connection and drops it without
	// an answer, as a port whose JVM is not yet serving does; polls counts
	// them, so the test knows the sidecar has asked (and had no answer).
	var up atomic.Bool
	polls := make(chan struct{}, 100)
	jenkins := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if up.Load() {
			http.Error(w, "Jenkins is getting ready to work", http.StatusServiceUnavailable)
			return
		}
		polls <- struct{}{}
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}))
	defer jenkins.Close()
	s := startSidecar(t, home, storeDir, "--start-wait-url", jenkins.URL+"/login")
	s.waitLog(t, waitingForJenkins, 1)
	for range 3 {
		select {
		case <-polls:
		case <-time.After(time.Minute):
			t.Fatalf("the sidecar stopped polling Jenkins:\n%s", s.stderr.String())
		}
	}
	if code, _ := s.get(t, "GET", "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answers %d while waiting for Jenkins; the liveness probe would kill the sidecar", code)
	}
	if committed.MatchString(s.stderr.String()) {
		t.Fatal("a snapshot was committed before Jenkins answered")
	}
	up.Store(true)
	s.waitLog(t, committed, 1)
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v\n%s", err, s.stderr.String())
	}
}

// TestSidecarStoppedBeforeJenkinsTakesNoSnapshot: when the pod stops before
// Jenkins ever answered (its restore failed), the home may not hold the
// restored state, so the sidecar exits 0 without writing to the store.
func TestSidecarStoppedBeforeJenkinsTakesNoSnapshot(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	s := startSidecar(t, home, storeDir, "--start-wait-url", "http://"+freeAddr(t)+"/login")
	s.waitLog(t, waitingForJenkins, 1)
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v, want 0\n%s", err, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "no snapshot taken") {
		t.Errorf("the sidecar does not say it took no snapshot:\n%s", s.stderr.String())
	}
	if des, _ := os.ReadDir(storeDir); len(des) > 0 {
		t.Errorf("the sidecar wrote %d objects into the store although Jenkins never started", len(des))
	}
}
