package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/testhome"
)

// tagsOf matches the tags a JSON object of the store carries.
var tagsOf = regexp.MustCompile(`,"macs":\{[^}]*\}`)

// TestMaintenanceDoesNotLaunderRecords is issue 31 item 3, as a bucket
// writer without the key: it replaces a kept snapshot's record with an
// untagged one of its own (another host), which a restore refuses (exit
// 10). Prune must re-link that snapshot (the one before it is dropped),
// and used to tag the writer's record anew, after which the restore
// succeeded. Now prune, and the sidecar's own prune, stop naming the
// record, and the override rewrites it without a tag: it stays refused.
func TestMaintenanceDoesNotLaunderRecords(t *testing.T) {
	for _, b := range authBackends {
		t.Run(b.name, func(t *testing.T) {
			storeURL, env, w := b.setup(t)
			bk := bucket{t, w}
			keyFile := filepath.Join(t.TempDir(), "auth.key")
			os.WriteFile(keyFile, []byte(strings.Repeat("7c", 32)+"\n"), 0o600)
			env = append(env, "HOMESNAP_STORE="+storeURL, "HOMESNAP_AUTH_KEY_FILE="+keyFile, "HOMESNAP_LOG_FORMAT=json")
			home := t.TempDir()
			if err := testhome.Build(home); err != nil {
				t.Fatal(err)
			}
			snap := func(args ...string) string {
				return ok(t, run(t, "snapshot", env, append([]string{"--once", "--home", home, "--timeout", "2m"}, args...)...))
			}
			first := snap()
			testhome.Change(t, home)
			second := snap()
			os.WriteFile(filepath.Join(home, "jobs/test/config.xml"), []byte("<project><description>third</description></project>\n"), 0o644)
			snap()

			rec := bk.load(repo.RecordKey(second))
			forged := regexp.MustCompile(`"host":"[^"]*"`).ReplaceAll(tagsOf.ReplaceAll(rec, nil), []byte(`"host":"the-writer's"`))
			if bytes.Equal(forged, rec) || bytes.Contains(forged, []byte(`"macs"`)) {
				t.Fatalf("could not strip and change the record: %s", rec)
			}
			bk.put(repo.RecordKey(second), forged)
			refused(t, env, exitUnauthenticated, "is not authenticated", "--snapshot", second)

			r := run(t, "prune", env, "--keep-last", "2")
			if r.code != exitUnauthenticated || !strings.Contains(r.stderr, repo.RecordKey(second)) || !strings.Contains(r.stderr, "--allow-unauthenticated") {
				t.Fatalf("prune over the writer's record: exit %d, want %d naming %s and what to do\n%s", r.code, exitUnauthenticated, repo.RecordKey(second), tail(r.stderr, 3000))
			}
			if l := list(t, storeURL, append(env, "HOMESNAP_ALLOW_UNAUTHENTICATED=true")); !l.has(first) {
				t.Fatalf("the stopped prune deleted snapshot %s: %v", first, l.ids)
			}
			refused(t, env, exitUnauthenticated, "is not authenticated", "--snapshot", second)

			// The sidecar's prune after a snapshot: the snapshot stands,
			// the record stays the writer's, untagged.
			os.WriteFile(filepath.Join(home, "jobs/test/config.xml"), []byte("<project><description>fourth</description></project>\n"), 0o644)
			snap("--keep-last", "3")
			refused(t, env, exitUnauthenticated, "is not authenticated", "--snapshot", second)

			// The override lets the prune through, and tags nothing it
			// could not authenticate.
			r = run(t, "prune", env, "--keep-last", "3", "--allow-unauthenticated")
			if r.code != 0 || !strings.Contains(r.stderr, repo.RecordKey(second)) {
				t.Fatalf("prune --allow-unauthenticated: exit %d, want 0 and a warning naming %s\n%s", r.code, repo.RecordKey(second), tail(r.stderr, 3000))
			}
			if got := bk.load(repo.RecordKey(second)); bytes.Contains(got, []byte(`"macs"`)) || !bytes.Contains(got, []byte("the-writer's")) {
				t.Fatalf("the override tagged or lost the writer's record: %s", got)
			}
			refused(t, env, exitUnauthenticated, "is not authenticated", "--snapshot", second)
		})
	}
}
