package check

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testhome"
)

// fixture is a store holding a home, then the home changed; each subtest
// of TestVerify damages a copy of it.
type fixture struct {
	dir           string
	first, second *snapshot.Result
}

func (f *fixture) copy(t *testing.T) (dir string, st store.Store, first, second *snapshot.Result) {
	t.Helper()
	dir = t.TempDir()
	if out, err := exec.Command("cp", "-a", f.dir+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	st, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st, f.first, f.second
}

func TestVerify(t *testing.T) {
	home := snaptest.NewHome(t)
	f := &fixture{dir: t.TempDir()}
	st, err := file.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	f.first = snaptest.Snap(t, home, st)
	testhome.Change(t, home)
	f.second = snaptest.Snap(t, home, st)
	t.Run("reads every file once", func(t *testing.T) { verifyReadsEveryFileOnce(t, f) })
	t.Run("finds a flipped byte", func(t *testing.T) { verifyFindsAFlippedByte(t, f) })
	t.Run("names a missing archive once", func(t *testing.T) { verifyNamesAMissingArchiveOnce(t, f) })
	t.Run("names a truncated manifest", func(t *testing.T) { verifyNamesATruncatedManifest(t, f) })
	t.Run("structure reads no archive", func(t *testing.T) { verifyStructureReadsNoArchive(t, f) })
}

func verify(st store.Store, structure bool, ids ...string) (*Result, []Problem, error) {
	var problems []Problem
	res, err := Verify(context.Background(), Options{Store: st, Snapshots: ids, Structure: structure,
		OnProblem: func(p Problem) { problems = append(problems, p) }})
	return res, problems, err
}

func verifyReadsEveryFileOnce(t *testing.T, f *fixture) {
	_, st, first, second := f.copy(t)
	res, problems, err := verify(st, false)
	if err != nil || len(problems) > 0 {
		t.Fatalf("verify of an intact store: %v %v", err, problems)
	}
	if !slices.Equal(res.Snapshots, []string{first.ID, second.ID}) || len(res.Damaged) > 0 {
		t.Fatalf("checked %v (damaged %v), want both snapshots oldest first", res.Snapshots, res.Damaged)
	}
	// Every file of the first snapshot, and the files the second added.
	if res.Files < first.Totals.Files || res.Files > first.Totals.Files+second.Totals.New {
		t.Errorf("checked %d files; the snapshots hold %d, then %d new entries", res.Files, first.Totals.Files, second.Totals.New)
	}
	one, _, _ := verify(st, false, first.ID)
	two, _, _ := verify(st, false, second.ID)
	if res.Bytes >= one.Bytes+two.Bytes {
		t.Errorf("the history read %d bytes, as much as its snapshots checked one by one (%d + %d): shared content was read twice", res.Bytes, one.Bytes, two.Bytes)
	}
}

// corrupted checks that verify reports one problem naming wantObject and
// fails with archive.ErrCorrupt.
func corrupted(t *testing.T, st store.Store, structure bool, wantObject string, wantDamaged int) *Result {
	t.Helper()
	res, problems, err := verify(st, structure)
	if !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("err = %v, want a corrupt-store error", err)
	}
	if len(problems) != 1 || !strings.HasSuffix(problems[0].Object, wantObject) || !strings.Contains(problems[0].Err.Error(), wantObject) {
		t.Fatalf("problems %+v, want one naming %s", problems, wantObject)
	}
	if res.Problems != 1 || len(res.Damaged) != wantDamaged {
		t.Errorf("result: %d problems, damaged %v; want 1 problem, %d damaged", res.Problems, res.Damaged, wantDamaged)
	}
	return res
}

func verifyFindsAFlippedByte(t *testing.T, f *fixture) {
	dir, st, first, _ := f.copy(t)
	p := filepath.Join(dir, "archives", first.ID+".tar.zst")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Both snapshots need the first archive: the problem is reported once.
	corrupted(t, st, false, "archives/"+first.ID+".tar.zst", 2)
}

func verifyNamesAMissingArchiveOnce(t *testing.T, f *fixture) {
	dir, st, first, second := f.copy(t)
	if err := os.Remove(filepath.Join(dir, "archives", first.ID+".tar.zst")); err != nil {
		t.Fatal(err)
	}
	res := corrupted(t, st, false, "archives/"+first.ID+".tar.zst", 2)
	if !slices.Equal(res.Damaged, []string{first.ID, second.ID}) {
		t.Errorf("damaged %v", res.Damaged)
	}
}

func verifyNamesATruncatedManifest(t *testing.T, f *fixture) {
	dir, st, _, second := f.copy(t)
	p := filepath.Join(dir, "snapshots", second.ID+".json.zst")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	res := corrupted(t, st, false, "snapshots/"+second.ID+".json.zst", 1)
	if res.Damaged[0] != second.ID {
		t.Errorf("damaged %v, want %s", res.Damaged, second.ID)
	}
}

// The structure check reads manifests only: a missing archive is found
// from the listing, without a byte of archive content.
func verifyStructureReadsNoArchive(t *testing.T, f *fixture) {
	dir, inner, first, _ := f.copy(t)
	st := &countingStore{Store: inner}
	res, problems, err := verify(st, true)
	if err != nil || len(problems) > 0 || res.Files != 0 {
		t.Fatalf("structure check of an intact store: %v %v (%d files read)", err, problems, res.Files)
	}
	if err := os.Remove(filepath.Join(dir, "archives", first.ID+".tar.zst")); err != nil {
		t.Fatal(err)
	}
	corrupted(t, st, true, "archives/"+first.ID+".tar.zst", 2)
	if st.gets > 0 || st.archiveBytes > 0 {
		t.Errorf("the structure check read %d archive bytes in %d requests", st.archiveBytes, st.gets)
	}
	// A truncated archive is shorter than its entries need.
	p := filepath.Join(dir, "archives", res.Snapshots[1]+".tar.zst")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, problems, _ := verify(st, true); len(problems) != 2 || !strings.Contains(problems[1].Err.Error()+problems[0].Err.Error(), "holds") {
		t.Errorf("truncated archive: problems %v", problems)
	}
}
