package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// The sidecar's port as a network peer sees it (issue 21, finding 8).

const triggerToken = "3f9c1e77a0b24d5e8f61c2d4a9b0e7f1"

func tokenFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(triggerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// post sends POST /snapshot with the given Authorization header ("" for
// none) and returns the status and Retry-After.
func (s *sidecar) post(t *testing.T, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.addr+"/snapshot", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// snapshots lists the store's snapshots (oldest first) with what took them.
func snapshots(t *testing.T, storeDir string) (ids []string, trigger map[string]string) {
	t.Helper()
	var recs []struct {
		ID      string `json:"id"`
		Trigger string `json:"trigger"`
	}
	out := ok(t, run(t, "homesnap", nil, "list", "--store", storeDir, "--output", "json"))
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("--list: %v\n%s", err, out)
	}
	trigger = map[string]string{}
	for _, r := range recs {
		ids = append(ids, r.ID)
		trigger[r.ID] = r.Trigger
	}
	return ids, trigger
}

// Without the token POST /snapshot takes nothing; with it, one snapshot,
// and a second request right after is told to come back later. A sidecar
// with no token has the endpoint off. The token never reaches the log.
func TestListenerTriggerNeedsTheToken(t *testing.T) {
	testenv.Long(t, "runs two sidecars")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, home, storeDir, "--trigger-token-file", tokenFile(t))
	s.waitLog(t, committed, 1)
	testhome.Change(t, home)
	for _, auth := range []string{"", "Bearer wrong-token-wrong-token", "Basic " + triggerToken, triggerToken} {
		if code, _ := s.post(t, auth); code != http.StatusUnauthorized {
			t.Errorf("POST /snapshot with Authorization %q: %d, want 401", auth, code)
		}
	}
	if code, _ := s.get(t, "GET", "/healthz"); code != 200 {
		t.Errorf("/healthz without a token: %d", code)
	}
	// Had a refused request asked for a snapshot, this one would be told
	// to wait (409 while it runs, 429 within --trigger-min-interval, 1m),
	// and the store below would hold a third snapshot.
	if code, _ := s.post(t, "Bearer "+triggerToken); code != http.StatusAccepted {
		t.Fatalf("POST /snapshot with the token after refused requests: %d, want 202", code)
	}
	code, retry := s.post(t, "Bearer "+triggerToken)
	if secs, err := strconv.Atoi(retry); (code != http.StatusConflict && code != http.StatusTooManyRequests) || err != nil || secs <= 0 {
		t.Errorf("a second request at once: %d, Retry-After %q; want 409 or 429 with a delay", code, retry)
	}
	s.waitLog(t, committed, 2)
	ids, trigger := snapshots(t, storeDir)
	if len(ids) != 2 || trigger[ids[0]] != "scheduled" || trigger[ids[1]] != "on-demand" {
		t.Errorf("store holds %v (%v), want the first scheduled snapshot and one on demand", ids, trigger)
	}
	if strings.Contains(s.stderr.String(), triggerToken) {
		t.Errorf("the sidecar logged the token:\n%s", s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "refused POST /snapshot") {
		t.Errorf("refused requests were not logged:\n%s", s.stderr.String())
	}

	// No token configured: the endpoint is off.
	home2, store2 := t.TempDir(), t.TempDir()
	if err := testhome.Build(home2); err != nil {
		t.Fatal(err)
	}
	off := startSidecar(t, home2, store2)
	off.waitLog(t, committed, 1)
	testhome.Change(t, home2)
	for _, auth := range []string{"", "Bearer " + triggerToken} {
		if code, _ := off.post(t, auth); code != http.StatusForbidden {
			t.Errorf("POST /snapshot on a sidecar without a token, Authorization %q: %d, want 403", auth, code)
		}
	}
	// Stopped, the sidecar has taken all it will: the first snapshot and
	// the final one, none on demand.
	off.cmd.Process.Signal(syscall.SIGTERM)
	if err := off.cmd.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v\n%s", err, off.stderr.String())
	}
	if ids, trigger := snapshots(t, store2); len(ids) != 2 || trigger[ids[0]] != "scheduled" || trigger[ids[1]] != "final" {
		t.Errorf("a sidecar without a token: store holds %v (%v), want the first scheduled snapshot and the final one", ids, trigger)
	}
}

// Issue 21: eight requests in ten seconds with --keep-last 3 flushed the
// history down to 3 snapshots. Now the scheduled snapshots stay, and the
// on-demand ones are kept by --keep-on-demand.
func TestListenerBurstKeepsTheScheduledHistory(t *testing.T) {
	testenv.Long(t, "takes eight snapshots on demand through a sidecar")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	for range 2 { // scheduled history: two cron snapshots, then the sidecar's first
		ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
		testhome.Change(t, home)
	}
	s := startSidecar(t, home, storeDir, "--trigger-token-file", tokenFile(t), "--keep-last", "3", "--trigger-min-interval", "0")
	s.waitLog(t, committed, 1)
	scheduled, _ := snapshots(t, storeDir)
	if len(scheduled) != 3 {
		t.Fatalf("%d snapshots before the burst, want 3", len(scheduled))
	}
	start := time.Now()
	for i := range 8 {
		os.WriteFile(filepath.Join(home, "jobs", "burst"), []byte(fmt.Sprint(i)), 0o644)
		for {
			code, _ := s.post(t, "Bearer "+triggerToken)
			if code == http.StatusAccepted {
				break
			}
			if code != http.StatusConflict {
				t.Fatalf("request %d: %d, want 202 or 409 while one runs", i, code)
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.waitLog(t, committed, 2+i)
	}
	t.Logf("8 on-demand snapshots in %v", time.Since(start).Round(time.Millisecond))
	s.waitLog(t, regexp.MustCompile(`prune done`), 9)
	ids, trigger := snapshots(t, storeDir)
	for _, id := range scheduled {
		if !slices.Contains(ids, id) {
			t.Errorf("scheduled snapshot %s was pruned by the burst; store holds %v", id, ids)
		}
	}
	var onDemand int
	for _, id := range ids {
		if trigger[id] == "on-demand" {
			onDemand++
		}
	}
	if len(ids) != 6 || onDemand != 3 {
		t.Errorf("store holds %d snapshots, %d on demand (%v), want the 3 scheduled and the 3 newest on demand", len(ids), onDemand, trigger)
	}
}

// openFDs and rssKiB read a process's descriptors and resident memory.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// Issue 21: 5,000 idle keep-alive connections all stayed open. Now the
// sidecar holds at most --listen-max-connections of them (a new one takes
// an idle one's place), closes idle ones after the idle timeout, and its
// probes still answer during the flood.
func TestListenerIdleConnectionsAreCapped(t *testing.T) {
	testenv.Long(t, "waits out the sidecar's 30 s idle timeout")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, home, storeDir)
	s.waitLog(t, committed, 1)
	pid := s.cmd.Process.Pid
	addr := strings.TrimPrefix(s.addr, "http://")
	fds0, rss0 := openFDs(t, pid), rssKiB(t, pid)

	const n, limit = 2000, 64 // limit: --listen-max-connections' default
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var refused int
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			refused++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	fds1, rss1 := openFDs(t, pid), rssKiB(t, pid)
	t.Logf("sidecar before: %d descriptors, %d KiB RSS; holding %d idle keep-alive connections: %d descriptors, %d KiB RSS (%d requests unanswered)",
		fds0, rss0, n, fds1, rss1, refused)
	if fds1 > fds0+limit+8 {
		t.Errorf("the sidecar holds %d descriptors with %d idle connections open, want at most %d + the cap %d", fds1, n, fds0, limit)
	}
	// The server marks a connection idle just after its client has the
	// answer: a client quick enough to connect in between finds the port
	// full. That must stay rare.
	if refused > n/100 {
		t.Errorf("%d of %d requests went unanswered: new connections should take idle ones' places", refused, n)
	}
	if code, _ := s.get(t, "GET", "/healthz"); code != 200 {
		t.Errorf("/healthz during the flood: %d", code)
	}

	// Once idle past the idle timeout (30s), the server closes them all.
	deadline := time.Now().Add(45 * time.Second)
	for openFDs(t, pid) > fds0+2 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	fds2, rss2 := openFDs(t, pid), rssKiB(t, pid)
	t.Logf("sidecar after the idle timeout: %d descriptors, %d KiB RSS", fds2, rss2)
	if fds2 > fds0+2 {
		t.Errorf("%d descriptors 45 s after the connections went idle, want about %d", fds2, fds0)
	}
}
