package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/testhome"
)

func TestChooseRewrite(t *testing.T) {
	p := ConsolidatePolicy{MaxArchives: 4, MinLive: 0.5}
	for _, c := range []struct {
		name       string
		live, size map[string]int64
		want       string
	}{
		{"few healthy archives", map[string]int64{"a": 100, "b": 10, "c": 5}, map[string]int64{"a": 100, "b": 10, "c": 5}, ""},
		{"one mostly dead archive", map[string]int64{"a": 40, "b": 10}, map[string]int64{"a": 100, "b": 10}, "a"},
		{"too many: the smallest merge until half the limit remains",
			map[string]int64{"a": 1000, "b": 50, "c": 40, "d": 30, "e": 20, "f": 10},
			map[string]int64{"a": 1000, "b": 50, "c": 40, "d": 30, "e": 20, "f": 10}, "b c d e f"},
		{"dead and too many", map[string]int64{"a": 100, "b": 50, "c": 40, "d": 30, "e": 20},
			map[string]int64{"a": 1000, "b": 50, "c": 40, "d": 30, "e": 20}, "a c d e"},
	} {
		if got := strings.Join(chooseRewrite(c.live, c.size, p), " "); got != c.want {
			t.Errorf("%s: rewrite %q, want %q", c.name, got, c.want)
		}
	}
}

// TestConsolidationBoundsArchivesAndKeepsRestoresExact: after many
// incremental snapshots the head points into many archives; consolidation
// copies the small ones' files into one, from the store, and the head
// restores byte-identically.
func TestConsolidationBoundsArchivesAndKeepsRestoresExact(t *testing.T) {
	home, st := newHome(t), newStore(t)
	for i := range 7 {
		if i > 0 { // a new build each time: every archive stays live
			dir := filepath.Join(home, "jobs", "consolidate", "builds", fmt.Sprint(i))
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "log"), bytes.Repeat([]byte(fmt.Sprintf("build %d\n", i)), 1000*i), 0o644)
			testhome.Change(t, home)
		}
		snap(t, home, st)
	}
	want := selected(t, home)
	ctx := context.Background()
	head, _, _ := repo.LoadHead(ctx, st)
	before, err := repo.LoadRecord(ctx, st, head.Snapshot)
	if err != nil || len(before.Archives) <= 4 {
		t.Fatalf("the head points into %d archives (%v): the test needs more than 4", len(before.Archives), err)
	}
	opts := SnapshotOptions{Home: home, Store: st, Selector: jenkins(t), Log: zerolog.Nop()}
	res, err := Consolidate(ctx, opts, ConsolidatePolicy{MaxArchives: 4})
	if err != nil || res.Unchanged {
		t.Fatalf("consolidate: %+v %v", res, err)
	}
	if n := len(res.Totals.Archives); n > 4 || n >= len(before.Archives) {
		t.Errorf("after consolidation the head points into %d archives %v, want at most 4 and fewer than %d", n, res.Totals.Archives, len(before.Archives))
	}
	if len(res.Manifests) != 1 {
		t.Errorf("a consolidation wrote manifests %v, want a full one", res.Manifests)
	}
	if res.Parent != before.ID || res.Totals.Entries != before.Entries {
		t.Errorf("consolidated snapshot: parent %s entries %d, want %s and %d", res.Parent, res.Totals.Entries, before.ID, before.Entries)
	}
	target := t.TempDir()
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	assertSame(t, want, selected(t, target))
	// Nothing more is due; the next snapshot of the home finds nothing changed.
	if again, err := Consolidate(ctx, opts, ConsolidatePolicy{MaxArchives: 4}); err != nil || !again.Unchanged {
		t.Errorf("second consolidation: %+v %v", again, err)
	}
	if next := snap(t, home, st); !next.Unchanged {
		t.Errorf("a snapshot after consolidation found changes: %+v", next)
	}
}
