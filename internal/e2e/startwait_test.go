package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
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
	addr := freeAddr(t)
	s := startSidecar(t, home, storeDir, "--start-wait-url", "http://"+addr+"/login")
	s.waitLog(t, waitingForJenkins, 1)
	time.Sleep(1500 * time.Millisecond) // a few polls
	if code, _ := s.get(t, "GET", "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answers %d while waiting for Jenkins; the liveness probe would kill the sidecar", code)
	}
	if committed.MatchString(s.stderr.String()) {
		t.Fatal("a snapshot was committed before Jenkins answered")
	}
	jenkins := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Jenkins is getting ready to work", http.StatusServiceUnavailable)
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("%s was taken meanwhile: %v", addr, err)
	}
	jenkins.Listener = ln
	jenkins.Start()
	defer jenkins.Close()
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
