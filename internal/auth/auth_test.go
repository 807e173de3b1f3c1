package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

const (
	id1 = "20261201T100000.000Z-aaaaaa"
	id2 = "20261201T110000.000Z-bbbbbb"
	id3 = "20261201T120000.000Z-cccccc"
	id4 = "20261201T130000.000Z-dddddd"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func key(t *testing.T, seed byte) auth.Key {
	t.Helper()
	k, err := auth.ParseKeyFile(bytes.Repeat([]byte{seed}, 32), "test")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseKeyFile(t *testing.T) {
	hexKey := []byte(strings.Repeat("ab", 32) + "\n")
	raw := bytes.Repeat([]byte{0xab}, 32)
	a, err := auth.ParseKeyFile(hexKey, "hex")
	if err != nil {
		t.Fatal(err)
	}
	b, err := auth.ParseKeyFile(raw, "raw")
	if err != nil || a.ID != b.ID || !strings.HasPrefix(a.ID, "key-") {
		t.Fatalf("the same 32 bytes as hex and raw: %v %q %q", err, a.ID, b.ID)
	}
	for _, short := range [][]byte{[]byte(strings.Repeat("ab", 16)), bytes.Repeat([]byte{1}, 31), nil} {
		if _, err := auth.ParseKeyFile(short, "short"); !errors.Is(err, auth.ErrBadKey) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("%d bytes: %v, want ErrBadKey saying how to make one", len(short), err)
		}
	}
}

// TestJSONObjects: the marker, the head and records come back as written
// through a Store with a key, and are refused when untagged, changed,
// moved to another key or tagged by another key only.
func TestJSONObjects(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	k1, k2 := key(t, 1), key(t, 2)
	st := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k1}})
	head := []byte(`{"snapshot":"` + id1 + `","seq":1}`)
	if _, err := store.CompareAndSwap(ctx, st, repo.HeadKey, head, ""); err != nil {
		t.Fatal(err)
	}
	// A retried write that was applied is recognised: Load gives back the
	// writer's bytes.
	if _, err := store.CompareAndSwap(ctx, st, repo.HeadKey, head, ""); err != nil {
		t.Fatalf("retried CAS: %v", err)
	}
	got, _, err := st.Load(ctx, repo.HeadKey)
	if err != nil || !bytes.Equal(got, head) {
		t.Fatalf("load: %s %v", got, err)
	}
	stored, _, _ := inner.Load(ctx, repo.HeadKey)
	var h struct {
		Snapshot string            `json:"snapshot"`
		MACs     map[string]string `json:"macs"`
	}
	if err := json.Unmarshal(stored, &h); err != nil || h.Snapshot != id1 || len(h.MACs[k1.ID]) != 64 {
		t.Fatalf("stored head is not plain JSON with its tag: %s", stored)
	}
	// Several keys: each verifies alone.
	both := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k1, k2}})
	rec := []byte(`{"id":"` + id2 + `","seq":2}`)
	if err := both.Put(ctx, repo.RecordKey(id2), bytes.NewReader(rec)); err != nil {
		t.Fatal(err)
	}
	only2 := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k2}})
	if got, _, err := only2.Load(ctx, repo.RecordKey(id2)); err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("second key: %s %v", got, err)
	}
	// Attacks.
	put := func(k string, data []byte) {
		if err := inner.Put(ctx, k, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		key  string
		data []byte
		want error
	}{
		{"untagged", repo.HeadKey, []byte(`{"snapshot":"` + id3 + `"}`), auth.ErrUnauthenticated},
		{"changed", repo.HeadKey, bytes.Replace(stored, []byte(id1), []byte(id3), 1), auth.ErrForged},
		{"tag of another object", repo.RecordKey(id1), bytes.Replace(stored, []byte(id1), []byte(id1), 1), auth.ErrForged},
		{"tags emptied", repo.HeadKey, []byte(`{"snapshot":"` + id3 + `","macs":{}}`), auth.ErrUnauthenticated},
		{"garbage tag", repo.HeadKey, []byte(`{"snapshot":"` + id3 + `","macs":{"` + k1.ID + `":"zz"}}`), auth.ErrForged},
	}
	for _, c := range cases {
		put(c.key, c.data)
		if _, _, err := st.Load(ctx, c.key); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v, want %v naming %s", c.name, err, c.want, c.key)
		}
	}
	other := auth.Wrap(inner, auth.Options{Keys: []auth.Key{key(t, 3)}})
	if _, _, err := other.Load(ctx, repo.RecordKey(id2)); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), k1.ID) {
		t.Errorf("tagged by other keys: %v, want ErrUnauthenticated naming the keys", err)
	}
	// Legacy lets an untagged object through, never a forged one; Allow
	// lets both through, and each is reported.
	var warned []error
	warn := func(err error) { warned = append(warned, err) }
	fresh := newStore(t) // a store from before authentication
	legacy := auth.Wrap(fresh, auth.Options{Keys: []auth.Key{k1}, Legacy: true, Warn: warn})
	fresh.Put(ctx, repo.HeadKey, strings.NewReader(`{"snapshot":"`+id3+`"}`))
	fresh.Put(ctx, repo.RecordKey(id3), strings.NewReader(`{"id":"`+id3+`"}`))
	if _, _, err := legacy.Load(ctx, repo.HeadKey); err != nil || len(warned) != 1 {
		t.Errorf("legacy, untagged: %v, %d warnings", err, len(warned))
	}
	// Once the store holds a tagged record, an untagged head is planted.
	legacy = auth.Wrap(inner, auth.Options{Keys: []auth.Key{k1}, Legacy: true, Warn: warn})
	put(repo.HeadKey, []byte(`{"snapshot":"`+id3+`"}`))
	if _, _, err := legacy.Load(ctx, repo.HeadKey); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), id2) {
		t.Errorf("legacy, untagged head in a store with a tagged record: %v", err)
	}
	put(repo.HeadKey, bytes.Replace(stored, []byte(id1), []byte(id3), 1))
	if _, _, err := legacy.Load(ctx, repo.HeadKey); !errors.Is(err, auth.ErrForged) {
		t.Errorf("legacy, forged: %v", err)
	}
	allow := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k1}, Allow: true, Warn: warn})
	if _, _, err := allow.Load(ctx, repo.HeadKey); err != nil || len(warned) != 2 {
		t.Errorf("allowed, forged: %v, %d warnings", err, len(warned))
	}
}

// TestManifestLayers: a manifest's tags sit beside it, cover its stored
// bytes under its key, are checked when the last byte is read, and go
// with it when it is deleted.
func TestManifestLayers(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	k := key(t, 1)
	st := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}})
	mkey := repo.EncryptedKey(repo.ManifestKey(id1))
	body := bytes.Repeat([]byte("manifest bytes "), 10000)
	if err := st.Put(ctx, mkey, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	tags, _, err := inner.Load(ctx, "snapshots/"+id1+".mac.json")
	if err != nil || !bytes.Contains(tags, []byte(mkey)) {
		t.Fatalf("tags object: %s %v", tags, err)
	}
	readAll := func(s store.Store, k string) ([]byte, error) {
		rc, err := s.Get(ctx, k, 0, -1)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	if got, err := readAll(st, mkey); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	if got, _, err := st.Load(ctx, mkey); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("load back: %d bytes, %v", len(got), err)
	}
	// Changed bytes fail at the end of the stream.
	forged := bytes.Clone(body)
	forged[len(forged)-1] ^= 1
	inner.Put(ctx, mkey, bytes.NewReader(forged))
	if _, err := readAll(st, mkey); !errors.Is(err, auth.ErrForged) {
		t.Errorf("forged manifest: %v", err)
	}
	// The right bytes under another snapshot's key (its tags copied too).
	inner.Put(ctx, mkey, bytes.NewReader(body))
	other := repo.EncryptedKey(repo.ManifestKey(id2))
	inner.Put(ctx, other, bytes.NewReader(body))
	inner.Put(ctx, "snapshots/"+id2+".mac.json", bytes.NewReader(tags))
	if _, err := readAll(st, other); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("manifest moved to another snapshot: %v", err)
	}
	// A plain manifest planted beside: its key differs from the tagged one.
	plain := repo.ManifestKey(id1)
	inner.Put(ctx, plain, bytes.NewReader(body))
	if _, err := readAll(st, plain); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("plain manifest planted: %v", err)
	}
	// Legacy never lets an untagged manifest through.
	legacy := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}, Legacy: true})
	if _, err := readAll(legacy, other); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("legacy, untagged manifest: %v", err)
	}
	// Ranged reads pass (an age header): nothing is restored from them.
	if rc, err := st.Get(ctx, mkey, 0, 10); err != nil {
		t.Errorf("ranged read: %v", err)
	} else {
		rc.Close()
	}
	if err := st.Delete(ctx, mkey); err != nil {
		t.Fatal(err)
	}
	if _, _, err := inner.Load(ctx, "snapshots/"+id1+".mac.json"); !errors.Is(err, store.ErrNotExist) {
		t.Errorf("tags left after the manifest was deleted: %v", err)
	}
}

// TestCheckRollback: records prove a head old when they were written over
// a newer head, and an uncommitted snapshot on the head proves nothing.
func TestCheckRollback(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	k := key(t, 1)
	st := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}})
	rec := func(s store.Store, id, parent string, seq int64) {
		data, _ := json.Marshal(repo.Record{ID: id, Parent: parent, Seq: seq, Time: time.Now()})
		if err := s.Put(ctx, repo.RecordKey(id), bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	rec(st, id1, "", 1)
	rec(st, id2, id1, 2)
	h1 := &repo.Head{Snapshot: id1, Seq: 1}
	h2 := &repo.Head{Snapshot: id2, Parent: id1, Seq: 2}
	if err := auth.CheckRollback(ctx, st, h1); err != nil {
		t.Errorf("a snapshot on the head that may not be committed: %v", err)
	}
	rec(st, id3, id2, 3)
	if err := auth.CheckRollback(ctx, st, h1); !errors.Is(err, auth.ErrRollback) || !strings.Contains(err.Error(), id3) {
		t.Errorf("two back: %v", err)
	}
	if err := auth.CheckRollback(ctx, st, &repo.Head{Snapshot: id3, Parent: id2, Seq: 3}); err != nil {
		t.Errorf("the newest head: %v", err)
	}
	// A lost race: another snapshot on id1 committed as id2's sibling.
	rec(st, id4, id1, 2)
	if err := auth.CheckRollback(ctx, st, h2); err != nil {
		// id3 (seq 3, parent id2) was taken on h2: not proof.
		t.Errorf("head h2 with a record on it: %v", err)
	}
	// Untagged records prove nothing.
	inner.Put(ctx, repo.RecordKey(id4), strings.NewReader(`{"id":"`+id4+`","seq":99}`))
	if err := auth.CheckRollback(ctx, st, &repo.Head{Snapshot: id3, Parent: id2, Seq: 3}); err != nil {
		t.Errorf("a planted record: %v", err)
	}
}

// TestNeverRetagsWhatItLetThrough: a record read without authentication
// (Legacy's untagged, Allow's forged) is never tagged when written back:
// without the override the write fails naming it, with it the record is
// written as given, untagged. A record that verified is tagged again.
func TestNeverRetagsWhatItLetThrough(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	k := key(t, 1)
	tagged := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}})
	rec := func(id, host string) []byte { return []byte(`{"id":"` + id + `","host":"` + host + `"}`) }
	if err := tagged.Put(ctx, repo.RecordKey(id1), bytes.NewReader(rec(id1, "a"))); err != nil {
		t.Fatal(err)
	}
	inner.Put(ctx, repo.RecordKey(id2), bytes.NewReader(rec(id2, "planted")))
	var warned []error
	for _, o := range []auth.Options{{Legacy: true}, {Allow: true}} {
		o.Keys, o.Warn = []auth.Key{k}, func(err error) { warned = append(warned, err) }
		st := auth.Wrap(inner, o)
		for _, id := range []string{id1, id2} {
			if _, _, err := st.Load(ctx, repo.RecordKey(id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Put(ctx, repo.RecordKey(id1), bytes.NewReader(rec(id1, "b"))); err != nil {
			t.Errorf("%+v: rewriting an authenticated record: %v", o, err)
		}
		err := st.Put(ctx, repo.RecordKey(id2), bytes.NewReader(rec(id2, "reparented")))
		stored, _, _ := inner.Load(ctx, repo.RecordKey(id2))
		if bytes.Contains(stored, []byte(`"macs"`)) {
			t.Fatalf("%+v: a record read unauthenticated was tagged: %s", o, stored)
		}
		if o.Allow {
			if err != nil || !bytes.Contains(stored, []byte("reparented")) {
				t.Errorf("with the override: %v, stored %s", err, stored)
			}
		} else if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), repo.RecordKey(id2)) || !strings.Contains(err.Error(), "--allow-unauthenticated") {
			t.Errorf("without the override: %v, want ErrUnauthenticated naming the record and the override", err)
		}
	}
	if _, _, err := tagged.Load(ctx, repo.RecordKey(id1)); err != nil {
		t.Errorf("the authenticated record rewritten: %v", err)
	}
	if _, _, err := tagged.Load(ctx, repo.RecordKey(id2)); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("the planted record after both: %v, want still unauthenticated", err)
	}
}

// TestStoresAreBound is issue 31 item 4 on the store layer: two stores
// tagged with the same key have identities, and an object copied from
// one into the other (a record, a head, a manifest layer with its tags)
// is refused as forged, naming both identities. A store from before
// identities (format 3) reads as before; Bind gives it one, after which
// its own format 3 objects still verify and another store's do not, and
// its old marker put back is refused while a bound record remains.
func TestStoresAreBound(t *testing.T) {
	ctx := context.Background()
	k := key(t, 1)
	newAuth := func(inner store.Store) *auth.Store { return auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}}) }
	rec := func(id string) []byte { return []byte(`{"id":"` + id + `","seq":1}`) }
	manifest := []byte("a manifest layer's stored bytes")
	fill := func(st store.Store, id string) {
		t.Helper()
		if err := st.Put(ctx, repo.RecordKey(id), bytes.NewReader(rec(id))); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, repo.ManifestKey(id), bytes.NewReader(manifest)); err != nil {
			t.Fatal(err)
		}
		if _, err := store.CompareAndSwap(ctx, st, repo.HeadKey, []byte(`{"snapshot":"`+id+`","seq":1}`), ""); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func(st store.Store, id string) error {
		if _, _, err := repo.LoadHead(ctx, st); err != nil {
			return err
		}
		if _, _, err := st.Load(ctx, repo.RecordKey(id)); err != nil {
			return err
		}
		rc, err := st.Get(ctx, repo.ManifestKey(id), 0, -1)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		return err
	}
	copyAll := func(from, to store.Store, id string) {
		for _, key := range []string{repo.HeadKey, repo.RecordKey(id), repo.ManifestKey(id), repo.ManifestMACKey(repo.ManifestKey(id))} {
			data, _, err := from.Load(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			to.Put(ctx, key, bytes.NewReader(data))
		}
	}
	markerID := func(inner store.Store) string {
		m, _, err := repo.LoadMarker(ctx, inner)
		if err != nil || m == nil {
			t.Fatalf("marker: %+v %v", m, err)
		}
		return m.ID
	}

	// Two new stores, one key.
	innerA, innerB := newStore(t), newStore(t)
	a, b := newAuth(innerA), newAuth(innerB)
	for _, st := range []store.Store{a, b} {
		if err := repo.EnsureMarker(ctx, st); err != nil {
			t.Fatal(err)
		}
		if err := repo.MarkAuthenticated(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	idA, idB := markerID(innerA), markerID(innerB)
	if !repo.IsStoreID(idA) || !repo.IsStoreID(idB) || idA == idB {
		t.Fatalf("store identities %q and %q", idA, idB)
	}
	fill(a, id1)
	fill(b, id2)
	if err := readAll(newAuth(innerA), id1); err != nil {
		t.Fatalf("a bound store's own objects: %v", err)
	}
	copyAll(innerB, innerA, id2)
	for _, key := range []string{repo.HeadKey, repo.RecordKey(id2)} {
		if _, _, err := newAuth(innerA).Load(ctx, key); !errors.Is(err, auth.ErrForged) || !strings.Contains(err.Error(), idB) || !strings.Contains(err.Error(), idA) {
			t.Errorf("%s copied from another store: %v, want ErrForged naming both identities", key, err)
		}
	}
	if _, err := newAuth(innerA).Get(ctx, repo.ManifestKey(id2), 0, -1); !errors.Is(err, auth.ErrForged) {
		t.Errorf("a manifest layer copied from another store: %v, want ErrForged", err)
	}

	// A store from before identities: format 3, tags without one.
	innerC := newStore(t)
	put := func(inner store.Store, key, data string) { inner.Put(ctx, key, strings.NewReader(data)) }
	legacyKey := func(inner store.Store, data string) {
		// What a format 3 homesnap wrote: tags of the first domain.
		put(inner, repo.MarkerKey, data)
	}
	legacyKey(innerC, `{"homesnap":3,"authenticated":true}`)
	c := newAuth(innerC)
	// Sign the format 3 marker the way format 3 did: the marker without
	// an identity is signed under the first domain.
	if _, err := repo.SaveMarker(ctx, c, &repo.Marker{Homesnap: 3, Authenticated: true}, versionOf(t, innerC)); err != nil {
		t.Fatal(err)
	}
	fill(c, id3)
	old, _, _ := innerC.Load(ctx, repo.MarkerKey)
	if err := readAll(newAuth(innerC), id3); err != nil {
		t.Fatalf("a format 3 store: %v", err)
	}
	// Another format 3 store with the same key, whose objects are spliced
	// in after the binding.
	innerD := newStore(t)
	legacyKey(innerD, `{"homesnap":3,"authenticated":true}`)
	d := newAuth(innerD)
	if _, err := repo.SaveMarker(ctx, d, &repo.Marker{Homesnap: 3, Authenticated: true}, versionOf(t, innerD)); err != nil {
		t.Fatal(err)
	}
	fill(d, id4)

	bound, err := newAuth(innerC).Bind(ctx)
	if err != nil || !bound {
		t.Fatalf("bind: %v %v", bound, err)
	}
	m, _, _ := repo.LoadMarker(ctx, innerC)
	if m.Homesnap != repo.FormatVersion || !repo.IsStoreID(m.ID) || len(m.LegacyTags) != 3 || !m.Authenticated {
		t.Fatalf("marker after binding: %+v", m)
	}
	if again, err := newAuth(innerC).Bind(ctx); again || err != nil {
		t.Errorf("binding a bound store: %v %v", again, err)
	}
	if err := readAll(newAuth(innerC), id3); err != nil {
		t.Fatalf("a bound store's objects from before its identity: %v", err)
	}
	copyAll(innerD, innerC, id4)
	if _, _, err := newAuth(innerC).Load(ctx, repo.RecordKey(id4)); !errors.Is(err, auth.ErrForged) || !strings.Contains(err.Error(), "before this store got its identity") {
		t.Errorf("a format 3 record of another store after the binding: %v, want ErrForged", err)
	}
	if rc, err := newAuth(innerC).Get(ctx, repo.ManifestKey(id4), 0, -1); err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, auth.ErrForged) {
			t.Errorf("a format 3 manifest layer of another store after the binding: %v, want ErrForged at its end", err)
		}
	}
	// A new snapshot is tagged for the identity; then the old marker put
	// back is refused.
	if err := newAuth(innerC).Put(ctx, repo.RecordKey(id1), bytes.NewReader(rec(id1))); err != nil {
		t.Fatal(err)
	}
	put(innerC, repo.MarkerKey, string(old))
	if err := readAll(newAuth(innerC), id4); !errors.Is(err, auth.ErrForged) || !strings.Contains(err.Error(), "put back the marker") {
		t.Errorf("the format 3 marker put back over a bound store: %v, want ErrForged", err)
	}
}

func versionOf(t *testing.T, s store.Store) store.Version {
	t.Helper()
	_, v, err := s.Load(context.Background(), repo.MarkerKey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUnverifiedHeadLosesItsCount: a head let through unverified (an
// untagged one under Legacy, any under Allow) keeps its snapshot and
// parent but not its commit count, so the next snapshot is a full one and
// counts anew; a verified head keeps its count. Fails on the main before
// issue 31 item 6: the count of a store written without a key was
// trusted, and its untagged manifest then refused.
func TestUnverifiedHeadLosesItsCount(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	k1 := key(t, 1)
	inner.Put(ctx, repo.HeadKey, strings.NewReader(`{"snapshot":"`+id2+`","parent":"`+id1+`","seq":5}`))
	for _, o := range []auth.Options{{Keys: []auth.Key{k1}, Legacy: true}, {Keys: []auth.Key{k1}, Allow: true}} {
		head, err := loadHead(ctx, auth.Wrap(inner, o))
		if err != nil || head == nil || head.Snapshot != id2 || head.Parent != id1 || head.Seq != 0 {
			t.Errorf("legacy %v, allow %v: head %+v (%v), want snapshot %s, parent %s and no seq", o.Legacy, o.Allow, head, err, id2, id1)
		}
	}
	tagged := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k1}})
	_, v, _ := inner.Load(ctx, repo.HeadKey)
	data, _ := json.Marshal(repo.Head{Snapshot: id2, Parent: id1, Seq: 5})
	if _, err := tagged.Swap(ctx, repo.HeadKey, data, v); err != nil {
		t.Fatal(err)
	}
	if head, err := loadHead(ctx, tagged); err != nil || head.Seq != 5 {
		t.Errorf("a verified head: %+v (%v), want seq 5", head, err)
	}
	// Under Allow, a head tagged by another key is unverified too.
	other := auth.Wrap(inner, auth.Options{Keys: []auth.Key{key(t, 2)}, Allow: true})
	if head, err := loadHead(ctx, other); err != nil || head.Seq != 0 {
		t.Errorf("a head of another key, allowed: %+v (%v), want no seq", head, err)
	}
}

// loadHead reads the head as every command does, without the marker.
func loadHead(ctx context.Context, st store.Store) (*repo.Head, error) {
	data, _, err := st.Load(ctx, repo.HeadKey)
	if err != nil {
		return nil, err
	}
	var h repo.Head
	return &h, json.Unmarshal(data, &h)
}

// TestForgedManifestYieldsNoByte: a manifest whose tag does not match is
// refused by Get itself, before the caller has read a byte of it, so no
// file it lists is staged. A small one is read once and held; a large one
// is read twice, and a replacement between the reads still fails at the
// end of the stream. The override still reads a forged one. Fails on the
// main before issue 31: Get returned the forged manifest's bytes and
// judged its tag only at the end.
func TestForgedManifestYieldsNoByte(t *testing.T) {
	ctx := context.Background()
	k := key(t, 1)
	for _, c := range []struct {
		name string
		size int
		gets int // of the genuine manifest
	}{{"small", 300 << 10, 1}, {"large", 20 << 20, 2}} {
		t.Run(c.name, func(t *testing.T) {
			inner := newStore(t)
			mkey := repo.ManifestKey(id1)
			body := bytes.Repeat([]byte("manifest line\n"), c.size/14)
			if err := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}}).Put(ctx, mkey, bytes.NewReader(body)); err != nil {
				t.Fatal(err)
			}
			forged := bytes.Clone(body)
			forged[len(forged)/2] ^= 1
			race := &swapOnSecondGet{Store: inner, key: mkey, data: forged}
			st := auth.Wrap(race, auth.Options{Keys: []auth.Key{k}})

			rc, err := st.Get(ctx, mkey, 0, -1)
			if err != nil {
				t.Fatalf("Get of the genuine manifest: %v", err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			switch {
			case c.gets == 1 && (err != nil || !bytes.Equal(got, body)):
				t.Errorf("a small manifest held from its check: %d bytes, %v", len(got), err)
			case c.gets == 2 && !errors.Is(err, auth.ErrForged):
				t.Errorf("a large manifest replaced after its check: %v, want ErrForged at the end", err)
			}
			if race.gets != c.gets {
				t.Errorf("the manifest was read %d times, want %d", race.gets, c.gets)
			}

			inner.Put(ctx, mkey, bytes.NewReader(forged))
			if rc, err := st.Get(ctx, mkey, 0, -1); !errors.Is(err, auth.ErrForged) || !strings.Contains(err.Error(), mkey) {
				if rc != nil {
					rc.Close()
				}
				t.Fatalf("Get of a forged manifest: %v, want ErrForged naming %s before any byte", err, mkey)
			}
			var warned int
			allow := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}, Allow: true, Warn: func(error) { warned++ }})
			if rc, err := allow.Get(ctx, mkey, 0, -1); err != nil {
				t.Errorf("allowed, forged: %v", err)
			} else if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, forged) || warned == 0 {
				t.Errorf("allowed, forged: %d bytes, %v, %d warnings", len(got), err, warned)
			}
		})
	}
}

// swapOnSecondGet replaces key's content with data once it has been read
// once: a bucket writer racing the reader.
type swapOnSecondGet struct {
	store.Store
	key  string
	data []byte
	gets int
}

func (s *swapOnSecondGet) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if key == s.key {
		if s.gets++; s.gets == 2 {
			if err := s.Store.Put(ctx, key, bytes.NewReader(s.data)); err != nil {
				return nil, err
			}
		}
	}
	return s.Store.Get(ctx, key, offset, length)
}
