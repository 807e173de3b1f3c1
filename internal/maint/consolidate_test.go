package maint

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestChooseRewrite: golden cases of the size-tiered choice. Sizes equal
// to live bytes mean archives without dead bytes.
func TestChooseRewrite(t *testing.T) {
	healthy := func(live map[string]int64) map[string]int64 { return live }
	for _, c := range []struct {
		name       string
		max        int
		live, size map[string]int64
		want       string
	}{
		{"few healthy archives: nothing to do", 4,
			map[string]int64{"a": 100, "b": 10, "c": 5}, healthy(map[string]int64{"a": 100, "b": 10, "c": 5}), ""},
		{"many small archives and one big base: only the small ones merge, the cheapest until half the limit remains", 8,
			map[string]int64{"base": 700, "s05": 5, "s06": 6, "s07": 7, "s08": 8, "s09": 9, "s10": 10, "s11": 11, "s12": 12, "s13": 13},
			healthy(map[string]int64{"base": 700, "s05": 5, "s06": 6, "s07": 7, "s08": 8, "s09": 9, "s10": 10, "s11": 11, "s12": 12, "s13": 13}),
			"s05 s06 s07 s08 s09 s10 s11"},
		{"an earlier merge is not copied again until a merge would double it", 8,
			map[string]int64{"base": 700, "merged": 60, "s1": 1, "s2": 2, "s3": 3, "s4": 4, "s5": 5, "s6": 6, "s7": 7, "s8": 8},
			healthy(map[string]int64{"base": 700, "merged": 60, "s1": 1, "s2": 2, "s3": 3, "s4": 4, "s5": 5, "s6": 6, "s7": 7, "s8": 8}),
			"s1 s2 s3 s4 s5 s6 s7"},
		{"...and joins once the small ones merged outweigh it", 8,
			map[string]int64{"base": 700, "merged": 12, "s1": 5, "s2": 5, "s3": 5, "s4": 5, "s5": 5, "s6": 5, "s7": 15, "s8": 16},
			healthy(map[string]int64{"base": 700, "merged": 12, "s1": 5, "s2": 5, "s3": 5, "s4": 5, "s5": 5, "s6": 5, "s7": 15, "s8": 16}),
			"merged s1 s2 s3 s4 s5 s6"},
		{"a base 70 % dead is rewritten, alone", 8,
			map[string]int64{"base": 300, "s1": 10, "s2": 10},
			map[string]int64{"base": 1000, "s1": 10, "s2": 10}, "base"},
		{"a large archive 40 % dead is not rewritten", 8,
			map[string]int64{"base": 600, "s1": 10, "s2": 10},
			map[string]int64{"base": 1000, "s1": 10, "s2": 10}, ""},
		{"a large archive 40 % dead is not merged to lower the count either", 3,
			map[string]int64{"base": 600, "big": 400, "s1": 10, "s2": 10, "s3": 10},
			map[string]int64{"base": 1000, "big": 400, "s1": 10, "s2": 10, "s3": 10}, "s1 s2 s3"},
		{"a small mostly dead archive alone is not worth a snapshot", 8,
			map[string]int64{"base": 1000, "s1": 4, "s2": 10},
			map[string]int64{"base": 1000, "s1": 10, "s2": 10}, ""},
		{"...but joins a merge that is due", 3,
			map[string]int64{"base": 1000, "s1": 4, "s2": 10, "s3": 20, "s4": 50},
			map[string]int64{"base": 1000, "s1": 10, "s2": 10, "s3": 20, "s4": 50}, "s1 s2 s3"},
		{"dead and too many", 4,
			map[string]int64{"a": 100, "b": 50, "c": 40, "d": 30, "e": 20},
			map[string]int64{"a": 1000, "b": 50, "c": 40, "d": 30, "e": 20}, "a c d e"},
		{"ties in live bytes: the one with more dead bytes first, then by ID", 4,
			map[string]int64{"a": 10, "b": 10, "c": 10, "d": 10, "e": 10, "f": 10},
			map[string]int64{"a": 10, "b": 10, "c": 12, "d": 10, "e": 10, "f": 10}, "a b c d e"},
		{"only large archives: nothing can merge", 2,
			map[string]int64{"a": 100, "b": 100, "c": 100},
			healthy(map[string]int64{"a": 100, "b": 100, "c": 100}), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(chooseRewrite(c.live, c.size, ConsolidatePolicy{MaxArchives: c.max, MaxDead: 0.5}), " ")
			if got != c.want {
				t.Errorf("rewrite %q, want %q", got, c.want)
			}
		})
	}
}

func TestRangesUnion(t *testing.T) {
	// Small files share a frame: their ranges overlap and count once.
	r := Ranges{{10, 20}, {0, 5}, {10, 20}, {18, 30}, {30, 31}}.normalise()
	if want := (Ranges{{0, 5}, {10, 31}}); !slices.Equal(r, want) || r.Bytes() != 26 {
		t.Errorf("normalised %v (%d bytes), want %v (26)", r, r.Bytes(), want)
	}
	if u := r.Union(Ranges{{5, 10}, {40, 50}}); u.Bytes() != 41 || len(u) != 2 {
		t.Errorf("union %v (%d bytes), want [[0 31] [40 50]] (41)", u, u.Bytes())
	}
}

// TestConsolidationBoundsArchivesAndKeepsRestoresExact: after many
// incremental snapshots the head points into many archives; consolidation
// copies the small ones' files into one, from the store, and the head
// restores byte-identically.
func TestConsolidationBoundsArchivesAndKeepsRestoresExact(t *testing.T) {
	testenv.Long(t, "consolidates and restores many snapshots")
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	for i := range 7 {
		if i > 0 { // a new build each time: every archive stays live
			dir := filepath.Join(home, "jobs", "consolidate", "builds", fmt.Sprint(i))
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "log"), bytes.Repeat([]byte(fmt.Sprintf("build %d\n", i)), 1000*i), 0o644)
			testhome.Change(t, home)
		}
		snaptest.Snap(t, home, st)
	}
	want := snaptest.Selected(t, home)
	ctx := context.Background()
	head, _, _ := repo.LoadHead(ctx, st)
	before, err := repo.LoadRecord(ctx, st, head.Snapshot)
	if err != nil || len(before.Archives) <= 4 {
		t.Fatalf("the head points into %d archives (%v): the test needs more than 4", len(before.Archives), err)
	}
	walked, err := homemark.Read(testhome.Open(t, home))
	if err != nil || walked == nil || walked.Snapshot != head.Snapshot {
		t.Fatalf("the home's mark before consolidation: %+v %v, want the head %s", walked, err, head.Snapshot)
	}
	opts := snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop()}
	res, err := Consolidate(ctx, opts, ConsolidatePolicy{MaxArchives: 4})
	if err != nil || res.Unchanged {
		t.Fatalf("consolidate: %+v %v", res, err)
	}
	// The consolidated snapshot holds the walked one's tree: the home's
	// mark names it, with the walk's fingerprint (not an empty one).
	if m, err := homemark.Read(testhome.Open(t, home)); err != nil || m == nil || m.Snapshot != res.ID || m.Print != walked.Print {
		t.Errorf("the home's mark after consolidation: %+v %v, want %s with the walk's fingerprint %+v", m, err, res.ID, walked.Print)
	}
	if n := len(res.Totals.Archives); n > 4 || n >= len(before.Archives) {
		t.Errorf("after consolidation the head points into %d archives %v, want at most 4 and fewer than %d", n, res.Totals.Archives, len(before.Archives))
	}
	// The first, full snapshot's archive is the large one: it is not copied.
	if first := before.Archives[0]; !slices.Contains(res.Totals.Archives, first) {
		t.Errorf("after consolidation the head points into %v: the base archive %s was copied", res.Totals.Archives, first)
	}
	if len(res.Manifests) != 1 {
		t.Errorf("a consolidation wrote manifests %v, want a full one", res.Manifests)
	}
	if res.Parent != before.ID || res.Totals.Entries != before.Entries {
		t.Errorf("consolidated snapshot: parent %s entries %d, want %s and %d", res.Parent, res.Totals.Entries, before.ID, before.Entries)
	}
	target := t.TempDir()
	if err := restoreInto(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.Selected(t, target))
	// Nothing more is due; the next snapshot of the home finds nothing changed.
	if again, err := Consolidate(ctx, opts, ConsolidatePolicy{MaxArchives: 4}); err != nil || !again.Unchanged {
		t.Errorf("second consolidation: %+v %v", again, err)
	}
	if next := snaptest.Snap(t, home, st); !next.Unchanged {
		t.Errorf("a snapshot after consolidation found changes: %+v", next)
	}
}

// TestLiveBytesSeesDeadSmallFiles: when most small files of a frame were
// replaced, the frame stays in the head's ranges, but the live estimate
// (what a rewrite copies) drops with them.
func TestLiveBytesSeesDeadSmallFiles(t *testing.T) {
	testenv.Long(t, "builds a generated history")
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	dir := filepath.Join(home, "jobs", "many", "builds", "1")
	os.MkdirAll(dir, 0o755)
	rnd := rand.New(rand.NewPCG(1, 2))
	write := func(i int) {
		b := make([]byte, 20<<10)
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("log-%03d", i)), b, 0o644)
	}
	for i := range 400 { // 8 MB of incompressible logs: four frames
		write(i)
	}
	base := snaptest.Snap(t, home, st).ID
	for i := range 400 {
		if i%10 != 0 { // nine in ten replaced
			write(i)
		}
	}
	head := snaptest.Snap(t, home, st).ID
	ctx := context.Background()
	ranges, err := LiveRanges(ctx, st, head)
	if err != nil {
		t.Fatal(err)
	}
	live, err := LiveBytes(ctx, st, head)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	st.List(ctx, repo.ArchiveKey(base), func(o store.Object) error { size = o.Size; return nil })
	if r := ranges[base].Bytes(); r < size*3/4 {
		t.Fatalf("the head's ranges cover %d of the base's %d bytes: the test needs frames kept whole by few live files", r, size)
	}
	// Two thirds of the base are those logs, nine in ten of them dead: a
	// rewrite is due (half dead), which the ranges cannot tell.
	if l := live[base]; l >= size/2 {
		t.Errorf("live estimate of the base: %d of %d bytes, want under half", l, size)
	}
}

// TestLiveBytesOfAFreshArchiveIsWhole: right after a snapshot nothing in its
// archive is dead, however small the archive (its one frame is far from
// full), so consolidation leaves it alone.
func TestLiveBytesOfAFreshArchiveIsWhole(t *testing.T) {
	home, st := t.TempDir(), snaptest.NewStore(t)
	rnd := rand.New(rand.NewPCG(3, 4))
	for i := range 20 { // 400 KB: one frame, a fifth full
		dir := filepath.Join(home, "jobs", fmt.Sprintf("job-%d", i))
		os.MkdirAll(dir, 0o755)
		b := make([]byte, 20<<10)
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		os.WriteFile(filepath.Join(dir, "config.xml"), b, 0o644)
	}
	id := snaptest.Snap(t, home, st).ID
	ctx := context.Background()
	live, err := LiveBytes(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	st.List(ctx, repo.ArchiveKey(id), func(o store.Object) error { size = o.Size; return nil })
	if l := live[id]; l < size*9/10 {
		t.Errorf("live estimate of a fresh archive: %d of %d bytes", l, size)
	}
	res, err := Consolidate(ctx, snapshot.Options{Store: st, Log: zerolog.Nop()}, ConsolidatePolicy{MaxArchives: 8})
	if err != nil || !res.Unchanged {
		t.Errorf("a fresh single archive was consolidated: %+v, %v", res, err)
	}
}

// manifestReads counts the reads of manifests.
type manifestReads struct {
	store.Store
	n int
}

func (m *manifestReads) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if strings.HasSuffix(key, ".json.zst") { // repo.ManifestKey
		m.n++
	}
	return m.Store.Get(ctx, key, off, n)
}

// After a full snapshot the head uses all of its one archive: deciding so
// must not read its manifest, a million lines on a large home. Once the
// head points into older archives too, the manifest is read.
func TestConsolidationAfterAFullSnapshotReadsNoManifest(t *testing.T) {
	home, st := t.TempDir(), snaptest.NewStore(t)
	os.MkdirAll(filepath.Join(home, "jobs", "a"), 0o755)
	os.WriteFile(filepath.Join(home, "jobs", "a", "config.xml"), []byte("<project/>"), 0o644)
	os.WriteFile(filepath.Join(home, "jobs", "a", "log"), []byte("one"), 0o644)
	snaptest.Snap(t, home, st)
	ctx := context.Background()
	consolidate := func() int {
		mr := &manifestReads{Store: st}
		res, err := Consolidate(ctx, snapshot.Options{Store: mr, Log: zerolog.Nop()}, ConsolidatePolicy{MaxArchives: 8})
		if err != nil || !res.Unchanged {
			t.Fatalf("consolidated: %+v, %v", res, err)
		}
		return mr.n
	}
	if n := consolidate(); n != 0 {
		t.Errorf("after a full snapshot, consolidation read %d manifests", n)
	}
	os.WriteFile(filepath.Join(home, "jobs", "a", "log"), []byte("one two"), 0o644)
	snaptest.Snap(t, home, st)
	if n := consolidate(); n == 0 {
		t.Errorf("after an incremental, consolidation read no manifest: it cannot know the dead bytes")
	}
}
