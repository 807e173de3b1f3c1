package repo

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

func TestParseKey(t *testing.T) {
	const id = "20260101T000000.000Z-c0ffee"
	for _, c := range []struct {
		name, key string
		want      Handle
	}{
		{"record", "snapshots/" + id + ".json", Handle{KindRecord, id}},
		{"manifest", "snapshots/" + id + ".json.zst", Handle{KindManifest, id}},
		{"encrypted manifest", "snapshots/" + id + ".json.zst.age", Handle{KindManifest, id}},
		{"archive", "archives/" + id + ".tar.zst", Handle{KindArchive, id}},
		{"encrypted archive", "archives/" + id + ".tar.zst.age", Handle{KindArchive, id}},
		{"encrypted record", "snapshots/" + id + ".json.age", Handle{}}, // records are never encrypted
		{"tag", "snapshots/" + id + ".mac.json", Handle{KindTag, id}},
		{"encrypted tag", "snapshots/" + id + ".mac.json.age", Handle{}}, // nor are tags
		{"archive without suffix", "archives/" + id, Handle{}},
		{"archive without zst", "archives/" + id + ".tar", Handle{}},
		{"archive without ID", "archives/x.tar.zst", Handle{}},
		{"archive under snapshots", "snapshots/" + id + ".tar.zst", Handle{}},
		{"head", "head.json", Handle{}},
		{"repack", "repacks/" + id + ".json", Handle{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseKey(c.key)
			if ok != (c.want.Kind != 0) || ok && got != c.want {
				t.Errorf("ParseKey(%q) = %+v, %v; want %+v", c.key, got, ok, c.want)
			}
			if ok && got.Key() != c.key && EncryptedKey(got.Key()) != c.key {
				t.Errorf("%q parses to %+v, whose key is %q", c.key, got, got.Key())
			}
		})
	}
}

// TestListArchives: one listing gives every archive's stored size by ID,
// and says which are stored encrypted; other objects under archives/ are
// not archives.
func TestListArchives(t *testing.T) {
	ctx := context.Background()
	st, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "20260101T000000.000Z-c0ffee", "20260102T000000.000Z-c0ffee"
	for key, size := range map[string]int{ArchiveKey(a): 3, ArchiveKey(b) + encryptedSuffix: 5, archivePrefix + "stray": 7, RecordKey(a): 11} {
		if err := st.Put(ctx, key, strings.NewReader(strings.Repeat("x", size))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ListArchives(ctx, st)
	want := []StoredArchive{{a, 3, false}, {b, 5, true}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ListArchives = %v, %v; want %v", got, err, want)
	}
}

// TestOwner: prune collects what a snapshot owns by its name alone, its
// stray objects included; nothing outside the snapshots' prefixes, and
// no name that merely starts like an ID.
func TestOwner(t *testing.T) {
	const id = "20260101T000000.000Z-c0ffee"
	type owner struct {
		id      string
		archive bool
	}
	for _, c := range []struct {
		name, key string
		want      *owner // nil: owned by no snapshot
	}{
		{"archive", "archives/" + id + ".tar.zst", &owner{id, true}},
		{"encrypted archive", "archives/" + id + ".tar.zst.age", &owner{id, true}},
		{"stray archive", "archives/" + id, &owner{id, true}},
		{"partial archive", "archives/" + id + ".partial", &owner{id, true}},
		{"record", "snapshots/" + id + ".json", &owner{id, false}},
		{"encrypted manifest", "snapshots/" + id + ".json.zst.age", &owner{id, false}},
		{"tag", "snapshots/" + id + ".mac.json", &owner{id, false}},
		{"longer ID", "snapshots/" + id + "x.json", nil},
		{"shorter ID", "snapshots/" + id[:len(id)-1], nil},
		{"nested", "snapshots/x/" + id + ".json", nil},
		{"repack", "repacks/" + id + ".json", nil},
		{"top level", id + ".json", nil},
		{"head", "head.json", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			gotID, archive, ok := Owner(c.key)
			if ok != (c.want != nil) || ok && (gotID != c.want.id || archive != c.want.archive) {
				t.Errorf("Owner(%q) = %q, %v, %v; want %+v", c.key, gotID, archive, ok, c.want)
			}
		})
	}
}

// TestIDTime: an ID's time is the one it was made at, to the millisecond.
func TestIDTime(t *testing.T) {
	at := time.Date(2026, 12, 2, 11, 14, 0, 987_654_321, time.UTC)
	if got := IDTime(NewID(at)); !got.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("IDTime(NewID(%v)) = %v", at, got)
	}
	for _, c := range []struct{ name, id string }{
		{"empty", ""},
		{"year only", "2026"},
		{"no suffix", "20261202T111400.000Z"},
		{"not a digit", "x0261202T111400.000Z-a1b2c3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := IDTime(c.id); !got.IsZero() {
				t.Errorf("IDTime(%q) = %v, want the zero time", c.id, got)
			}
		})
	}
}

// TestListByKind: a listing by kind gives each object of that kind once,
// by its handle, encrypted or not, and nothing else under its prefix.
func TestListByKind(t *testing.T) {
	ctx := context.Background()
	st, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "20260101T000000.000Z-c0ffee", "20260102T000000.000Z-c0ffee"
	for _, key := range []string{RecordKey(a), RecordKey(b), EncryptedKey(ManifestKey(a)), ManifestKey(b), ManifestMACKey(ManifestKey(b)), ArchiveKey(a), snapshotPrefix + "stray"} {
		if err := st.Put(ctx, key, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		kinds []Kind
		want  []Handle
	}{
		{"records", []Kind{KindRecord}, []Handle{{KindRecord, a}, {KindRecord, b}}},
		{"manifests", []Kind{KindManifest}, []Handle{{KindManifest, a}, {KindManifest, b}}},
		{"tags", []Kind{KindTag}, []Handle{{KindTag, b}}},
		{"archives", []Kind{KindArchive}, []Handle{{KindArchive, a}}},
		{"records and tags", []Kind{KindRecord, KindTag}, []Handle{{KindRecord, a}, {KindRecord, b}, {KindTag, b}}},
		{"archives and records", []Kind{KindArchive, KindRecord}, []Handle{{KindRecord, a}, {KindRecord, b}, {KindArchive, a}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []Handle
			if err := List(ctx, st, func(h Handle, _ store.Object) error { got = append(got, h); return nil }, c.kinds...); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("List(kinds %v) = %v, want %v", c.kinds, got, c.want)
			}
		})
	}
}
