package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/storetest"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// The exit statuses of authentication refusals (internal/cli/exit.go).
const (
	exitUnauthenticated = 10
	exitForged          = 11
	exitRollback        = 12
	exitPlaintext       = 13
)

// authBackend is a store the binaries use and the same store opened by
// the test as a bucket writer: it can put and delete, and holds no key.
type authBackend struct {
	name  string
	setup func(t *testing.T) (storeURL string, env []string, writer store.Store)
}

var authBackends = []authBackend{
	{"file", func(t *testing.T) (string, []string, store.Store) {
		dir := t.TempDir()
		return dir, nil, openWriter(t, dir)
	}},
	{"versitygw/s3", func(t *testing.T) (string, []string, store.Store) {
		ep := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
		prefix := storetest.Prefix(t)
		removeS3AtEnd(t, ep, prefix)
		raw := fmt.Sprintf("minio://%s:%s@%s/%s/%s?secure=false", url.QueryEscape(s3Access), url.QueryEscape(s3Secret), hostOf(t, ep), testBucket, prefix)
		return s3URL(ep, prefix, ""), s3Env(), openWriter(t, raw)
	}},
}

func openWriter(t *testing.T, raw string) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// bucket is the bucket writer's view of a store: every object, read and
// put back whole.
type bucket struct {
	t *testing.T
	s store.Store
}

func (b bucket) load(key string) []byte {
	b.t.Helper()
	data, _, err := b.s.Load(context.Background(), key)
	if err != nil {
		b.t.Fatalf("bucket writer: %v", err)
	}
	return data
}

func (b bucket) put(key string, data []byte) {
	b.t.Helper()
	if err := b.s.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
		b.t.Fatalf("bucket writer: %v", err)
	}
}

// snapshot saves every object, so that an attack can be undone.
func (b bucket) snapshot() map[string][]byte {
	b.t.Helper()
	all := map[string][]byte{}
	err := b.s.List(context.Background(), "", func(o store.Object) error {
		if o.Key != repo.LeaseKey {
			all[o.Key] = nil
		}
		return nil
	})
	if err != nil {
		b.t.Fatal(err)
	}
	for k := range all {
		all[k] = b.load(k)
	}
	return all
}

// reset makes the store hold exactly what snapshot saved.
func (b bucket) reset(saved map[string][]byte) {
	b.t.Helper()
	var extra []string
	b.s.List(context.Background(), "", func(o store.Object) error {
		if _, ok := saved[o.Key]; !ok && o.Key != repo.LeaseKey {
			extra = append(extra, o.Key)
		}
		return nil
	})
	if err := b.s.Delete(context.Background(), extra...); err != nil {
		b.t.Fatal(err)
	}
	for k, v := range saved {
		b.put(k, v)
	}
}

// plant copies every object but the marker of another store (a directory
// the attacker filled with homesnap itself) into the bucket.
func (b bucket) plant(dir string) {
	b.t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		key, _ := filepath.Rel(dir, p)
		if key == repo.LeaseKey || key == repo.MarkerKey || strings.HasPrefix(key, ".") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b.put(filepath.ToSlash(key), data)
		return nil
	})
	if err != nil {
		b.t.Fatal(err)
	}
}

// refused runs a restore into an empty directory and checks that it
// exits with code, says why and how to override, and writes nothing.
func refused(t *testing.T, env []string, code int, why string, args ...string) {
	t.Helper()
	target := t.TempDir()
	r := run(t, "restore", env, append([]string{"--home", target, "--timeout", "2m"}, args...)...)
	if r.code != code || !strings.Contains(r.stderr, why) || !strings.Contains(r.stderr, "--allow-unauthenticated") {
		t.Fatalf("restore %v: exit %d, want %d with %q and the override named; stderr:\n%s", args, r.code, code, why, tail(r.stderr, 3000))
	}
	if got := selectedTree(t, target); len(got) > 0 {
		t.Fatalf("a refused restore wrote %d paths into the home", len(got))
	}
}

// loudly runs a restore with the override and checks that it succeeds and
// warns.
func loudly(t *testing.T, env []string, warning string, args ...string) string {
	t.Helper()
	target := t.TempDir()
	r := run(t, "restore", env, append([]string{"--home", target, "--timeout", "2m", "--allow-unauthenticated"}, args...)...)
	if r.code != 0 || !strings.Contains(r.stderr, `"level":"warn"`) || !strings.Contains(r.stderr, warning) {
		t.Fatalf("restore --allow-unauthenticated %v: exit %d, want 0 and a warning %q; stderr:\n%s", args, r.code, warning, tail(r.stderr, 3000))
	}
	return target
}

// TestAuthenticatedStore is issue 21 finding 6 through the binaries: a
// bucket writer without the key plants a plain snapshot, a snapshot
// encrypted to the public recipient, an old head, a changed record and a
// forged manifest layer; each restore is refused with its own status and
// the home is untouched, and --allow-unauthenticated lets the admin
// through, loudly. Then the same on a plain store authenticated with a
// key file.
func TestAuthenticatedStore(t *testing.T) {
	testenv.Long(t, "runs the binaries through every authentication case")
	for _, b := range authBackends {
		for _, encrypted := range []bool{true, false} {
			name := b.name + "/keyfile"
			if encrypted {
				name = b.name + "/age"
			}
			t.Run(name, func(t *testing.T) { testAuthenticatedStore(t, b, encrypted) })
		}
	}
}

func testAuthenticatedStore(t *testing.T, b authBackend, encrypted bool) {
	storeURL, env, w := b.setup(t)
	bk := bucket{t, w}
	env = append(env, "HOMESNAP_STORE="+storeURL, "HOMESNAP_LOG_FORMAT=json")
	key, recipients, fp := ageKeys(t)
	var identity age.Identity
	if encrypted {
		env = append(env, "HOMESNAP_AGE_IDENTITY_FILE="+key)
		data, _ := os.ReadFile(key)
		ids, err := age.ParseIdentities(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		identity = ids[0]
	} else {
		keyFile := filepath.Join(t.TempDir(), "auth.key")
		os.WriteFile(keyFile, []byte("0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0\n"), 0o600)
		env = append(env, "HOMESNAP_AUTH_KEY_FILE="+keyFile)
	}
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	snap := func() string { return ok(t, run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m")) }
	// The sidecar does not build on a planted head either.
	snapRefused := func(t *testing.T) {
		t.Helper()
		if r := run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"); r.code != exitUnauthenticated {
			t.Fatalf("snapshot over a planted head: exit %d, want %d\n%s", r.code, exitUnauthenticated, tail(r.stderr, 2000))
		}
	}
	id1 := snap()
	head1 := bk.load(repo.HeadKey)
	testhome.Change(t, home)
	snap()
	os.WriteFile(filepath.Join(home, "jobs/test/config.xml"), []byte("<project><description>third</description></project>\n"), 0o644)
	id3 := snap()
	want := selectedTree(t, home)
	target := t.TempDir()
	ok(t, run(t, "restore", env, "--home", target, "--timeout", "2m"))
	same(t, "restore of the authenticated head", want, wholeTree(t, target))
	good := bk.snapshot()

	// The attacker's own snapshot, of a home with a node of theirs, in a
	// store they filled with homesnap (encrypted to the victim's public
	// recipient and their own, with their own identity).
	evil := t.TempDir()
	if err := testhome.Build(evil); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(evil, "nodes/evil"), 0o755)
	os.WriteFile(filepath.Join(evil, "nodes/evil/config.xml"), []byte("<slave><name>evil</name></slave>\n"), 0o644)
	attackerStore := func(t *testing.T, args ...string) string {
		dir := t.TempDir()
		ok(t, run(t, "snapshot", []string{"HOMESNAP_STORE=" + dir}, append([]string{"--once", "--home", evil}, args...)...))
		return dir
	}

	if encrypted {
		t.Run("plaintext snapshot planted", func(t *testing.T) {
			defer bk.reset(good)
			bk.plant(attackerStore(t))
			refused(t, env, exitPlaintext, "is not encrypted")
			snapRefused(t)
			var h repo.Head
			json.Unmarshal(bk.load(repo.HeadKey), &h)
			refused(t, env, exitPlaintext, "is not encrypted", "--snapshot", h.Snapshot)
			got := loudly(t, env, "not encrypted")
			if _, err := os.Stat(filepath.Join(got, "nodes/evil/config.xml")); err != nil {
				t.Fatalf("the override did not restore the planted snapshot: %v", err)
			}
		})
		t.Run("snapshot encrypted to the public recipient", func(t *testing.T) {
			defer bk.reset(good)
			akey, arecipients, _ := ageKeys(t)
			both := filepath.Join(t.TempDir(), "recipients.txt")
			r1, _ := os.ReadFile(recipients)
			r2, _ := os.ReadFile(arecipients)
			os.WriteFile(both, append(r1, r2...), 0o644)
			bk.plant(attackerStore(t, "--age-identity-file", akey, "--age-recipients-file", both))
			var h repo.Head
			json.Unmarshal(bk.load(repo.HeadKey), &h)
			h.Recipients = []string{fp} // the head claims the victim's recipient alone
			forged, _ := json.Marshal(h)
			bk.put(repo.HeadKey, forged)
			refused(t, env, exitUnauthenticated, "is not authenticated")
		})
	} else {
		t.Run("snapshot planted", func(t *testing.T) {
			defer bk.reset(good)
			bk.plant(attackerStore(t))
			refused(t, env, exitUnauthenticated, "is not authenticated")
			snapRefused(t)
			got := loudly(t, env, "UNAUTHENTICATED")
			if _, err := os.Stat(filepath.Join(got, "nodes/evil/config.xml")); err != nil {
				t.Fatalf("the override did not restore the planted snapshot: %v", err)
			}
		})
	}
	t.Run("head rolled back", func(t *testing.T) {
		defer bk.reset(good)
		bk.put(repo.HeadKey, head1)
		refused(t, env, exitRollback, "rolled back")
		r := run(t, "homesnap", env, "verify", "--structure")
		if r.code != exitRollback {
			t.Fatalf("verify of a rolled-back store: exit %d; stderr:\n%s", r.code, tail(r.stderr, 2000))
		}
		got := loudly(t, env, "OLDER THAN")
		if mark, _ := os.ReadFile(filepath.Join(got, ".homesnap-home.json")); !bytes.Contains(mark, []byte(id1)) {
			t.Fatalf("the override restored another snapshot than the old head %s: %s", id1, mark)
		}
	})
	t.Run("record changed", func(t *testing.T) {
		defer bk.reset(good)
		rec := bk.load(repo.RecordKey(id3))
		changed := regexp.MustCompile(`"host":"[^"]*"`).ReplaceAll(rec, []byte(`"host":"elsewhere"`))
		if bytes.Equal(changed, rec) {
			t.Fatalf("record without a host: %s", rec)
		}
		bk.put(repo.RecordKey(id3), changed)
		refused(t, env, exitForged, "failed authentication")
	})
	t.Run("manifest layer forged", func(t *testing.T) {
		defer bk.reset(good)
		// The first snapshot's manifest is the full layer the later ones'
		// deltas apply to: make every file in it world-writable.
		key := repo.ManifestKey(id1)
		if encrypted {
			key = repo.EncryptedKey(key)
		}
		bk.put(key, forgeLayer(t, bk.load(key), identity))
		refused(t, env, exitForged, "failed authentication")
		refused(t, env, exitForged, "failed authentication", "--snapshot", id1)
	})
}

// forgeLayer rewrites a manifest with every regular file world-writable;
// an encrypted one is decrypted with identity and encrypted again to its
// public recipient, as anyone can.
func forgeLayer(t *testing.T, stored []byte, identity age.Identity) []byte {
	t.Helper()
	plain := stored
	if identity != nil {
		r, err := age.Decrypt(bytes.NewReader(stored), identity)
		if err != nil {
			t.Fatal(err)
		}
		if plain, err = io.ReadAll(r); err != nil {
			t.Fatal(err)
		}
	}
	m, err := archive.NewManifestReader(bytes.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var out bytes.Buffer
	mw, err := archive.NewManifestWriter(&out, m.Header)
	if err != nil {
		t.Fatal(err)
	}
	for {
		e, err := m.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == archive.TypeFile {
			e.Mode |= 0o666
		}
		if err := mw.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mw.Close(m.Totals.New, m.Totals.NewBytes); err != nil {
		t.Fatal(err)
	}
	if identity == nil {
		return out.Bytes()
	}
	var enc bytes.Buffer
	aw, err := age.Encrypt(&enc, identity.(*age.X25519Identity).Recipient())
	if err != nil {
		t.Fatal(err)
	}
	aw.Write(out.Bytes())
	aw.Close()
	return enc.Bytes()
}

// TestUpgradeToAuthenticated is the upgrade of a store written before
// authentication (testdata/prestore, written by the previous release),
// in the order docs/encryption.md gives: the first restore with the new release is
// refused until --allow-unauthenticated; the sidecar, holding the same
// identity, takes a full snapshot that is authenticated and marks the
// store; from then on restores need no override, and the old snapshots
// need it.
func TestUpgradeToAuthenticated(t *testing.T) {
	for _, b := range authBackends {
		t.Run(b.name, func(t *testing.T) {
			storeURL, env, w := b.setup(t)
			bucket{t, w}.plant("testdata/prestore/store")
			marker, err := os.ReadFile("testdata/prestore/store/" + repo.MarkerKey)
			if err != nil {
				t.Fatal(err)
			}
			bucket{t, w}.put(repo.MarkerKey, marker)
			key, _ := filepath.Abs("testdata/prestore/identity.txt")
			env = append(env, "HOMESNAP_STORE="+storeURL, "HOMESNAP_AGE_IDENTITY_FILE="+key, "HOMESNAP_LOG_FORMAT=json")
			old := list(t, storeURL, env)
			if len(old.ids) != 3 {
				t.Fatalf("the fixture lists %d snapshots, want 3", len(old.ids))
			}
			// 1. The init container after the upgrade: refused, then let through.
			refused(t, env, exitUnauthenticated, "is not authenticated")
			home := loudly(t, env, "UNAUTHENTICATED")
			if cfg, _ := os.ReadFile(filepath.Join(home, "jobs/a/config.xml")); !bytes.Contains(cfg, []byte("<description>b</description>")) {
				t.Fatalf("the fixture's head restored jobs/a/config.xml as %q", cfg)
			}
			// 2. The new sidecar's first snapshot: full, authenticated.
			os.WriteFile(filepath.Join(home, "jobs/a/config.xml"), []byte("<project><description>c</description></project>\n"), 0o644)
			r := run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m")
			id := ok(t, r)
			var m struct {
				Homesnap      int  `json:"homesnap"`
				Authenticated bool `json:"authenticated"`
			}
			json.Unmarshal(bucket{t, w}.load(repo.MarkerKey), &m)
			if !m.Authenticated || m.Homesnap != repo.FormatVersion {
				t.Fatalf("marker after the first authenticated snapshot: %+v", m)
			}
			var rec repo.Record
			json.Unmarshal(bucket{t, w}.load(repo.RecordKey(id)), &rec)
			if rec.NewBytes != rec.Bytes || len(rec.Manifests) > 1 || rec.Parent != old.ids[len(old.ids)-1] {
				t.Fatalf("the first authenticated snapshot is not a full one on the old head: %+v", rec)
			}
			// 3. Restores need no override any more; old snapshots do.
			want := selectedTree(t, home)
			target := t.TempDir()
			ok(t, run(t, "restore", env, "--home", target, "--timeout", "2m"))
			same(t, "restore after the upgrade", want, wholeTree(t, target))
			refused(t, env, exitUnauthenticated, "is not authenticated", "--snapshot", old.ids[0])
			loudly(t, env, "UNAUTHENTICATED", "--snapshot", old.ids[0])
		})
	}
}

// TestAuthenticatedMaintenance: everything that rewrites heads, records
// or manifests keeps them tagged: an import onto the head, consolidation,
// prune (which reparents records) and repack after each snapshot, and the
// prune command. restore --verify, which reads every record and manifest
// layer of the history through the authentication, then finds nothing
// untagged, and every such object in the bucket carries its tags.
func TestAuthenticatedMaintenance(t *testing.T) {
	testenv.Long(t, "maintains an authenticated store through the binaries")
	storeDir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "auth.key")
	os.WriteFile(keyFile, bytes.Repeat([]byte{0x5a}, 32), 0o600) // raw bytes
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_AUTH_KEY_FILE=" + keyFile, "HOMESNAP_LOG_FORMAT=json",
		"HOMESNAP_REPACK_GRACE=0", "HOMESNAP_CONSOLIDATE_MAX_ARCHIVES=2"}
	home := buildHome(t, "", 0)
	for k := range 4 {
		writeRandom(t, home, fmt.Sprintf("jobs/test/builds/%d/log", 10+k), 300<<10)
	}
	consolidated, repacked := false, false
	for round := range 6 {
		if round > 0 {
			writeRandom(t, home, fmt.Sprintf("jobs/test/builds/%d/log", 10+round%4), 300<<10)
		}
		args := []string{"--once", "--keep-last", "3", "--home", home}
		if round >= 4 { // consolidation runs where repack does not
			args = append(args, "--repack=false")
		}
		r := run(t, "snapshot", env, args...)
		ok(t, r)
		consolidated = consolidated || strings.Contains(r.stderr, "consolidated: the head points into fewer archives")
		repacked = repacked || strings.Contains(r.stderr, "repacked: the kept snapshots point into the new archive")
	}
	if !repacked {
		t.Error("no snapshot repacked")
	}
	if !consolidated {
		t.Error("no snapshot consolidated")
	}
	ok(t, run(t, "snapshot", env, "--import", operatorBackup(t, operatorHome(t)), "--import-onto-head"))
	writeRandom(t, home, "jobs/test/builds/10/log", 300<<10)
	// The import is the head now, and the home never held it: a snapshot of
	// the home replaces it only when told to (the import held no secrets/).
	if r := run(t, "snapshot", env, "--once", "--home", home, "--accept-key-change"); r.code == 0 || !strings.Contains(r.stderr, "--allow-behind") {
		t.Fatalf("a snapshot of a home behind the imported head: exit %d\n%s", r.code, tail(r.stderr, 2000))
	}
	ok(t, run(t, "snapshot", env, "--once", "--home", home, "--accept-key-change", "--allow-behind"))
	ok(t, run(t, "prune", env, "--keep-last", "2"))
	// Without the key, nothing writes to the store or restores from it.
	for _, args := range [][]string{{"prune", "--keep-last", "1"}, {"snapshot", "--once", "--home", home, "--force"}, {"restore", "--home", t.TempDir()}} {
		if r := run(t, args[0], env[:1], args[1:]...); r.code != exitUnauthenticated || !strings.Contains(r.stderr, "--auth-key-file") {
			t.Fatalf("%v on an authenticated store without the key: exit %d\n%s", args, r.code, tail(r.stderr, 2000))
		}
	}
	r := run(t, "homesnap", env, "verify")
	if r.code != 0 || strings.Contains(r.stderr, `"level":"warn"`) {
		t.Fatalf("verify after maintenance: exit %d\n%s", r.code, tail(r.stderr, 3000))
	}
	if l := list(t, storeDir, nil); len(l.ids) != 2 {
		t.Fatalf("the store keeps %d snapshots, want 2", len(l.ids))
	}
	entries, _ := os.ReadDir(filepath.Join(storeDir, "snapshots"))
	tagged := map[string]bool{}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".mac.json"); ok {
			tagged[id] = true
		}
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".json.zst"):
			if !tagged[strings.TrimSuffix(name, ".json.zst")] {
				t.Errorf("manifest %s has no tags", name)
			}
		case strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".mac.json"):
			if data, _ := os.ReadFile(filepath.Join(storeDir, "snapshots", name)); !bytes.Contains(data, []byte(`"macs":{`)) {
				t.Errorf("record %s has no tags: %s", name, data)
			}
		}
	}
	for _, k := range []string{repo.HeadKey, repo.MarkerKey} {
		if data, _ := os.ReadFile(filepath.Join(storeDir, k)); !bytes.Contains(data, []byte(`"macs":{`)) {
			t.Errorf("%s has no tags: %s", k, data)
		}
	}
}
