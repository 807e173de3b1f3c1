package gen

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// changed counts files and symlinks added, removed or changed between two
// scans (directories are not counted: churn's fraction is about entries).
func changed(before, after map[string]Entry) (n int, newest time.Time) {
	for rel, a := range after {
		if a.Mode.IsDir() {
			continue
		}
		if b, ok := before[rel]; !ok || b != a {
			n++
			if a.Mtime.After(newest) {
				newest = a.Mtime
			}
		}
	}
	for rel, b := range before {
		if _, ok := after[rel]; !ok && !b.Mode.IsDir() {
			n++
		}
	}
	return n, newest
}

func TestChurnTouchesRequestedFraction(t *testing.T) {
	for _, frac := range []float64{0.02, 0.1, 0.3} {
		dir, _ := generate(t, "tiny", 1)
		before, err := Scan(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := Churn(dir, ChurnOptions{Fraction: frac, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		after, err := Scan(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := changed(before, after)
		if n != st.Touched {
			t.Errorf("fraction %v: Churn reported %d touched, the tree shows %d changed", frac, st.Touched, n)
		}
		want := frac * float64(st.Entries)
		if float64(n) < 0.9*want || float64(n) > 1.1*want+8 {
			t.Errorf("fraction %v: %d of %d entries changed, want about %.0f (%v)", frac, n, st.Entries, want, st)
		}
	}
}

func TestChurnIsDeterministic(t *testing.T) {
	a, _ := generate(t, "tiny", 4)
	b, _ := generate(t, "tiny", 4)
	for round := int64(1); round <= 3; round++ {
		sa, err := Churn(a, ChurnOptions{Fraction: 0.1, Seed: round})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := Churn(b, ChurnOptions{Fraction: 0.1, Seed: round})
		if err != nil {
			t.Fatal(err)
		}
		if sa != sb {
			t.Fatalf("round %d: stats differ: %v vs %v", round, sa, sb)
		}
	}
	diffs, err := Compare(a, b, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("same rounds, %d differences, first: %s", len(diffs), diffs[0])
	}
	if _, err := Churn(b, ChurnOptions{Fraction: 0.1, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	if diffs, _ := Compare(a, b, CompareOptions{}); len(diffs) == 0 {
		t.Fatal("another round changed nothing")
	}
}

// Every kind of change shows up over a few rounds, and each round's mtimes
// are newer than everything before it, even when rounds run back to back.
func TestChurnKindsAndTimes(t *testing.T) {
	dir, _ := generate(t, "tiny", 5)
	var total ChurnStats
	prev, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var newestBefore time.Time
	for _, e := range prev {
		if e.Mtime.After(newestBefore) {
			newestBefore = e.Mtime
		}
	}
	for round := int64(1); round <= 6; round++ {
		st, err := Churn(dir, ChurnOptions{Fraction: 0.1, Seed: round})
		if err != nil {
			t.Fatal(err)
		}
		cur, err := Scan(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		for rel, e := range cur {
			if old, ok := prev[rel]; (!ok || old.Mtime != e.Mtime) && !e.Mtime.After(newestBefore) {
				t.Errorf("round %d: %s got mtime %v, not after the previous state's newest %v", round, rel, e.Mtime, newestBefore)
			}
		}
		for _, e := range cur {
			if e.Mtime.After(newestBefore) {
				newestBefore = e.Mtime
			}
		}
		prev = cur
		total.LogsAppended += st.LogsAppended
		total.BuildsAdded += st.BuildsAdded
		total.BuildsDeleted += st.BuildsDeleted
		total.ConfigsEdited += st.ConfigsEdited
		total.Chmods += st.Chmods
		total.Symlinked += st.Symlinked
	}
	if total.LogsAppended == 0 || total.BuildsAdded == 0 || total.BuildsDeleted == 0 || total.ConfigsEdited == 0 || total.Chmods == 0 || total.Symlinked == 0 {
		t.Errorf("some kind of change never happened: %+v", total)
	}
	// New builds moved nextBuildNumber past every build directory.
	err = filepath.WalkDir(filepath.Join(dir, "jobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "nextBuildNumber" {
			return err
		}
		next := readInt(t, p)
		builds, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "builds", "[0-9]*"))
		for _, b := range builds {
			if n, err := strconv.Atoi(filepath.Base(b)); err != nil || n >= next {
				t.Errorf("%s: build %s not below nextBuildNumber %d", p, b, next)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestChurnRejectsBadInput(t *testing.T) {
	dir, _ := generate(t, "tiny", 1)
	for _, f := range []float64{0, -0.1, 1.5} {
		if _, err := Churn(dir, ChurnOptions{Fraction: f, Seed: 1}); err == nil {
			t.Errorf("fraction %v accepted", f)
		}
	}
	if _, err := Churn(t.TempDir(), ChurnOptions{Fraction: 0.1, Seed: 1}); err == nil {
		t.Error("churned an empty directory")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
