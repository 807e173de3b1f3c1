package restore

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testhome"
)

var updateHostile = flag.Bool("update-hostile", false, "rewrite testdata/hostile from hostileCases")

func hostileDir() string { return filepath.Join(testhome.Fixtures(), "..", "hostile") }

// hostileHome builds the home every hostile store is restored into.
func hostileHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for rel, data := range map[string]string{
		"jobs/a/config.xml":        "<local/>\n",
		"jobs/a/workspace/keep.c":  "int keep;\n",
		"jobs/b/config.xml":        "<b/>\n",
		"nodes/n/config.xml":       "<slave>local</slave>\n",
		"secrets/master.key":       "local-key",
		"plugins/git.jpi":          "PK",
		"caches/git/objects":       "cache",
		"war/index.html":           "<html/>",
		"config.xml":               "<hudson/>",
		"jobs/a/builds/1/log":      "Started\n",
		"nodes/n/extra/state.json": "{}",
	} {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// TestHostileStores restores every store of testdata/hostile into the same
// home: refused ones must leave it exactly as it was, accepted ones must
// never touch an unselected path.
func TestHostileStores(t *testing.T) {
	if *updateHostile {
		if err := os.RemoveAll(hostileDir()); err != nil {
			t.Fatal(err)
		}
		if err := buildCorpus(hostileDir()); err != nil {
			t.Fatal(err)
		}
	}
	unselected := func(rel string) bool { return !snaptest.Jenkins(t).Selected(rel) && rel != "" }
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			st, err := file.Open(filepath.Join(hostileDir(), c.name))
			if err != nil {
				t.Fatal(err)
			}
			home := hostileHome(t)
			before := snaptest.All(t, home)
			keep, err := testhome.Read(home, unselected)
			if err != nil {
				t.Fatal(err)
			}
			_, err = restoreWith(home, st, "", nil)
			snaptest.AssertNoStaging(t, home)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("restore: %v, want an error saying %q", err, c.want)
				}
				snaptest.AssertSame(t, before, snaptest.All(t, home))
				if c.name == "dir-becomes-file-over-workspace" && !errors.Is(err, ErrInTheWay) {
					t.Errorf("not marked ErrInTheWay: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			after, _ := testhome.Read(home, unselected)
			for p, a := range keep {
				if a.Type == "d" { // their mtimes move as selected children come and go
					a.MTime = 0
					keep[p] = a
				}
			}
			for p, a := range after {
				if a.Type == "d" {
					a.MTime = 0
					after[p] = a
				}
			}
			snaptest.AssertSame(t, keep, after)
			if got, _ := os.ReadFile(filepath.Join(home, "jobs/a/config.xml")); string(got) != "<snap/>\n" {
				t.Errorf("jobs/a/config.xml = %q, want the snapshot's", got)
			}
			if c.name == "setuid-file" {
				tree := snaptest.All(t, home)
				if m := tree["jobs/a/run.sh"].Mode; m != 0o755 {
					t.Errorf("setuid file restored with mode %04o, want 0755", m)
				}
				if m := tree["nodes/n"].Mode; m != 0o2755 {
					t.Errorf("setgid directory restored with mode %04o, want 2755", m)
				}
			}
		})
	}
}

// TestHostileCorpusIsReproducible rebuilds the corpus and compares it with
// the committed files.
func TestHostileCorpusIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the corpus")
	}
	fresh := t.TempDir()
	if err := buildCorpus(fresh); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(fresh, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fresh, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(hostileDir(), rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("testdata/hostile/%s differs from what hostileCases build (%v): run go test ./internal/restore -run TestHostileStores -update-hostile", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
