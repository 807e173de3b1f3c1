package crypt

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

// counting counts the bytes read from the wrapped store's Get bodies: what
// a restore downloads.
type counting struct {
	store.Store
	n atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := c.Store.Get(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return &countedBody{rc, &c.n}, nil
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type fixture struct {
	dir   string
	plain *counting
	id    *age.X25519Identity
	enc   *Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	fs, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Store: fs}
	rs := []age.Recipient{id.Recipient()}
	return &fixture{dir: dir, plain: c, id: id, enc: Wrap(c, rs, []age.Identity{id}, RecipientFingerprints(rs))}
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func get(t *testing.T, s store.Store, key string, off, length int64) ([]byte, error) {
	t.Helper()
	rc, err := s.Get(context.Background(), key, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestRoundTripWholeAndRanged(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for _, size := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 3 * chunkSize, 200<<10 + 5} {
		data := random(t, size)
		key := repo.ArchiveKey("20261202T111400.000Z-a1b2c3")
		if err := f.enc.Put(ctx, key, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		// Stored encrypted under the .age name only; age itself decrypts it.
		stored, err := os.ReadFile(filepath.Join(f.dir, key+".age"))
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if _, err := os.Stat(filepath.Join(f.dir, key)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("size %d: a plain %s exists next to the encrypted one", size, key)
		}
		if size > 64 && bytes.Contains(stored, data[:64]) {
			t.Fatalf("size %d: plaintext visible in the stored object", size)
		}
		r, err := age.Decrypt(bytes.NewReader(stored), f.id)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(r); !bytes.Equal(got, data) {
			t.Fatalf("size %d: age.Decrypt of the stored object differs", size)
		}
		if got, err := get(t, f.enc, key, 0, -1); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: whole read: %v (got %d bytes)", size, err, len(got))
		}
		for _, off := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 7, 2*chunkSize + 1, size - 1, size} {
			for _, length := range []int{-1, 0, 1, 100, chunkSize, chunkSize + 1, 3 * chunkSize} {
				if off < 0 || off > size {
					continue
				}
				want := data[off:]
				if length >= 0 && length < len(want) {
					want = want[:length]
				}
				got, err := get(t, f.enc, key, int64(off), int64(length))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("size %d, range %d+%d: %v (got %d bytes, want %d)", size, off, length, err, len(got), len(want))
				}
			}
		}
	}
}

func TestRangedReadFetchesOnlyItsChunks(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	const size = 8 << 20
	data := random(t, size)
	key := repo.ArchiveKey("20261202T111400.000Z-a1b2c3")
	if err := f.enc.Put(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	off, length := int64(5<<20+123), int64(1000)
	got, err := get(t, f.enc, key, off, length)
	if err != nil || !bytes.Equal(got, data[off:off+length]) {
		t.Fatalf("ranged read: %v", err)
	}
	// The header probe plus the one or two chunks that hold the range.
	if n := f.plain.n.Load(); n > headerProbe+2*sealedSize {
		t.Fatalf("a %d-byte read of an %d-byte archive fetched %d bytes", length, size, n)
	}
	// Later reads reuse the opened header: only their chunks.
	f.plain.n.Store(0)
	off = 3 * chunkSize // chunk-aligned: exactly two chunks
	if _, err := get(t, f.enc, key, off, 2*chunkSize); err != nil {
		t.Fatal(err)
	}
	if n := f.plain.n.Load(); n != 2*sealedSize {
		t.Fatalf("a two-chunk read fetched %d bytes, want %d", n, 2*sealedSize)
	}
}

func TestWrongIdentityNamesFingerprints(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	key := repo.ManifestKey("20261202T111400.000Z-a1b2c3")
	if err := f.enc.Put(ctx, key, bytes.NewReader([]byte("manifest"))); err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	need := RecipientFingerprints([]age.Recipient{f.id.Recipient()})
	wrong := Wrap(f.plain, nil, []age.Identity{other}, need)
	for _, rng := range [][2]int64{{0, -1}, {1, 3}} {
		_, err := get(t, wrong, key, rng[0], rng[1])
		var ni *NoIdentityError
		if !errors.As(err, &ni) {
			t.Fatalf("range %v: want NoIdentityError, got %v", rng, err)
		}
		msg := err.Error()
		for _, want := range []string{need[0], IdentityFingerprints([]age.Identity{other})[0], key + ".age"} { // the CLI adds how to pass one (cli/hints.go)
			if !strings.Contains(msg, want) {
				t.Errorf("message lacks %q: %s", want, msg)
			}
		}
		if strings.Contains(msg, "AGE-SECRET-KEY") || strings.Contains(msg, f.id.Recipient().String()) {
			t.Errorf("message shows a key: %s", msg)
		}
	}
	// No identity at all: the same message.
	if _, err := get(t, Wrap(f.plain, nil, nil, need), key, 0, -1); err == nil || !strings.Contains(err.Error(), need[0]) {
		t.Fatalf("without identity: %v", err)
	}
}

func TestTamperedCiphertextNamesObject(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	key := repo.ArchiveKey("20261202T111400.000Z-a1b2c3")
	data := random(t, 5*chunkSize)
	if err := f.enc.Put(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.dir, key+".age")
	good, _ := os.ReadFile(p)
	stored := bytes.Clone(good)
	stored[len(stored)-sealedSize-100] ^= 1 // inside chunk 3 of 0..4
	os.WriteFile(p, stored, 0o644)
	for _, rng := range [][2]int64{{0, -1}, {3*chunkSize + 10, 100}, {3 * chunkSize, -1}} {
		_, err := get(t, Wrap(f.plain, nil, []age.Identity{f.id}, nil), key, rng[0], rng[1])
		if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), key+".age") {
			t.Fatalf("range %v: want a tamper error naming %s.age, got %v", rng, key, err)
		}
	}
	// Chunks before the damage still read: the damage is local.
	if got, err := get(t, f.enc, key, 0, chunkSize); err != nil || !bytes.Equal(got, data[:chunkSize]) {
		t.Fatalf("undamaged chunk: %v", err)
	}
	// A truncated object is refused, not read short.
	os.WriteFile(p, good[:len(good)-sealedSize], 0o644)
	if _, err := get(t, Wrap(f.plain, nil, []age.Identity{f.id}, nil), key, 2*chunkSize, -1); !errors.Is(err, ErrTampered) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestSmallObjectsListDelete(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	key := "snapshots/record.json"
	v, err := store.CompareAndSwap(ctx, f.enc, key, []byte(`{"x":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	data, v2, err := f.enc.Load(ctx, key)
	if err != nil || string(data) != `{"x":1}` || v2 != v {
		t.Fatalf("load: %q %v", data, err)
	}
	raw, _, _ := f.plain.Load(ctx, key+".age")
	if bytes.Contains(raw, []byte(`"x"`)) {
		t.Fatal("record stored in clear")
	}
	// The marker and head are not content: stored as given.
	if err := f.enc.Put(ctx, repo.HeadKey, strings.NewReader("{}")); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := f.plain.Load(ctx, repo.HeadKey); err != nil || string(raw) != "{}" {
		t.Fatalf("head: %q %v", raw, err)
	}
	var keys []string
	f.enc.List(ctx, "", func(o store.Object) error { keys = append(keys, o.Key); return nil })
	if strings.Join(keys, " ") != "head.json snapshots/record.json" {
		t.Fatalf("list: %v", keys)
	}
	if err := f.enc.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.plain.Load(ctx, key+".age"); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("after delete: %v", err)
	}
}
