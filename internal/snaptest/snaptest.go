// Package snaptest holds what the tests of snapshot, restore, check and
// maint share: a store and a home to work on, a snapshot taken the usual
// way, and comparisons of homes. It never imports restore, so that
// restore's own tests can use it.
package snaptest

import (
	"context"
	"crypto/rand"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testhome"
)

// NewStore is an empty file store in a temporary directory.
func NewStore(t testing.TB) store.Store {
	t.Helper()
	s, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// NewHome is the testhome fixture in a temporary directory.
func NewHome(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := testhome.Build(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Jenkins is the jenkins preset's selection.
func Jenkins(t testing.TB) *selector.Selector {
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// Snap takes a snapshot of home's jenkins selection into st.
func Snap(t testing.TB, home string, st store.Store) *snapshot.Result {
	t.Helper()
	return SnapWith(t, home, st, 0)
}

// SnapWith is Snap with a bound on the manifest chain (0: the default).
func SnapWith(t testing.TB, home string, st store.Store, maxChain int) *snapshot.Result {
	t.Helper()
	res, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: Jenkins(t), Log: zerolog.Nop(), MaxManifestChain: maxChain})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return res
}

// Selected reads the selected part of a home, as a restore must reproduce it.
func Selected(t testing.TB, home string) testhome.Tree {
	t.Helper()
	tree, err := testhome.Read(home, Jenkins(t).Selected)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// All reads the whole home.
func All(t testing.TB, home string) testhome.Tree {
	t.Helper()
	tree, err := testhome.Read(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// AssertSame fails with the first differences between two trees.
func AssertSame(t testing.TB, want, got testhome.Tree) {
	t.Helper()
	if d := testhome.Diff(want, got); len(d) > 0 {
		if len(d) > 20 {
			d = append(d[:20], "...")
		}
		t.Fatalf("trees differ:\n%s", strings.Join(d, "\n"))
	}
}

// AssertNoStaging fails when a restore left its state in home.
func AssertNoStaging(t testing.TB, home string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(home, ".homesnap-*"))
	if len(left) > 0 {
		t.Errorf("staging left behind: %v", left)
	}
}

// Write creates root/rel with data, and its parents.
func Write(t testing.TB, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
		t.Fatal(err)
	}
}

// WriteRandomFile creates home/rel with n random bytes.
func WriteRandomFile(t testing.TB, home, rel string, n int) {
	t.Helper()
	p := filepath.Join(home, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Keys lists the store's objects.
func Keys(t testing.TB, st store.Store) []string {
	t.Helper()
	var out []string
	if err := st.List(context.Background(), "", func(o store.Object) error { out = append(out, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Object reads the whole of the store's object key.
func Object(t testing.TB, st store.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// manyFiles is a home of thousands of small files: the shape where a full
// manifest per snapshot costs far more than what changed.
var manyFiles = gen.Preset{
	Name: "many-small-files", Folders: 4, MaxDepth: 3, Freestyle: 30, Pipelines: 30,
	Multibranch: 2, Branches: 3, Builds: 6,
	LogMedian: 512, LogSigma: 0.5, LogMax: 4 << 10, FlowNodes: 8,
	Agents: 6, Plugins: 2, PluginMedian: 1 << 10, Fingerprints: 200, WorkspaceFiles: 10,
}

// GenHome generates a home of many small files with the given mean
// builds per job.
func GenHome(t testing.TB, builds int) string {
	t.Helper()
	dir := t.TempDir()
	p := manyFiles
	p.Builds = builds
	if _, err := gen.Generate(dir, gen.Options{Custom: &p, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CopyFile copies one file.
func CopyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// CopyDir copies a store fixture, so that a test may write to it.
func CopyDir(t testing.TB, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, filepath.Join(to, rel))
		}
		CopyFile(t, p, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}
