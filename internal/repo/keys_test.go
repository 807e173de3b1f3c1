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
	for key, want := range map[string]Handle{
		"snapshots/" + id + ".json":         {KindRecord, id},
		"snapshots/" + id + ".json.zst":     {KindManifest, id},
		"snapshots/" + id + ".json.zst.age": {KindManifest, id},
		"archives/" + id + ".tar.zst":       {KindArchive, id},
		"archives/" + id + ".tar.zst.age":   {KindArchive, id},
		"snapshots/" + id + ".json.age":     {}, // records are never encrypted
		"snapshots/" + id + ".mac.json":     {KindTag, id},
		"snapshots/" + id + ".mac.json.age": {}, // nor are tags
		"archives/" + id:                    {},
		"archives/" + id + ".tar":           {},
		"archives/x.tar.zst":                {},
		"snapshots/" + id + ".tar.zst":      {},
		"head.json":                         {},
		"repacks/" + id + ".json":           {},
	} {
		got, ok := ParseKey(key)
		if ok != (want.Kind != 0) || ok && got != want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", key, got, ok, want)
		}
		if ok && got.Key() != key && EncryptedKey(got.Key()) != key {
			t.Errorf("%q parses to %+v, whose key is %q", key, got, got.Key())
		}
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
	for key, want := range map[string]*owner{
		"archives/" + id + ".tar.zst":       {id, true},
		"archives/" + id + ".tar.zst.age":   {id, true},
		"archives/" + id:                    {id, true},
		"archives/" + id + ".partial":       {id, true},
		"snapshots/" + id + ".json":         {id, false},
		"snapshots/" + id + ".json.zst.age": {id, false},
		"snapshots/" + id + ".mac.json":     {id, false},
		"snapshots/" + id + "x.json":        nil,
		"snapshots/" + id[:len(id)-1]:       nil,
		"snapshots/x/" + id + ".json":       nil,
		"repacks/" + id + ".json":           nil,
		id + ".json":                        nil,
		"head.json":                         nil,
	} {
		gotID, archive, ok := Owner(key)
		if ok != (want != nil) || ok && (gotID != want.id || archive != want.archive) {
			t.Errorf("Owner(%q) = %q, %v, %v; want %+v", key, gotID, archive, ok, want)
		}
	}
}

// TestIDTime: an ID's time is the one it was made at, to the millisecond.
func TestIDTime(t *testing.T) {
	at := time.Date(2026, 12, 2, 11, 14, 0, 987_654_321, time.UTC)
	if got := IDTime(NewID(at)); !got.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("IDTime(NewID(%v)) = %v", at, got)
	}
	for _, bad := range []string{"", "2026", "20261202T111400.000Z", "x0261202T111400.000Z-a1b2c3"} {
		if got := IDTime(bad); !got.IsZero() {
			t.Errorf("IDTime(%q) = %v, want the zero time", bad, got)
		}
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
		kinds []Kind
		want  []Handle
	}{
		{[]Kind{KindRecord}, []Handle{{KindRecord, a}, {KindRecord, b}}},
		{[]Kind{KindManifest}, []Handle{{KindManifest, a}, {KindManifest, b}}},
		{[]Kind{KindTag}, []Handle{{KindTag, b}}},
		{[]Kind{KindArchive}, []Handle{{KindArchive, a}}},
		{[]Kind{KindRecord, KindTag}, []Handle{{KindRecord, a}, {KindRecord, b}, {KindTag, b}}},
		{[]Kind{KindArchive, KindRecord}, []Handle{{KindRecord, a}, {KindRecord, b}, {KindArchive, a}}},
	} {
		var got []Handle
		if err := List(ctx, st, func(h Handle, _ store.Object) error { got = append(got, h); return nil }, c.kinds...); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(kinds %v) = %v, want %v", c.kinds, got, c.want)
		}
	}
}
