package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store/file"
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
	unselected := func(rel string) bool { return rel != "" && !sel.Selected(rel) && !kept(rel) }
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
			storeDir := behindStore(t, filepath.Join(corpus, name), home)
			before := wholeTree(t, home)
			keep, _ := testhome.Read(home, unselected)
			r := run(t, "restore", nil, "--home", home, "--store", storeDir, "--log-format", "json")
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

// behindStore copies a corpus store and makes home an unchanged home of an
// older snapshot of it: the copy's head gets a parent (records only), and
// the home a mark naming that parent. The restore then decides on a delta
// restore, the init container's everyday path, and the engine's own
// defences meet the hostile snapshot (an unmarked home would be refused
// before the store is read).
func behindStore(t *testing.T, corpus, home string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", corpus+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	ctx := context.Background()
	st, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, _, err := repo.LoadHead(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	const parent = "20251231T000000.000Z-01d000"
	at := time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, r := range []*repo.Record{{ID: parent, Time: at}, {ID: head.Snapshot, Parent: parent, Time: at.Add(time.Hour)}} {
		if err := repo.WriteRecord(ctx, st, r); err != nil {
			t.Fatal(err)
		}
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	print, err := homemark.TakeFingerprint(ctx, testhome.Open(t, home), sel)
	if err != nil {
		t.Fatal(err)
	}
	mark := &homemark.Mark{Store: st.String(), Snapshot: parent, Time: at, Selection: sel.Spec(), Print: print}
	if err := homemark.Write(testhome.Open(t, home), mark); err != nil {
		t.Fatal(err)
	}
	return dir
}
