package repo

import (
	"context"
	"slices"
	"strings"
	"testing"

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
		"snapshots/" + id + ".mac.json":     {},
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
		if ok && got.Key() != key && got.Key()+EncryptedSuffix != key {
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
	for key, size := range map[string]int{ArchiveKey(a): 3, ArchiveKey(b) + EncryptedSuffix: 5, ArchivePrefix + "stray": 7, RecordKey(a): 11} {
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
