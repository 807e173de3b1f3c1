package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/homesnap/homesnap/internal/testhome"
)

// TestEveryWriterHoldsTheLease: one writer per store prefix. While an
// encrypted sidecar runs, re-encryption and prune (which rewrite and
// delete objects) are refused, naming the lease, and change nothing; once
// it stopped, both run. The sidecar's store metrics count what is stored:
// ciphertext.
func TestEveryWriterHoldsTheLease(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	oldKey, _, _ := ageKeys(t)
	s := startSidecar(t, home, storeDir, "--age-identity-file", oldKey)
	s.waitLog(t, committed, 1)

	// What the sidecar counted against what the store directory holds.
	_, metrics := s.getUntil(t, "/metrics", func(_ int, body string) bool {
		return strings.Contains(body, `homesnap_snapshots_total{result="committed"} 1`) && strings.Contains(body, `homesnap_store_bytes{kind="archive"}`)
	})
	var archives, manifests, all int64
	filepath.Walk(storeDir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || fi.Name() == "lease.json" { // the lease is written beside the metrics
			return err
		}
		if !strings.HasSuffix(path, ".age") && (strings.Contains(path, "/archives/") || strings.HasSuffix(path, ".json.zst")) {
			t.Errorf("%s is not encrypted", path)
		}
		all += fi.Size()
		if strings.Contains(path, "/archives/") {
			archives += fi.Size()
		}
		if strings.HasSuffix(path, ".json.zst.age") {
			manifests += fi.Size()
		}
		return nil
	})
	// What the store holds, by kind, as the bucket's listing would say.
	if got := metricValue(t, metrics, `homesnap_store_bytes{kind="archive"} `); got != archives {
		t.Errorf(`homesnap_store_bytes{kind="archive"} %d, want the %d bytes under archives/`, got, archives)
	}
	if got := metricValue(t, metrics, `homesnap_store_bytes{kind="manifest"} `); got != manifests {
		t.Errorf(`homesnap_store_bytes{kind="manifest"} %d, want the %d bytes of the manifests`, got, manifests)
	}
	if got := metricValue(t, metrics, "homesnap_stored_bytes_total "); got != archives {
		t.Errorf("homesnap_stored_bytes_total %d, want the %d bytes of the encrypted archive", got, archives)
	}
	if got := metricValue(t, metrics, `homesnap_store_bytes_total{direction="out"} `); got < all {
		t.Errorf(`homesnap_store_bytes_total{direction="out"} %d, less than the %d bytes stored (ciphertext)`, got, all)
	}

	newKey, newRecipients, _ := ageKeys(t)
	both := filepath.Join(t.TempDir(), "both.txt")
	a, _ := os.ReadFile(oldKey)
	b, _ := os.ReadFile(newKey)
	os.WriteFile(both, append(a, b...), 0o600)
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_HOME=" + home}
	reencrypt := func() result {
		return run(t, "snapshot", env, "--age-reencrypt", "--age-identity-file", both, "--age-recipients-file", newRecipients)
	}
	if r := reencrypt(); r.code != 1 || !strings.Contains(r.stderr, "re-encryption refused") || !strings.Contains(r.stderr, "holds the store's lease") {
		t.Fatalf("--age-reencrypt beside a running sidecar: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, "prune", env, "--keep-last", "1", "--age-identity-file", oldKey); r.code != 1 || !strings.Contains(r.stderr, "prune refused") || !strings.Contains(r.stderr, "holds the store's lease") {
		t.Fatalf("prune beside a running sidecar: exit %d, %s", r.code, r.stderr)
	}
	ok(t, run(t, "prune", env, "--keep-last", "1", "--dry-run")) // deletes nothing: no lease needed
	// Refused means untouched: the old key still restores the head.
	ok(t, run(t, "restore", env, "--home", t.TempDir(), "--age-identity-file", oldKey))

	s.cmd.Process.Signal(syscall.SIGTERM) // releases the lease
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v\n%s", err, s.stderr.String())
	}
	ok(t, reencrypt())
	ok(t, run(t, "prune", env, "--keep-last", "1", "--age-identity-file", newKey)) // it tags the records it rewrites
	ok(t, run(t, "restore", env, "--home", t.TempDir(), "--age-identity-file", newKey))
}

// metricValue reads a sample from Prometheus' text format; name includes
// the labels and the space before the value.
func metricValue(t *testing.T, text, name string) int64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, found := strings.CutPrefix(line, name); found {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return int64(f)
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return 0
}
