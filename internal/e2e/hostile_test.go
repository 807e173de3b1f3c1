package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestRestoreBinaryAgainstHostileStores runs the restore binary against
// every store of testdata/hostile, with the expectations its README lists:
// a refused store exits non-zero with the listed message and leaves the
// home exactly as it was; an accepted one never touches an unselected path.
func TestRestoreBinaryAgainstHostileStores(t *testing.T) {
	corpus := filepath.Join(testhome.Fixtures(), "..", "hostile")
	readme, err := os.ReadFile(filepath.Join(corpus, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| ([a-z0-9-]+) \| .* \| (succeed|fail with "(.*)", home unchanged) \|$`)
	rows := row.FindAllStringSubmatch(string(readme), -1)
	if len(rows) < 10 {
		t.Fatalf("README lists %d cases", len(rows))
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	unselected := func(rel string) bool { return rel != "" && !sel.Selected(rel) }
	for _, m := range rows {
		name, want := m[1], m[3]
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			for rel, data := range map[string]string{
				"jobs/a/config.xml": "<local/>\n", "jobs/a/workspace/keep.c": "int keep;\n",
				"jobs/b/config.xml": "<b/>\n", "nodes/n/config.xml": "<slave/>\n", "secrets/master.key": "k",
				"plugins/git.jpi": "PK", "caches/git/objects": "c", "war/index.html": "<html/>", "config.xml": "<hudson/>",
			} {
				p := filepath.Join(home, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := wholeTree(t, home)
			keep, _ := testhome.Read(home, unselected)
			r := run(t, "restore", nil, "--home", home, "--store", filepath.Join(corpus, name), "--log-format", "json")
			if want != "" {
				if r.code == 0 || !strings.Contains(r.stderr, want) {
					t.Fatalf("exit %d, want a failure saying %q\nstderr: %s", r.code, want, r.stderr)
				}
				same(t, "home after a refused restore", before, wholeTree(t, home))
				return
			}
			ok(t, r)
			after, _ := testhome.Read(home, unselected)
			for _, tree := range []testhome.Tree{keep, after} {
				for p, a := range tree {
					if a.Type == "d" {
						a.MTime = 0
						tree[p] = a
					}
				}
			}
			same(t, "unselected paths", keep, after)
		})
	}
}
