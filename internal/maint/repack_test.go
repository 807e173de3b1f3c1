package maint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/check"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/prune"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/retention"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestChooseRepack: golden cases of the repack choice. live is what the
// kept snapshots use, size what each archive stores.
func TestChooseRepack(t *testing.T) {
	for _, c := range []struct {
		name       string
		policy     RepackPolicy
		live, size map[string]int64
		head       string
		want       string
	}{
		{"nothing unused: nothing to do", RepackPolicy{MaxUnused: 0.02, MaxArchives: 8},
			map[string]int64{"base": 900, "s1": 10, "s2": 10}, map[string]int64{"base": 900, "s1": 10, "s2": 10}, "base s1 s2", ""},
		{"unused within the limit: nothing to do", RepackPolicy{MaxUnused: 0.02, MaxArchives: 8},
			map[string]int64{"base": 890, "s1": 10, "s2": 9}, map[string]int64{"base": 900, "s1": 10, "s2": 10}, "base s1 s2", ""},
		{"above the limit: the most unused share first, until within it (the base must go, the small ones are cheap)", RepackPolicy{MaxUnused: 0.02, MaxArchives: 8},
			map[string]int64{"base": 870, "s1": 5, "s2": 8}, map[string]int64{"base": 900, "s1": 10, "s2": 10}, "base s1 s2", "base s1 s2"},
		{"a small mostly unused archive alone can be enough", RepackPolicy{MaxUnused: 0.02, MaxArchives: 8},
			map[string]int64{"base": 895, "s1": 1, "s2": 10}, map[string]int64{"base": 900, "s1": 30, "s2": 10}, "base s1 s2", "s1"},
		{"an archive no kept snapshot uses is always dropped, whatever the limit", RepackPolicy{MaxUnused: 0.5, MaxArchives: 8},
			map[string]int64{"base": 900}, map[string]int64{"base": 900, "old": 40}, "base", "old"},
		{"too many archives for the head: the smallest merge, size-tiered", RepackPolicy{MaxUnused: 0.02, MaxArchives: 4},
			map[string]int64{"base": 900, "m": 40, "s1": 5, "s2": 6, "s3": 7, "s4": 8},
			map[string]int64{"base": 900, "m": 40, "s1": 5, "s2": 6, "s3": 7, "s4": 8}, "base m s1 s2 s3 s4", "s1 s2 s3 s4"},
		{"unused and too many: one merge serves both", RepackPolicy{MaxUnused: 0.02, MaxArchives: 4},
			map[string]int64{"base": 800, "s1": 5, "s2": 6, "s3": 7, "s4": 8},
			map[string]int64{"base": 900, "s1": 5, "s2": 6, "s3": 7, "s4": 8}, "base s1 s2 s3 s4", "base s1 s2 s3"},
		{"archives only older snapshots use count for the limit too", RepackPolicy{MaxUnused: 0.02, MaxArchives: 8},
			map[string]int64{"base": 900, "old": 20}, map[string]int64{"base": 900, "old": 60}, "base", "old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := chooseRepack(c.live, c.size, strings.Fields(c.head), c.policy)
			if strings.Join(got, " ") != c.want {
				t.Errorf("repack %q, want %q", got, c.want)
			}
			for _, a := range got {
				if why[a] == "" {
					t.Errorf("no reason given for %s", a)
				}
			}
		})
	}
}

// history builds a store of snapshots of a churning home, prunes it to
// the newest keep, and returns the trees of the kept snapshots by ID. The
// manifest chain is short, so that the kept snapshots mix full manifests
// and delta chains whose lower layers belong to dropped snapshots.
func history(t *testing.T, rounds, keep int) (store.Store, string, map[string]testhome.Tree) {
	return historyOf(t, snaptest.GenHome(t, 4), rounds, keep)
}

func historyOf(t *testing.T, home string, rounds, keep int) (store.Store, string, map[string]testhome.Tree) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	trees := map[string]testhome.Tree{}
	for i := range rounds {
		if i > 0 {
			if _, err := gen.Churn(home, gen.ChurnOptions{Fraction: 0.1, Seed: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		res := snaptest.SnapWith(t, home, st, 4)
		trees[res.ID] = snaptest.Selected(t, home)
	}
	if _, err := prune.Run(ctx, prune.Options{Store: st, Policy: retention.Policy{Last: keep}, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	h, err := repo.LoadHistory(ctx, st)
	if err != nil || len(h.Snapshots) != keep {
		t.Fatalf("history after prune: %d snapshots (%v), want %d", len(h.Snapshots), err, keep)
	}
	kept := map[string]testhome.Tree{}
	for _, r := range h.Snapshots {
		kept[r.ID] = trees[r.ID]
	}
	return st, dir, kept
}

// assertRestores restores every kept snapshot, the oldest included, and
// compares it with the home it was taken of.
func assertRestores(t *testing.T, st store.Store, trees map[string]testhome.Tree) {
	t.Helper()
	for id, want := range trees {
		dir := t.TempDir()
		if err := restoreInto(dir, st, id); err != nil {
			t.Fatalf("restore %s: %v", id, err)
		}
		got, err := testhome.Read(dir, snaptest.Jenkins(t).Selected)
		if err != nil {
			t.Fatal(err)
		}
		if d := testhome.Diff(want, got); len(d) > 0 {
			t.Fatalf("snapshot %s restores differently after the repack: %v", id, d[:min(len(d), 5)])
		}
	}
}

// pruneAll prunes with no grace, twice: replaced archives, then notes.
func pruneAll(t *testing.T, st store.Store, keep int) []prune.Deletion {
	t.Helper()
	var deleted []prune.Deletion
	for range 2 {
		p, err := prune.Run(context.Background(), prune.Options{Store: st, Policy: retention.Policy{Last: keep}, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, p.Delete...)
	}
	return deleted
}

// referenced lists the archives the kept snapshots' trees point into,
// read from their manifests, and checks the records list each of them.
func referenced(t *testing.T, st store.Store) map[string]bool {
	t.Helper()
	ctx := context.Background()
	h, err := repo.LoadHistory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range h.Snapshots {
		live, err := LiveRanges(ctx, st, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for a := range live {
			out[a] = true
			if !slices.ContainsFunc(h.Snapshots, func(k *repo.Record) bool { return slices.Contains(k.Archives, a) }) {
				t.Errorf("snapshot %s points into archive %s, which no kept record lists: prune would delete it", r.ID, a)
			}
		}
	}
	return out
}

// TestRepackKeepsEveryKeptSnapshotExact: after retention dropped the older
// snapshots, a repack copies what the kept ones still use out of the
// archives and re-points all of them; once prune deleted the old archives,
// every kept snapshot (the oldest too, whose delta chain starts in a
// dropped snapshot's manifest) restores byte-identically, the store is
// smaller, and nothing any kept snapshot points into was deleted.
func TestRepackKeepsEveryKeptSnapshotExact(t *testing.T) {
	testenv.Long(t, "repacks and restores many snapshots")
	ctx := context.Background()
	st, _, trees := history(t, 9, 4)
	before := storedBytes(t, st)
	res, err := Repack(ctx, RepackOptions{Store: st, Policy: RepackPolicy{MaxUnused: 0.01, MaxArchives: 2}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Repacked) < 2 || res.ID == "" || res.Layers == 0 || res.Records == 0 {
		t.Fatalf("repack: %+v, want several archives repacked into one and layers rewritten", res)
	}
	assertRestores(t, st, trees) // the old archives are still there
	deleted := pruneAll(t, st, 4)
	gone := map[string]bool{}
	for _, d := range deleted {
		gone[strings.TrimSuffix(strings.TrimPrefix(d.Key, "archives/"), ".tar.zst")] = true
	}
	for _, a := range res.Repacked {
		if !gone[a] {
			t.Errorf("prune kept repacked archive %s", a)
		}
	}
	for a := range referenced(t, st) {
		if gone[a] {
			t.Errorf("prune deleted archive %s, which a kept snapshot points into", a)
		}
	}
	if keys := snaptest.Keys(t, st); slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, repo.RepackPrefix) }) {
		t.Errorf("repack notes outlived the archives they protect: %v", keys)
	}
	assertRestores(t, st, trees)
	// The disaster-recovery check agrees: every kept snapshot's objects
	// are there (layers still name the deleted archives only for versions
	// no kept snapshot resolves to).
	if v, err := check.Verify(ctx, check.Options{Store: st}); err != nil || v.Problems != 0 || len(v.Snapshots) != len(trees) {
		t.Errorf("verify after the repack and prune: %+v %v", v, err)
	}
	if after := storedBytes(t, st); after >= before {
		t.Errorf("the store holds %d bytes after the repack and prune, %d before", after, before)
	}
	h, _ := repo.LoadHistory(ctx, st)
	if n := len(h.Snapshots[0].Archives); n > 2 {
		t.Errorf("the head points into %d archives, want at most 2", n)
	}
	// A second repack finds nothing worth doing: no ping-pong.
	again, err := Repack(ctx, RepackOptions{Store: st, Policy: RepackPolicy{MaxUnused: 0.01, MaxArchives: 2}, Log: zerolog.Nop()})
	if err != nil || len(again.Repacked) != 0 {
		t.Errorf("a second repack right after: %+v %v, want nothing to do", again, err)
	}
	// The next snapshot builds on the repacked head.
	// (Its delta compares entries that now point into the new archive.)
}

// TestRepackGraceKeepsReplacedArchives: prune keeps what a repack replaced
// until the grace period is over, then deletes it.
func TestRepackGraceKeepsReplacedArchives(t *testing.T) {
	testenv.Long(t, "repacks a generated history")
	ctx := context.Background()
	st, _, _ := history(t, 5, 3)
	res, err := Repack(ctx, RepackOptions{Store: st, Policy: RepackPolicy{MaxUnused: 0, MaxArchives: 1}, Log: zerolog.Nop()})
	if err != nil || len(res.Repacked) == 0 {
		t.Fatalf("repack: %+v %v", res, err)
	}
	now := time.Now()
	run := func(at time.Time) []prune.Deletion {
		p, err := prune.Run(ctx, prune.Options{Store: st, Policy: retention.Policy{Last: 3}, RepackGrace: time.Hour, Now: func() time.Time { return at }, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		return p.Delete
	}
	if d := run(now.Add(30 * time.Minute)); len(d) != 0 {
		t.Errorf("within the grace period prune deleted %v", d)
	}
	d := run(now.Add(2 * time.Hour))
	if len(d) != len(res.Repacked) {
		t.Errorf("after the grace period prune deleted %v, want the %d repacked archives", d, len(res.Repacked))
	}
}

// TestRepackDryRunChangesNothing: a dry run says what it would repack and
// writes nothing.
func TestRepackDryRunChangesNothing(t *testing.T) {
	testenv.Long(t, "repacks a generated history")
	st, _, _ := history(t, 5, 3)
	before := snaptest.Keys(t, st)
	res, err := Repack(context.Background(), RepackOptions{Store: st, Policy: RepackPolicy{MaxUnused: 0}, DryRun: true, Log: zerolog.Nop()})
	if err != nil || len(res.Repacked) == 0 || res.ID != "" {
		t.Fatalf("dry run: %+v %v, want archives listed and none written", res, err)
	}
	if after := snaptest.Keys(t, st); !slices.Equal(before, after) {
		t.Errorf("a dry run changed the store:\n%v\n%v", before, after)
	}
}

// TestRepackCopiesInBatches: a repack copies while it scans, a batch of
// versions at a time, so that it never holds every copied file's entry.
// With batches of three, most stored ranges are split between batches
// and read once per batch; every kept snapshot still restores exactly
// once the replaced archives are gone.
func TestRepackCopiesInBatches(t *testing.T) {
	testenv.Long(t, "repacks and restores a generated history")
	defer func(n int) { copyBatch = n }(copyBatch)
	copyBatch = 3
	ctx := context.Background()
	home := snaptest.GenHome(t, 4)
	// A file over several frames: its copy spans frames too.
	big := filepath.Join(home, "jobs", "big", "builds", "1", "archive", "big.bin")
	if err := os.MkdirAll(filepath.Dir(big), 0o755); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 3*archive.FrameSize+12345)
	rand.New(rand.NewSource(1)).Read(blob)
	if err := os.WriteFile(big, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	st, _, trees := historyOf(t, home, 5, 3)
	res, err := Repack(ctx, RepackOptions{Store: st, Policy: RepackPolicy{MaxUnused: 0.01, MaxArchives: 2}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if res.ID == "" || res.Copied <= 10*copyBatch {
		t.Fatalf("repack: %+v, want many batches copied", res)
	}
	pruneAll(t, st, 3)
	referenced(t, st)
	assertRestores(t, st, trees)
	if v, err := check.Verify(ctx, check.Options{Store: st}); err != nil || v.Problems != 0 {
		t.Errorf("verify after the repack and prune: %+v %v", v, err)
	}
}

// TestRepackRefusesALayerChangedSinceTheScan: a layer's entries are
// re-pointed by their order in the scan; when the layer read for the
// rewrite lists them otherwise (fewer than scanned, or another path where
// a copied file was), it is left as it was and the repack fails, rather
// than pointing an entry at another file's bytes.
func TestRepackRefusesALayerChangedSinceTheScan(t *testing.T) {
	ctx := context.Background()
	st, _, _ := historyOf(t, snaptest.GenHome(t, 1), 1, 1)
	h, err := repo.LoadHistory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	lid, chosen := h.Snapshots[0].ID, map[string]bool{}
	for _, a := range h.Snapshots[0].Archives {
		chosen[a] = true
	}
	key := repo.ManifestKey(lid)
	before := snaptest.Object(t, st, key)
	var n int // its entries in the chosen archives
	m, err := repo.OpenLayer(ctx, st, lid)
	if err != nil {
		t.Fatal(err)
	}
	for e, err := m.Next(); err == nil; e, err = m.Next() {
		if e.Type != archive.TypeDeleted && chosen[e.Archive] {
			n++
		}
	}
	m.Close()
	somewhere := func(int32, string) (where, bool) { return where{0, 1}, true }
	elsewhere := func(int32, string) (where, bool) { return where{}, false }
	copied := make([]int32, n) // each its own copy, numbered 0
	for name, c := range map[string]struct {
		moves []int32
		at    func(int32, string) (where, bool)
	}{
		"one entry fewer than scanned":         {copied[1:], somewhere},
		"one entry more than scanned":          {append(slices.Clone(copied), 0), somewhere},
		"another path where a copied file was": {copied, elsewhere},
	} {
		t.Run(name, func(t *testing.T) {
			err := rewriteLayer(ctx, st, lid, chosen, "new", c.moves, c.at)
			if err == nil || !strings.Contains(err.Error(), "changed while it was repacked") {
				t.Fatalf("rewrite: %v, want the layer refused", err)
			}
			if after := snaptest.Object(t, st, key); !slices.Equal(before, after) {
				t.Fatal("the refused layer was overwritten")
			}
		})
	}
}

// failingStore stops writing at the Nth write (Put, Swap or Delete), as a
// repack killed there would: nothing after it happens.
type failingStore struct {
	store.Store
	left atomic.Int64
}

var errKilled = errors.New("killed")

func (s *failingStore) write() error {
	if s.left.Add(-1) < 0 {
		return errKilled
	}
	return nil
}

func (s *failingStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := s.write(); err != nil {
		io.Copy(io.Discard, r)
		return err
	}
	return s.Store.Put(ctx, key, r)
}

func (s *failingStore) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	if err := s.write(); err != nil {
		return "", err
	}
	return s.Store.Swap(ctx, key, data, old)
}

func (s *failingStore) Delete(ctx context.Context, keys ...string) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, keys...)
}

// TestRepackKilledAtEachStep: a repack stopped at any of its writes (the
// note, the archive, each record, each manifest layer) leaves every kept
// snapshot restorable; a prune right after deletes nothing they point
// into; and the next repack finishes the job, after which they still
// restore exactly.
func TestRepackKilledAtEachStep(t *testing.T) {
	testenv.Long(t, "kills a repack at each of its writes")
	ctx := context.Background()
	_, fixture, trees := historyOf(t, snaptest.GenHome(t, 1), 6, 3)
	policy := RepackPolicy{MaxUnused: 0.01, MaxArchives: 2}
	for n := int64(0); ; n++ {
		dir := snaptest.CopyDir(t, fixture)
		plain, err := file.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		fs := &failingStore{Store: plain}
		fs.left.Store(n)
		res, err := Repack(ctx, RepackOptions{Store: fs, Policy: policy, Log: zerolog.Nop()})
		if err == nil {
			if n < 4 {
				t.Fatalf("the repack made only %d writes: %+v", n, res)
			}
			t.Logf("a repack makes %d writes; each was interrupted", n)
			return
		}
		t.Run(fmt.Sprint("killed at write ", n+1), func(t *testing.T) {
			if !errors.Is(err, errKilled) {
				t.Fatalf("repack failed with %v, not the injected kill", err)
			}
			pruneAll(t, plain, 3)
			referenced(t, plain)
			assertRestores(t, plain, trees)
			if _, err := Repack(ctx, RepackOptions{Store: plain, Policy: policy, Log: zerolog.Nop()}); err != nil {
				t.Fatalf("the repack after: %v", err)
			}
			pruneAll(t, plain, 3)
			referenced(t, plain)
			assertRestores(t, plain, trees)
			h, _ := repo.LoadHistory(ctx, plain)
			if n := len(h.Snapshots[0].Archives); n > 2 {
				t.Errorf("after the repack that finished the job the head points into %d archives", n)
			}
		})
	}
}

// storedBytes sums the sizes of the store's objects.
func storedBytes(t *testing.T, st store.Store) (n int64) {
	t.Helper()
	if err := st.List(context.Background(), "", func(o store.Object) error { n += o.Size; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
