package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/testenv"
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
	testenv.Long(t, "runs every maintenance command on a forged store")
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

// TestObjectsCopiedBetweenStoresAreRefused is issue 31 item 4, as a
// bucket writer without the key: two controllers share one age identity
// (the common setup), and the writer copies store B's snapshots, archives
// and head into store A, keeping A's marker. A restore of A restored B's
// content with exit 0; now every tag covers its store's identity, and the
// restore, of the head or of B's snapshot by ID, and the sidecar refuse
// (exit 11), writing nothing.
func TestObjectsCopiedBetweenStoresAreRefused(t *testing.T) {
	for _, b := range authBackends {
		t.Run(b.name, func(t *testing.T) {
			storeURL, env, w := b.setup(t)
			bk := bucket{t, w}
			key, _, _ := ageKeys(t)
			env = append(env, "HOMESNAP_STORE="+storeURL, "HOMESNAP_AGE_IDENTITY_FILE="+key, "HOMESNAP_LOG_FORMAT=json")
			home := t.TempDir()
			if err := testhome.Build(home); err != nil {
				t.Fatal(err)
			}
			ok(t, run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"))
			testhome.Change(t, home)
			ok(t, run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"))

			// Store B: another controller, the same identity.
			other := t.TempDir()
			otherHome := t.TempDir()
			if err := testhome.Build(otherHome); err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Join(otherHome, "nodes/evil"), 0o755)
			os.WriteFile(filepath.Join(otherHome, "nodes/evil/config.xml"), []byte("<slave><name>evil</name></slave>\n"), 0o644)
			otherEnv := []string{"HOMESNAP_STORE=" + other, "HOMESNAP_AGE_IDENTITY_FILE=" + key}
			theirs := ok(t, run(t, "snapshot", otherEnv, "--once", "--home", otherHome, "--timeout", "2m"))

			bk.plant(other)
			refused(t, env, exitForged, "copied from another store")
			refused(t, env, exitForged, "copied from another store", "--snapshot", theirs)
			if r := run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"); r.code != exitForged {
				t.Fatalf("snapshot over the copied head: exit %d, want %d\n%s", r.code, exitForged, tail(r.stderr, 2000))
			}
		})
	}
}

// TestUpgradeToStoreIdentity is the upgrade of an authenticated store of
// format 3 (testdata/release3, written by the previous release), in the
// order docs/encryption.md gives: the new release restores it as it is;
// the sidecar's first snapshot gives it its identity (format 4) before it
// writes anything; from then on every snapshot, the old ones included,
// restores without an override, and the format 3 marker put back by a
// bucket writer is refused.
func TestUpgradeToStoreIdentity(t *testing.T) {
	for _, b := range authBackends {
		t.Run(b.name, func(t *testing.T) {
			storeURL, env, w := b.setup(t)
			bk := bucket{t, w}
			bk.plant("testdata/release3/store")
			old, err := os.ReadFile("testdata/release3/store/" + repo.MarkerKey)
			if err != nil {
				t.Fatal(err)
			}
			bk.put(repo.MarkerKey, old)
			key, _ := filepath.Abs("testdata/release3/identity.txt")
			env = append(env, "HOMESNAP_STORE="+storeURL, "HOMESNAP_AGE_IDENTITY_FILE="+key, "HOMESNAP_LOG_FORMAT=json")
			before := list(t, storeURL, env)

			// 1. The init container of the new release: no override needed.
			home := t.TempDir()
			ok(t, run(t, "restore", env, "--home", home, "--timeout", "2m"))
			// 2. The sidecar's first snapshot binds the store.
			os.WriteFile(filepath.Join(home, "jobs/a/config.xml"), []byte("<project><description>c</description></project>\n"), 0o644)
			r := run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m")
			ok(t, r)
			if !strings.Contains(r.stderr, "has its identity now") {
				t.Errorf("the sidecar did not say it bound the store:\n%s", tail(r.stderr, 2000))
			}
			var m repo.Marker
			stored := bk.load(repo.MarkerKey)
			json.Unmarshal(tagsOf.ReplaceAll(stored, nil), &m)
			if m.Homesnap != repo.FormatVersion || !repo.IsStoreID(m.ID) || !m.Authenticated || len(m.LegacyTags) == 0 {
				t.Fatalf("marker after the first snapshot of the new release: %s", stored)
			}
			// 3. Everything restores without an override, old snapshots too.
			want := selectedTree(t, home)
			target := t.TempDir()
			ok(t, run(t, "restore", env, "--home", target, "--timeout", "2m"))
			same(t, "restore after the upgrade", want, wholeTree(t, target))
			first := t.TempDir()
			ok(t, run(t, "restore", env, "--home", first, "--snapshot", before.ids[0], "--timeout", "2m"))
			if cfg, _ := os.ReadFile(filepath.Join(first, "jobs/a/config.xml")); !bytes.Contains(cfg, []byte("<description>a</description>")) {
				t.Fatalf("the first snapshot of the format 3 store restored jobs/a/config.xml as %q", cfg)
			}
			if r := run(t, "homesnap", env, "verify"); r.code != 0 || strings.Contains(r.stderr, `"level":"warn"`) {
				t.Fatalf("verify after the upgrade: exit %d\n%s", r.code, tail(r.stderr, 3000))
			}
			// 4. The bucket writer puts the format 3 marker back, to have
			// format 3 tags accepted again.
			bk.put(repo.MarkerKey, old)
			refused(t, env, exitForged, "put back the marker")
		})
	}
}
