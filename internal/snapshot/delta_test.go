package snapshot_test

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
	"time"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// writeCounter counts the bytes written to each key.
type writeCounter struct {
	store.Store
	mu      sync.Mutex
	written map[string]int64
}

func countWrites(st store.Store) *writeCounter {
	return &writeCounter{Store: st, written: map[string]int64{}}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *writeCounter) Put(ctx context.Context, key string, r io.Reader) error {
	cr := &countReader{r: r}
	err := c.Store.Put(ctx, key, cr)
	c.add(key, cr.n)
	return err
}

func (c *writeCounter) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	c.add(key, int64(len(data)))
	return c.Store.Swap(ctx, key, data, old)
}

func (c *writeCounter) add(key string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[key] += n
}

// take returns the bytes written to key and to all keys since the last call.
func (c *writeCounter) take(key string) (n, total int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.written {
		total += v
	}
	n = c.written[key]
	clear(c.written)
	return n, total
}

// firstFile returns a selected regular file named name under home.
func firstFile(t *testing.T, home, name string) string {
	t.Helper()
	var found string
	filepath.WalkDir(filepath.Join(home, "jobs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && found == "" && d.Type().IsRegular() && d.Name() == name && !strings.Contains(p, "workspace") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no %s under %s", name, home)
	}
	return found
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(text)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestIncrementalManifestCostsWhatChanged: one changed file among thousands
// writes a delta manifest that is a small fraction of the full one, and the
// snapshot restores exactly as the same state does from a full manifest.
func TestIncrementalManifestCostsWhatChanged(t *testing.T) {
	testenv.Long(t, "measures many incremental snapshots")
	home := snaptest.GenHome(t, 6)
	st := countWrites(snaptest.NewStore(t))
	first := snaptest.Snap(t, home, st)
	fullManifest, _ := st.take(repo.ManifestKey(first.ID))
	if first.Totals.Entries < 3000 || len(first.Manifests) != 1 {
		t.Fatalf("first snapshot: %d entries, manifests %v; want thousands and a full manifest", first.Totals.Entries, first.Manifests)
	}
	appendTo(t, firstFile(t, home, "log"), "one more line\n")
	second := snaptest.Snap(t, home, st)
	delta, total := st.take(repo.ManifestKey(second.ID))
	t.Logf("%d entries: full manifest %d bytes; one changed file: delta manifest %d bytes, %d bytes written in all", second.Totals.Entries, fullManifest, delta, total)
	if !slices.Equal(second.Manifests, []string{first.ID, second.ID}) {
		t.Errorf("second snapshot's manifests %v, want a delta on %s", second.Manifests, first.ID)
	}
	if delta*50 > fullManifest || total*10 > fullManifest {
		t.Errorf("one changed file wrote a %d-byte manifest (%d bytes in all); the full one has %d", delta, total, fullManifest)
	}
	if second.Totals.Entries != first.Totals.Entries || second.Totals.Lines != 1 {
		t.Errorf("delta totals %+v: want %d resolved entries in 1 line", second.Totals, first.Totals.Entries)
	}
	rec, err := repo.LoadRecord(context.Background(), st, second.ID)
	if err != nil || !slices.Equal(rec.Manifests, second.Manifests) || rec.DeltaLines != 1 {
		t.Errorf("record %+v (%v): want manifests %v and 1 delta line", rec, err, second.Manifests)
	}

	viaDelta, viaFull := t.TempDir(), t.TempDir()
	if err := restoreInto(viaDelta, st, ""); err != nil {
		t.Fatal(err)
	}
	fullStore := snaptest.NewStore(t)
	full := snaptest.Snap(t, home, fullStore)
	if len(full.Manifests) != 1 {
		t.Fatalf("a first snapshot wrote manifests %v", full.Manifests)
	}
	// The delta counts the entries it leaves out without carrying them:
	// its totals are still the whole snapshot's.
	if got, want := second.Totals, full.Totals; got.Entries != want.Entries || got.Files != want.Files || got.Bytes != want.Bytes {
		t.Errorf("delta totals %d entries, %d files, %d bytes; a full snapshot of the same home has %d, %d, %d",
			got.Entries, got.Files, got.Bytes, want.Entries, want.Files, want.Bytes)
	}
	if got := slices.Sorted(slices.Values(second.Totals.Archives)); !slices.Equal(got, []string{first.ID, second.ID}) {
		t.Errorf("delta refers to archives %v, want %s and %s", got, first.ID, second.ID)
	}
	if err := restoreInto(viaFull, fullStore, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, viaDelta))
	snaptest.AssertSame(t, snaptest.All(t, viaFull), snaptest.All(t, viaDelta))
}

// TestDeltasCarryEveryKindOfChange: deletions, type changes, mode-only and
// mtime-only changes go through delta manifests, and every snapshot of the
// chain restores exactly.
func TestDeltasCarryEveryKindOfChange(t *testing.T) {
	testenv.Long(t, "snapshots every kind of change through a chain of deltas")
	home := snaptest.GenHome(t, 2)
	st := snaptest.NewStore(t)
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	log := firstFile(t, home, "log")
	build := filepath.Dir(log)
	config := firstFile(t, home, "config.xml")
	changelog := firstFile(t, home, "changelog.xml")
	steps := []struct {
		name  string
		do    func()
		lines int64 // expected delta lines, 0: do not check
	}{
		{"first", func() {}, 0},
		{"mode only", func() { must(os.Chmod(config, 0o600)) }, 1},
		{"mtime only", func() { must(os.Chtimes(changelog, time.Unix(1e9, 7), time.Unix(1e9, 7))) }, 1},
		{"file becomes a directory", func() {
			must(os.Remove(log))
			must(os.Mkdir(log, 0o750))
			must(os.WriteFile(filepath.Join(log, "part"), []byte("x"), 0o644))
		}, 3},
		{"directory becomes a symlink", func() {
			must(os.RemoveAll(build))
			must(os.Symlink("../elsewhere", build))
		}, 0},
		{"symlink becomes a directory, files deleted", func() {
			must(os.Remove(build))
			must(os.Mkdir(build, 0o755))
			must(os.RemoveAll(p("fingerprints")))
		}, 0},
	}
	trees := map[string]testhome.Tree{}
	var ids []string
	for i, s := range steps {
		s.do()
		res := snaptest.Snap(t, home, st)
		ids = append(ids, res.ID)
		trees[res.ID] = snaptest.Selected(t, home)
		if len(res.Manifests) != i+1 {
			t.Errorf("%s: manifests %v, want a chain of %d", s.name, res.Manifests, i+1)
		}
		if s.lines > 0 && res.Totals.Lines != s.lines {
			t.Errorf("%s: the delta has %d lines, want %d", s.name, res.Totals.Lines, s.lines)
		}
	}
	for i, id := range ids {
		target := t.TempDir()
		if err := restoreInto(target, st, id); err != nil {
			t.Fatalf("restore %s (%s): %v", id, steps[i].name, err)
		}
		if d := testhome.Diff(trees[id], snaptest.All(t, target)); len(d) > 0 {
			t.Errorf("snapshot after %q restores differently: %v", steps[i].name, d[:min(len(d), 5)])
		}
	}
}

// TestManifestChainAtItsLimitIsCompacted: the chain never grows past the
// limit: at the limit, the upper half of the chain is merged into the new
// delta, on an older base, and every snapshot still restores exactly.
func TestManifestChainAtItsLimitIsCompacted(t *testing.T) {
	testenv.Long(t, "takes a chain of snapshots to its limit")
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	var chains [][]string
	trees := map[string]testhome.Tree{}
	for i := range 7 {
		if i > 0 {
			appendTo(t, filepath.Join(home, "jobs/test/builds/2/log"), "more\n")
		}
		res := snaptest.SnapWith(t, home, st, 4)
		chains = append(chains, res.Manifests)
		trees[res.ID] = snaptest.Selected(t, home)
		if i > 0 && res.Totals.Lines != 1 {
			t.Errorf("snapshot %d: its delta has %d lines, want 1 (the log)", i, res.Totals.Lines)
		}
	}
	var lens []int
	for _, c := range chains {
		lens = append(lens, len(c))
	}
	if !slices.Equal(lens, []int{1, 2, 3, 4, 3, 4, 3}) {
		t.Errorf("chain lengths %v, want [1 2 3 4 3 4 3] with a limit of 4", lens)
	}
	if !slices.Equal(chains[4][:2], chains[3][:2]) || !slices.Equal(chains[6][:2], chains[3][:2]) {
		t.Errorf("compacted chains %v and %v do not keep the two lowest layers of %v", chains[4], chains[6], chains[3])
	}
	for _, c := range chains {
		id := c[len(c)-1]
		target := t.TempDir()
		if err := restoreInto(target, st, id); err != nil {
			t.Fatal(err)
		}
		snaptest.AssertSame(t, trees[id], snaptest.All(t, target))
	}
}

// TestHeavyDeltasStartAFullManifest: once the deltas of a chain hold more
// than a quarter of its entries, the next snapshot writes a full manifest.
func TestHeavyDeltasStartAFullManifest(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	later := time.Now().Add(time.Hour)
	for p := range snaptest.Selected(t, home) {
		os.Chtimes(filepath.Join(home, filepath.FromSlash(p)), later, later)
	}
	heavy := snaptest.Snap(t, home, st)
	appendTo(t, filepath.Join(home, "jobs/test/builds/2/log"), "more\n")
	next := snaptest.Snap(t, home, st)
	if len(heavy.Manifests) != 2 || len(next.Manifests) != 1 {
		t.Errorf("manifests %v then %v: want a delta, then a full manifest after it changed every entry", heavy.Manifests, next.Manifests)
	}
	target := t.TempDir()
	if err := restoreInto(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, target))
}

// TestMissingOrCorruptLayerIsReported: a restore through a delta whose base
// manifest is gone or damaged fails as corrupt, names that object, and
// leaves the home as it was.
func TestMissingOrCorruptLayerIsReported(t *testing.T) {
	testenv.Long(t, "damages every layer of a chain")
	for name, breakIt := range map[string]func(path string) error{
		"missing": os.Remove,
		"corrupt": func(path string) error { return os.WriteFile(path, []byte("\x28\xb5\x2f\xfdgarbage"), 0o644) },
		"other snapshot's": func(path string) error {
			other := filepath.Join(filepath.Dir(path), "other.json.zst")
			return os.Rename(other, path)
		},
	} {
		t.Run(name, func(t *testing.T) {
			home, dir := snaptest.NewHome(t), t.TempDir()
			st, err := file.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			first := snaptest.Snap(t, home, st)
			testhome.Change(t, home)
			second := snaptest.Snap(t, home, st)
			if len(second.Manifests) != 2 {
				t.Fatalf("second snapshot's manifests %v, want a delta", second.Manifests)
			}
			// A stand-in for "a layer holding another snapshot's manifest".
			otherDir := t.TempDir()
			ost, _ := file.Open(otherDir)
			other := snaptest.Snap(t, home, ost)
			snaptest.CopyFile(t, filepath.Join(otherDir, filepath.FromSlash(repo.ManifestKey(other.ID))), filepath.Join(dir, "snapshots", "other.json.zst"))

			base := filepath.Join(dir, filepath.FromSlash(repo.ManifestKey(first.ID)))
			if err := breakIt(base); err != nil {
				t.Fatal(err)
			}
			target := snaptest.NewHome(t)
			before := snaptest.All(t, target)
			err = restoreInto(target, st, second.ID)
			if !errors.Is(err, archive.ErrCorrupt) || !strings.Contains(err.Error(), repo.ManifestKey(first.ID)) {
				t.Errorf("restore through a %s layer: %v; want a corrupt-store error naming %s", name, err, repo.ManifestKey(first.ID))
			}
			snaptest.AssertSame(t, before, snaptest.All(t, target))
			snaptest.AssertNoStaging(t, target)
		})
	}
}

// TestFormat1StoreRestoresAndTakesDeltas: testdata/format1/store was
// written by homesnap before delta manifests (dc28ed2, marker and
// manifests of format 1): `genhome -preset tiny -seed 1`, a snapshot,
// `genhome -churn 0.05 -seed 1`, a snapshot. This release restores both
// exactly, and its incremental on top is a delta on the old full manifest,
// after moving the marker to format 2.
func TestFormat1StoreRestoresAndTakesDeltas(t *testing.T) {
	ctx := context.Background()
	st, err := file.Open(snaptest.CopyDir(t, filepath.Join("..", "..", "testdata", "format1", "store")))
	if err != nil {
		t.Fatal(err)
	}
	h, err := repo.LoadHistory(ctx, st)
	if err != nil || len(h.Snapshots) != 2 {
		t.Fatalf("history of the format 1 store: %v, %v", h, err)
	}
	home := t.TempDir()
	if _, err := gen.Generate(home, gen.Options{Preset: "tiny", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for i, r := range h.Oldest() {
		if i == 1 {
			if _, err := gen.Churn(home, gen.ChurnOptions{Fraction: 0.05, Seed: 1}); err != nil {
				t.Fatal(err)
			}
		}
		target := t.TempDir()
		if err := restoreInto(target, st, r.ID); err != nil {
			t.Fatalf("restore format 1 snapshot %s: %v", r.ID, err)
		}
		snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, target))
	}
	// The home as restored, one change, and an incremental on top.
	target := t.TempDir()
	if err := restoreInto(target, st, ""); err != nil {
		t.Fatal(err)
	}
	appendTo(t, firstFile(t, target, "log"), "after the upgrade\n")
	res := snaptest.Snap(t, target, st)
	if !slices.Equal(res.Manifests, []string{h.Head, res.ID}) {
		t.Errorf("incremental on a format 1 store wrote manifests %v, want a delta on %s", res.Manifests, h.Head)
	}
	if m, _, err := repo.LoadMarker(ctx, st); err != nil || m.Homesnap != repo.FormatVersion {
		t.Errorf("marker after the first delta: %+v %v, want format %d", m, err, repo.FormatVersion)
	}
	again := t.TempDir()
	if err := restoreInto(again, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, target), snaptest.All(t, again))
}
