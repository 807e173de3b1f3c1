package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestSidecarJournalSnapshotsReadOnlyWhatChanged: with the change
// journal on, the sidecar's snapshots after the first are driven by what
// the Jenkins user changed in between, and each restores to the home; a
// failed snapshot sends the next one back to a full walk, which says why.
func TestSidecarJournalSnapshotsReadOnlyWhatChanged(t *testing.T) {
	testenv.Long(t, "runs a sidecar through many journal snapshots")
	home, _, _ := writerWorld(t)
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "1000:1000", home).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
	storeDir := t.TempDir()
	s := startSidecar(t, home, storeDir, "--journal", "auto")
	s.waitLog(t, committed, 1)
	s.waitLog(t, regexp.MustCompile(`change journal on`), 1)
	// The journal opens beside the first snapshot, which walks without it
	// when it starts first; the first snapshot with the journal walks too.
	started := regexp.MustCompile(`"reason":"started"[^\n]*full walk`)
	if !started.MatchString(s.stderr.String()) {
		s.cmd.Process.Signal(syscall.SIGUSR1)
		s.waitLog(t, started, 1)
		s.waitLog(t, regexp.MustCompile(`nothing changed since the last snapshot`), 1)
	}

	restoresToHome := func(step string) {
		t.Helper()
		target := t.TempDir()
		ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir))
		same(t, step+": restore of the newest snapshot", selectedTree(t, home), wholeTree(t, target))
	}
	journalDriven := regexp.MustCompile(`"journal":"journal"[^\n]*snapshot committed`)
	steps := []struct{ name, script string }{
		{"create and chmod", `mkdir -p jobs/new-job/builds/1
echo '<build/>' > jobs/new-job/builds/1/build.xml
echo '<project/>' > jobs/new-job/config.xml
chmod 600 nodes/agent-1/config.xml`},
		{"a write that restores size and mtime", `mkdir -p workspace
ref=workspace/mtime-ref
touch -r jobs/test/config.xml "$ref"
printf X | dd of=jobs/test/config.xml bs=1 count=1 conv=notrunc 2>/dev/null
touch -r "$ref" jobs/test/config.xml
rm -f "$ref"`},
		{"rename a directory and delete a build", `mv jobs/test jobs/test-renamed
rm -rf jobs/parameterized-windows/builds/1`},
	}
	for i, st := range steps {
		asJenkins(t, home, st.script)
		s.cmd.Process.Signal(syscall.SIGUSR1)
		s.waitLog(t, committed, i+2)
		s.waitLog(t, journalDriven, i+1)
		restoresToHome(st.name)
	}
	_, metrics := s.getUntil(t, "/metrics", func(_ int, body string) bool {
		return strings.Contains(body, `homesnap_journal_snapshots_total{mode="journal"} 3`)
	})
	for _, want := range []string{
		`homesnap_journal_snapshots_total{mode="journal"} 3`,
		`homesnap_journal_snapshots_total{mode="walk"} 1`,
		`homesnap_journal_fallbacks_total{reason="started"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `reason="parent"`) || strings.Contains(metrics, `reason="overflow"`) {
		t.Errorf("unexpected fallbacks:\n%s", grepLines(metrics, "journal"))
	}
	if m := regexp.MustCompile(`homesnap_journal_watches (\d+)`).FindStringSubmatch(metrics); m == nil || m[1] == "0" {
		t.Errorf("homesnap_journal_watches missing or 0:\n%s", grepLines(metrics, "journal"))
	}

	// The shrink guard refuses a snapshot: the changes it took were not
	// applied, so the next one walks everything and says why.
	asJenkins(t, home, `mkdir -p workspace && mv secrets workspace/secrets-away && mv nodes workspace/nodes-away`)
	s.cmd.Process.Signal(syscall.SIGUSR1)
	s.waitLog(t, regexp.MustCompile(`snapshot failed`), 1)
	asJenkins(t, home, `mv workspace/secrets-away secrets && mv workspace/nodes-away nodes`)
	s.cmd.Process.Signal(syscall.SIGUSR1)
	s.waitLog(t, regexp.MustCompile(`"reason":"invalidated"[^\n]*full walk`), 1)
	s.waitLog(t, regexp.MustCompile(`"journal":"walk"[^\n]*(snapshot committed|nothing changed)`), 2)
	restoresToHome("after the fallback")
	_, metrics = s.getUntil(t, "/metrics", func(_ int, body string) bool {
		return strings.Contains(body, `homesnap_journal_fallbacks_total{reason="invalidated"}`)
	})
	if !strings.Contains(metrics, `homesnap_journal_fallbacks_total{reason="invalidated"} 1`) {
		t.Errorf("/metrics lacks the invalidated fallback:\n%s", grepLines(metrics, "journal"))
	}

	// And the journal drives the next one again.
	asJenkins(t, home, `echo '<build/>' > jobs/new-job/builds/1/log`)
	s.cmd.Process.Signal(syscall.SIGUSR1)
	s.waitLog(t, journalDriven, len(steps)+1)
	restoresToHome("after the journal resumed")
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v\n%s", err, s.stderr.String())
	}
}

// TestSidecarJournalOff: --journal=off walks every time and says nothing
// of a journal.
func TestSidecarJournalOff(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, home, storeDir, "--journal", "off")
	s.waitLog(t, committed, 1)
	_, metrics := s.getUntil(t, "/metrics", func(_ int, body string) bool {
		return strings.Contains(body, `homesnap_snapshots_total{result="committed"} 1`)
	})
	if strings.Contains(s.stderr.String(), `"journal":`) || strings.Contains(metrics, "homesnap_journal_snapshots_total{") {
		t.Errorf("--journal=off used a journal:\n%s\n%s", s.stderr.String(), grepLines(metrics, "journal"))
	}
	if r := run(t, "snapshot", nil, "--home", home, "--store", t.TempDir(), "--journal", "sometimes"); r.code != 2 || !strings.Contains(r.stderr, "--journal") {
		t.Errorf("--journal=sometimes: exit %d, want 2 naming --journal:\n%s", r.code, r.stderr)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strconv.Itoa(len(out)) + " lines:\n" + strings.Join(out, "\n")
}

// TestSidecarWalksWhenTheWatchesDoNotFit: where the selection needs more
// inotify watches than the user may hold (here a user namespace whose own
// limit, user.max_inotify_watches, is 5, as a pod with hostUsers: false
// can have), the sidecar says so once, naming the sysctl and both limits,
// exports no watches, and walks: every snapshot is taken and restores.
func TestSidecarWalksWhenTheWatchesDoNotFit(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	// The sidecar runs as root in a user namespace mapping the first
	// 65536 ids onto themselves, which lowers its own watch limit first.
	lowLimit := func(argv []string) *exec.Cmd {
		cmd := exec.Command("sh", append([]string{"-c", `echo 5 > /proc/sys/user/max_inotify_watches && exec "$@"`, "sh"}, argv...)...)
		ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: ids, GidMappings: ids}
		return cmd
	}
	s := startSidecarVia(t, lowLimit, home, storeDir, "--journal", "auto")
	s.waitLog(t, regexp.MustCompile(`fs\.inotify\.max_user_watches[^\n]*user\.max_inotify_watches is 5[^\n]*no change journal: every snapshot walks`), 1)
	s.waitLog(t, committed, 1)
	if err := os.WriteFile(filepath.Join(home, "jobs/test/nextBuildNumber"), []byte("43\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGUSR1)
	s.waitLog(t, committed, 2)
	target := t.TempDir()
	ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir))
	same(t, "restore of the walked snapshot", selectedTree(t, home), wholeTree(t, target))
	_, metrics := s.getUntil(t, "/metrics", func(_ int, body string) bool {
		return strings.Contains(body, `homesnap_snapshots_total{result="committed"} 2`)
	})
	if !strings.Contains(metrics, "homesnap_journal_watches 0") || strings.Contains(metrics, "homesnap_journal_snapshots_total{") {
		t.Errorf("without a journal /metrics shows:\n%s", grepLines(metrics, "journal"))
	}
	if n := strings.Count(s.stderr.String(), "no change journal"); n != 1 {
		t.Errorf("the sidecar said %d times that it has no journal, want once:\n%s", n, s.stderr.String())
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v\n%s", err, s.stderr.String())
	}
}

// TestSidecarServesWhileTheJournalOpens (issue 29, scenario 4): the
// journal's open takes about a minute on a large home, and the sidecar
// listened only after it, so the native sidecar's startupProbe held
// Jenkins back. With the open held for an hour (the test hook), the port
// answers, readiness and the metric say the journal is opening, and the
// snapshots walk: each restores to the home, the final one on SIGTERM
// included, which does not wait for the open.
func TestSidecarServesWhileTheJournalOpens(t *testing.T) {
	testenv.Long(t, "runs a sidecar whose journal opens late")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	s := startSidecarVia(t, func(argv []string) *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "HOMESNAP_TEST_JOURNAL_OPEN_DELAY=1h")
		return cmd
	}, home, storeDir, "--journal", "auto", "--trigger-token-file", tokenFile(t), "--trigger-min-interval", "0")
	if code, body := s.get(t, "GET", "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz while the journal opens: %d %q", code, body)
	}
	s.waitLog(t, committed, 1)
	restoresToHome := func(step string) {
		t.Helper()
		target := t.TempDir()
		ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir))
		same(t, step+": restore of the newest snapshot", selectedTree(t, home), wholeTree(t, target))
	}
	restoresToHome("the first snapshot")
	if code, body := s.getUntil(t, "/readyz", func(c int, _ string) bool { return c == http.StatusServiceUnavailable }); body != "not ready: journal opening\n" {
		t.Errorf("/readyz after a snapshot, the journal still opening: %d %q", code, body)
	}
	if _, metrics := s.get(t, "GET", "/metrics"); !strings.Contains(metrics, `homesnap_journal_state{state="opening"} 1`) {
		t.Errorf("/metrics does not say the journal is opening:\n%s", grepLines(metrics, "journal"))
	}

	testhome.Change(t, home)
	if code, _ := s.post(t, "Bearer "+triggerToken); code != http.StatusAccepted {
		t.Fatalf("POST /snapshot while the journal opens: %d", code)
	}
	s.waitLog(t, committed, 2)
	restoresToHome("a snapshot on demand")

	if err := os.WriteFile(filepath.Join(home, "jobs", "test", "builds", "3", "log"), []byte("Started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("sidecar exit: %v\n%s", err, s.stderr.String())
		}
	case <-time.After(2 * time.Minute): // the open is held for an hour
		t.Fatalf("the sidecar did not stop: its final snapshot waits for the journal's open\n%s", s.stderr.String())
	}
	s.waitLog(t, committed, 3)
	restoresToHome("the final snapshot")
	if log := s.stderr.String(); strings.Contains(log, "change journal on") || strings.Contains(log, `"journal":"journal"`) {
		t.Errorf("a snapshot used a journal that was never open:\n%s", log)
	}
}
