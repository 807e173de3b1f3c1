package repo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s store.Store, key, data string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

func TestMarkerOfAnotherFormatOrGarbageIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ name, marker, want string }{
		{"newer format", `{"homesnap":6}`, "format version 6; this homesnap supports versions 1 to 5: upgrade homesnap"},
		{"bad identity", `{"homesnap":4,"id":"not-hex"}`, `names identity "not-hex"`},
		{"version not a number", `{"homesnap":"x"}`, "not a homesnap store marker"},
		{"not JSON", `garbage`, `"garbage"`},
		{"no version", `{}`, "supports format version 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			put(t, s, repo.MarkerKey, c.marker)
			_, _, err := repo.LoadHead(ctx, s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("marker %s: %v, want an error saying %q", c.marker, err, c.want)
			}
			if err := repo.EnsureMarker(ctx, s); err != nil {
				t.Fatal(err)
			}
			if data, _, _ := s.Load(ctx, repo.MarkerKey); string(data) != c.marker {
				t.Errorf("the marker was rewritten to %s", data)
			}
		})
	}
	s := newStore(t)
	if err := repo.EnsureMarker(ctx, s); err != nil {
		t.Fatal(err)
	}
	if h, _, err := repo.LoadHead(ctx, s); h != nil || err != nil {
		t.Errorf("a store with our marker and no head: %v %v, want empty", h, err)
	}
}

// commit writes a record and a (stand-in) manifest for id and moves the head.
func commit(t *testing.T, s store.Store, id, parent string, at time.Time, moveHead bool) {
	t.Helper()
	ctx := context.Background()
	put(t, s, repo.ManifestKey(id), "stand-in")
	if err := repo.WriteRecord(ctx, s, &repo.Record{ID: id, Parent: parent, Time: at, Files: 3}); err != nil {
		t.Fatal(err)
	}
	if moveHead {
		put(t, s, repo.HeadKey, `{"snapshot":"`+id+`","parent":"`+parent+`"}`)
	}
}

func TestHistoryWalksParentsFromTheHead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	repo.EnsureMarker(ctx, s)
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	a, b, lost, c := "20261201T140000.000Z-aaaaaa", "20261201T150000.000Z-bbbbbb", "20261201T153000.000Z-dddddd", "20261201T160000.000Z-cccccc"
	commit(t, s, a, "", t0, true)
	commit(t, s, b, a, t0.Add(time.Hour), true)
	commit(t, s, lost, b, t0.Add(90*time.Minute), false) // lost its race
	commit(t, s, c, b, t0.Add(2*time.Hour), true)
	h, err := repo.LoadHistory(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range h.Snapshots {
		got = append(got, r.ID)
	}
	if strings.Join(got, " ") != strings.Join([]string{c, b, a}, " ") || h.Head != c {
		t.Errorf("history %v head %s, want %v head %s", got, h.Head, []string{c, b, a}, c)
	}
	if len(h.Unreferenced) != 1 || h.Unreferenced[0] != lost {
		t.Errorf("unreferenced %v, want [%s]", h.Unreferenced, lost)
	}
	for _, q := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"before the first", t0.Add(-time.Second), ""},
		{"at the first", t0, a},
		{"after the lost one", t0.Add(100 * time.Minute), b}, // the lost one is newer but not in the history
		{"after the head", t0.Add(5 * time.Hour), c},
	} {
		t.Run(q.name, func(t *testing.T) {
			r := h.At(q.at)
			if (r == nil && q.want != "") || (r != nil && r.ID != q.want) {
				t.Errorf("At(%v) = %v, want %q", q.at, r, q.want)
			}
		})
	}
}

// TestFormat1StoreIsReadAndUpgraded: a store of format 1 is used as it is;
// UpgradeMarker moves it to the current format keeping what else the
// marker says, and is a no-op after.
func TestFormat1StoreIsReadAndUpgraded(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	put(t, s, repo.MarkerKey, `{"homesnap":1,"encryption":"age","recipients":["fp1"]}`)
	if err := repo.CheckMarker(ctx, s); err != nil {
		t.Fatalf("format 1 store refused: %v", err)
	}
	m, v, _ := repo.LoadMarker(ctx, s)
	if _, err := repo.SaveMarker(ctx, s, m, v); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := repo.LoadMarker(ctx, s); m.Homesnap != 1 {
		t.Errorf("saving a format 1 marker made it format %d", m.Homesnap)
	}
	for range 2 {
		if err := repo.UpgradeMarker(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	m, _, _ = repo.LoadMarker(ctx, s)
	if m.Homesnap != repo.FormatVersion || m.Encryption != "age" || len(m.Recipients) != 1 {
		t.Errorf("upgraded marker %+v", m)
	}
}

func TestRecordWithImpossibleSpanCountsIsRefused(t *testing.T) {
	s := newStore(t)
	id := "20260101T000000.000Z-c0ffee"
	for _, counts := range []string{`"spanned_entries":10,"covered_entries":11`, `"covered_entries":-1`} {
		put(t, s, repo.RecordKey(id), `{"id":"`+id+`","entries":20,`+counts+`}`)
		_, err := repo.LoadRecord(context.Background(), s, id)
		if err == nil || !strings.Contains(err.Error(), repo.RecordKey(id)) || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("%s: %v, want the record refused as corrupt, by name", counts, err)
		}
	}
	put(t, s, repo.RecordKey(id), `{"id":"`+id+`","entries":20,"spanned_entries":10,"covered_entries":10}`)
	if r, err := repo.LoadRecord(context.Background(), s, id); err != nil || r.CoveredEntries != 10 {
		t.Errorf("a record whose deltas cover every span it met: %+v, %v", r, err)
	}
}
