package scan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// Below a directory, Subtrees reports what Walk reports below it, entry for
// entry, implied directories included.
func TestSubtreesBelowIsWalkBelowADirectory(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := gen.Generate(home, gen.Options{Preset: "tiny", Seed: 5}); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []selector.Spec{{Preset: "jenkins"}, {Preset: "none", Include: []string{"jobs/*/config.xml", "jobs/**/builds/*/build.xml"}}} {
		sel, _ := selector.New(spec)
		all := walk(t, home, sel)
		trees, err := OpenSubtrees(context.Background(), testhome.Open(t, home), sel, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer trees.Close()
		dirs := 0
		for _, d := range all {
			if d.Type != archive.TypeDir {
				continue
			}
			dirs++
			var want, got []string
			for _, e := range all {
				if strings.HasPrefix(e.Path, d.Path+"/") {
					want = append(want, describe(e))
				}
			}
			err := trees.Below(d.Path, !d.Implied, func(e *archive.Entry) error {
				got = append(got, describe(e))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("%v: below %s Below gave %d entries, Walk %d; first difference near %v", spec, d.Path, len(got), len(want), firstDiff(got, want))
			}
		}
		if dirs < 10 {
			t.Fatalf("%v: only %d directories to try", spec, dirs)
		}
	}
}

func describe(e *archive.Entry) string {
	s := show(e)
	if e.Implied {
		s += " implied"
	}
	return s
}

func show(e *archive.Entry) string {
	return strings.Join([]string{e.Path, fmt.Sprint(e.Type), e.Mode.String(), e.Link,
		itoa(int64(e.UID)), itoa(int64(e.GID)), itoa(e.Size), itoa(e.MTime), itoa(e.CTime), itoa(int64(e.Inode)), itoa(int64(e.Dev))}, " ")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Lstat makes the entry Walk makes, and nothing of what Walk leaves out.
func TestLstatIsTheWalksEntry(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "jobs/a"), 0o755)
	os.WriteFile(filepath.Join(home, "jobs/a/config.xml"), []byte("<x/>"), 0o640)
	os.Symlink("-1", filepath.Join(home, "jobs/a/lastFailed"))
	os.Symlink(home+"/jobs", filepath.Join(home, "jobs/link"))
	unix.Mkfifo(filepath.Join(home, "jobs/a/fifo"), 0o644)
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	root, err := homefs.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var st unix.Stat_t
	for _, e := range walk(t, home, sel) {
		got, err := Lstat(root, e.Path, &st)
		if err != nil || got == nil || show(got) != show(e) {
			t.Fatalf("Lstat %s: %v, %v; the walk has %s", e.Path, got, err, show(e))
		}
	}
	for _, rel := range []string{"jobs/a/fifo", "jobs/link/a/config.xml", "jobs/none"} {
		if got, err := Lstat(root, rel, &st); got != nil || err != nil {
			t.Fatalf("Lstat %s: %v, %v; want nothing", rel, got, err)
		}
	}
}
