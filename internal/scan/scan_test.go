package scan

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// reference lists the selected paths the simple way: a full walk, filtered
// and sorted afterwards.
func reference(t *testing.T, home string, sel *selector.Selector) []string {
	var want []string
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(home, p)
		if rel != "." && sel.Selected(filepath.ToSlash(rel)) {
			want = append(want, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.SortFunc(want, archive.ComparePaths)
	return want
}

func walk(t *testing.T, home string, sel *selector.Selector) []*archive.Entry {
	return walkHome(t, testhome.Open(t, home), sel)
}

func walkHome(t *testing.T, home *homefs.Home, sel *selector.Selector) []*archive.Entry {
	var got []*archive.Entry
	if err := Walk(context.Background(), home, sel, nil, func(e *archive.Entry) error {
		got = append(got, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWalksOfOneHomeSeeTheSame: a command opens its home once and walks
// it again and again (a sidecar, for as long as it runs); every walk sees
// the whole selection, not only the first.
func TestWalksOfOneHomeSeeTheSame(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home")
	if _, err := gen.Generate(path, gen.Options{Preset: "small", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	home := testhome.Open(t, path)
	first := walkHome(t, home, sel)
	if len(first) == 0 {
		t.Fatal("the first walk found nothing")
	}
	if again := walkHome(t, home, sel); len(again) != len(first) {
		t.Fatalf("the second walk of the same home found %d paths, the first %d", len(again), len(first))
	}
}

func TestWalkReportsTheSelectionInOrder(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := gen.Generate(home, gen.Options{Preset: "small", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	want := reference(t, home, sel)
	for range 3 { // the prefetching workers must never change the order
		var got []string
		for _, e := range walk(t, home, sel) {
			got = append(got, e.Path)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("walk gave %d paths, reference %d; first difference near %v", len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []string) []string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return []string{a[i], b[i]}
		}
	}
	return nil
}

func TestImpliedParentsAndSymlinksAreNotFollowed(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(home, "users/admin"), 0o755)
	os.WriteFile(filepath.Join(home, "users/admin/config.xml"), []byte("<user/>"), 0o644)
	os.MkdirAll(filepath.Join(home, "users/empty"), 0o755)
	os.Symlink(outside, filepath.Join(home, "users/link"))
	sel, _ := selector.New(selector.Spec{Preset: "none", Include: []string{"users/*/config.xml", "users/link/**"}})
	var got []string
	for _, e := range walk(t, home, sel) {
		s := e.Path
		if e.Implied {
			s += " (implied)"
		}
		got = append(got, s)
	}
	// The link itself is selected (** matches nothing); what it points to
	// is never walked.
	want := []string{"users (implied)", "users/admin (implied)", "users/admin/config.xml", "users/link"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A directory whose listing takes several getdents calls (its entries fill
// more than one buffer) is listed whole.
func TestWalkListsADirectoryLargerThanOneRead(t *testing.T) {
	home := t.TempDir()
	builds := filepath.Join(home, "jobs", "big", "builds")
	if err := os.MkdirAll(builds, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 3000 // ~64-byte names: about 250 KB of directory entries
	for i := range n {
		name := fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 56))
		if err := os.WriteFile(filepath.Join(builds, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	want := reference(t, home, sel)
	var got []string
	for _, e := range walk(t, home, sel) {
		got = append(got, e.Path)
	}
	if len(want) < n || !slices.Equal(got, want) {
		t.Fatalf("walk gave %d paths, reference %d (of %d files); first difference near %v", len(got), len(want), n, firstDiff(got, want))
	}
}
