package crypt

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testhome"
)

func keysFor(ids ...*age.X25519Identity) Keys {
	var k Keys
	for _, id := range ids {
		k.Recipients = append(k.Recipients, id.Recipient())
		k.Identities = append(k.Identities, id)
	}
	return k
}

// snapshotWith runs the checks and one snapshot, as the snapshot command does.
func snapshotWith(t *testing.T, home string, st store.Store, k Keys) (*snapshot.Result, error) {
	t.Helper()
	setup, err := ForSnapshot(context.Background(), st, k)
	if err != nil {
		return nil, err
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	return snapshot.Snapshot(context.Background(), snapshot.Options{
		Home: testhome.Open(t, home), Store: setup.Store, Selector: sel, Log: zerolog.Nop(), Recipients: setup.Recipients,
		AllowShrink: true}) // the tests drop big files on purpose
}

func restoreWith(t *testing.T, home string, st store.Store, k Keys, id string) error {
	t.Helper()
	setup, err := ForRestore(context.Background(), st, k, id)
	if err != nil {
		return err
	}
	// Forced, and the home's mark removed after: home holds exactly the
	// snapshot's tree, whatever it held before.
	if _, err = restore.Restore(context.Background(), restore.Options{Home: testhome.Open(t, home), Store: setup.Store, Snapshot: id, Force: true, Log: zerolog.Nop()}); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(home, homemark.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func TestRotationAndMixing(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	want := func() testhome.Tree {
		tree, err := testhome.Read(home, sel.Selected)
		if err != nil {
			t.Fatal(err)
		}
		return tree
	}
	st, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()
	fpA := RecipientFingerprints([]age.Recipient{a.Recipient()})
	fpB := RecipientFingerprints([]age.Recipient{b.Recipient()})

	// Encrypting needs an identity to read the parent back.
	if _, err := snapshotWith(t, home, st, Keys{Recipients: []age.Recipient{a.Recipient()}}); err == nil || !strings.Contains(err.Error(), fpA[0]) {
		t.Fatalf("recipients without identity: %v", err)
	}
	first, err := snapshotWith(t, home, st, keysFor(a))
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := repo.LoadHead(ctx, st)
	m, _, _ := repo.LoadMarker(ctx, st)
	if strings.Join(head.Recipients, ",") != fpA[0] || m.Encryption != repo.EncryptionAge || strings.Join(m.Recipients, ",") != fpA[0] {
		t.Fatalf("head %+v, marker %+v", head, m)
	}
	testhome.Change(t, home)
	second, err := snapshotWith(t, home, st, keysFor(a)) // incremental: reads the encrypted parent
	if err != nil {
		t.Fatal(err)
	}
	if second.Totals.New >= first.Totals.New/2 {
		t.Fatalf("second snapshot wrote %d entries, first %d: not incremental", second.Totals.New, first.Totals.New)
	}
	if len(second.Manifests) != 2 { // restored below through the encrypted store
		t.Fatalf("second snapshot's manifests %v: want a delta on the first", second.Manifests)
	}

	// A plain snapshot onto the encrypted store is refused.
	if _, err := snapshotWith(t, home, st, Keys{}); !errors.Is(err, ErrMixed) {
		t.Fatalf("plain onto encrypted: %v", err)
	}

	// Rotation to b: a full snapshot, so its restore needs only b.
	third, err := snapshotWith(t, home, st, keysFor(b))
	if err != nil {
		t.Fatal(err)
	}
	if third.Totals.NewBytes != third.Totals.Bytes {
		t.Fatalf("rotated snapshot wrote %d of %d bytes: not full", third.Totals.NewBytes, third.Totals.Bytes)
	}
	target := t.TempDir()
	if err := restoreWith(t, target, st, keysFor(b), ""); err != nil {
		t.Fatal(err)
	}
	if d := testhome.Diff(want(), mustRead(t, target)); len(d) > 0 {
		t.Fatalf("restored tree differs: %v", d[:min(len(d), 5)])
	}
	// The older snapshot still needs a; b alone fails at once naming a.
	err = restoreWith(t, t.TempDir(), st, keysFor(b), second.ID)
	var ni *NoIdentityError
	if !errors.As(err, &ni) || !strings.Contains(err.Error(), fpA[0]) {
		t.Fatalf("old snapshot with the new key: %v", err)
	}
	if err := restoreWith(t, t.TempDir(), st, keysFor(a), second.ID); err != nil {
		t.Fatal(err)
	}
	// No identity: fails naming the head's recipient.
	if err := restoreWith(t, target, st, Keys{}, ""); !errors.As(err, &ni) || !strings.Contains(err.Error(), fpB[0]) {
		t.Fatalf("restore without identity: %v", err)
	}
	m, _, _ = repo.LoadMarker(ctx, st)
	if strings.Join(m.Recipients, ",") != fpA[0]+","+fpB[0] {
		t.Fatalf("marker recipients %v, want a then b", m.Recipients)
	}
	// --list sees encrypted snapshots (through the store a restore reads).
	setup, err := ForRestore(ctx, st, keysFor(b), "")
	if err != nil {
		t.Fatal(err)
	}
	h, err := repo.LoadHistory(ctx, setup.Store)
	if err != nil || len(h.Snapshots) != 3 || h.Head != third.ID {
		t.Fatalf("history: %+v %v", h, err)
	}
}

func TestMigration(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	st, _ := file.Open(t.TempDir())
	a, _ := age.GenerateX25519Identity()
	plain, err := snapshotWith(t, home, st, Keys{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshotWith(t, home, st, keysFor(a)); !errors.Is(err, ErrMixed) || !strings.Contains(err.Error(), "would encrypt them") {
		t.Fatalf("encrypted onto plain: %v", err)
	}
	k := keysFor(a)
	k.Migrate = true
	setup, err := ForSnapshot(ctx, st, k)
	if err != nil || setup.Note == "" {
		t.Fatalf("migrate: %v %+v", err, setup)
	}
	enc, err := snapshotWith(t, home, st, keysFor(a)) // the marker is switched: no flag needed any more
	if err != nil {
		t.Fatal(err)
	}
	if enc.Totals.NewBytes != enc.Totals.Bytes {
		t.Fatal("the first encrypted snapshot is not full")
	}
	// The old plain snapshot is refused by a restore holding the
	// identity (a bucket writer could have planted it), and restorable
	// with a note when the admin allows it.
	if _, err := ForRestore(ctx, st, keysFor(a), plain.ID); !errors.Is(err, ErrPlaintext) {
		t.Fatalf("plain snapshot in a migrated store: %v, want ErrPlaintext", err)
	}
	allow := keysFor(a)
	allow.AllowPlaintext = true
	setup, err = ForRestore(ctx, st, allow, plain.ID)
	if err != nil || setup.Note == "" {
		t.Fatalf("plain snapshot in a migrated store, allowed: %v %+v", err, setup)
	}
	if err := restoreWith(t, t.TempDir(), st, allow, plain.ID); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, dir string) testhome.Tree {
	t.Helper()
	tree, err := testhome.Read(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestRangedRestoreFetchesFewBytes restores a snapshot that needs two small
// files of an older, large encrypted archive: only the chunks that hold
// them are downloaded, not the archive.
func TestRangedRestoreFetchesFewBytes(t *testing.T) {
	home := t.TempDir()
	write := func(rel string, data []byte) {
		p := filepath.Join(home, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("jobs/a/config.xml", []byte("<project/>\n"))
	write("jobs/b/builds/1/log", random(t, 24<<20)) // incompressible
	write("secrets/master.key", random(t, 256))
	dir := t.TempDir()
	fs, _ := file.Open(dir)
	c := &perKey{Store: fs, n: map[string]int64{}}
	a, _ := age.GenerateX25519Identity()
	first, err := snapshotWith(t, home, c, keysFor(a))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(home, "jobs/b/builds/1/log"))
	write("jobs/a/config.xml", []byte("<project>changed</project>\n"))
	if _, err := snapshotWith(t, home, c, keysFor(a)); err != nil {
		t.Fatal(err)
	}
	c.reset()
	target := t.TempDir()
	if err := restoreWith(t, target, c, keysFor(a), ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(target, "secrets/master.key")); len(got) != 256 {
		t.Fatal("master.key not restored")
	}
	key := repo.EncryptedKey(repo.ArchiveKey(first.ID))
	fi, err := os.Stat(filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	fetched := c.get(key)
	t.Logf("fetched %d of %d bytes of %s", fetched, fi.Size(), key)
	if fetched == 0 || fetched > fi.Size()/10 {
		t.Fatalf("restore fetched %d bytes of the %d-byte encrypted archive %s; want a small fraction", fetched, fi.Size(), key)
	}
}

// perKey counts the bytes read from each object.
type perKey struct {
	store.Store
	mu sync.Mutex
	n  map[string]int64
}

func (c *perKey) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := c.Store.Get(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return &keyBody{rc, c, key}, nil
}

func (c *perKey) get(key string) int64 { c.mu.Lock(); defer c.mu.Unlock(); return c.n[key] }
func (c *perKey) reset()               { c.mu.Lock(); defer c.mu.Unlock(); clear(c.n) }

type keyBody struct {
	io.ReadCloser
	c   *perKey
	key string
}

func (b *keyBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.n[b.key] += int64(n)
	b.c.mu.Unlock()
	return n, err
}

// TestReencrypt rotates every snapshot of a store to a new key: afterwards
// the new key alone restores each of them, and the old one none.
func TestReencrypt(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	st, _ := file.Open(t.TempDir())
	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()
	first, err := snapshotWith(t, home, st, keysFor(a))
	if err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, home)
	second, err := snapshotWith(t, home, st, keysFor(a))
	if err != nil {
		t.Fatal(err)
	}
	// The old key alone cannot check the rewritten objects: refused.
	if _, err := Reencrypt(ctx, st, Keys{Recipients: []age.Recipient{b.Recipient()}, Identities: []age.Identity{a}}, nil); err == nil {
		t.Fatal("re-encryption without a new identity was accepted")
	}
	res, err := Reencrypt(ctx, st, Keys{Recipients: []age.Recipient{b.Recipient()}, Identities: []age.Identity{a, b}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 4 || res.Plain != 0 {
		t.Fatalf("rewrote %d objects (%d plain), want 4", res.Objects, res.Plain)
	}
	for _, id := range []string{first.ID, second.ID} {
		if err := restoreWith(t, t.TempDir(), st, keysFor(b), id); err != nil {
			t.Fatalf("snapshot %s with the new key: %v", id, err)
		}
		var ni *NoIdentityError
		if err := restoreWith(t, t.TempDir(), st, keysFor(a), id); !errors.As(err, &ni) {
			t.Fatalf("snapshot %s with the old key: %v", id, err)
		}
	}
	head, _, _ := repo.LoadHead(ctx, st)
	fpB := RecipientFingerprints([]age.Recipient{b.Recipient()})
	if !slices.Equal(head.Recipients, fpB) {
		t.Fatalf("head recipients %v, want %v", head.Recipients, fpB)
	}
	// The next snapshot with the new key is incremental again.
	testhome.Change(t, home)
	third, err := snapshotWith(t, home, st, keysFor(b))
	if err != nil {
		t.Fatal(err)
	}
	if third.Totals.New >= first.Totals.New/2 {
		t.Fatalf("snapshot after re-encryption wrote %d entries of %d: not incremental", third.Totals.New, first.Totals.New)
	}
}
