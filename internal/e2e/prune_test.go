package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestRetentionThroughTheBinaries: snapshots with --keep-last 2 keep the
// store at two snapshots, both restorable; `prune --dry-run` explains and
// deletes nothing; `prune` with a stricter policy drops one more.
func TestRetentionThroughTheBinaries(t *testing.T) {
	testenv.Long(t, "takes and prunes many snapshots through the binaries")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 4 {
		if i > 0 {
			testhome.Change(t, home)
		}
		ids = append(ids, ok(t, run(t, "snapshot", nil, "--once", "--keep-last", "2", "--home", home, "--store", storeDir)))
	}
	want := selectedTree(t, home)
	idRE := regexp.MustCompile(`(?m)^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{6}`) // the first column
	list := ok(t, run(t, "homesnap", nil, "list", "--store", storeDir))
	if got := idRE.FindAllString(list, -1); strings.Join(got, " ") != ids[2]+" "+ids[3] {
		t.Fatalf("after --keep-last 2 the store lists %v, want %v %v:\n%s", got, ids[2], ids[3], list)
	}
	// Its record goes; its manifest stays as long as a kept snapshot's
	// delta manifest applies to it (TestDeltaManifestsThroughTheBinaries).
	if _, err := os.Stat(filepath.Join(storeDir, "snapshots", ids[0]+".json")); !os.IsNotExist(err) {
		t.Errorf("dropped snapshot %s still recorded: %v", ids[0], err)
	}

	dry := ok(t, run(t, "prune", nil, "--dry-run", "--keep-last", "1", "--store", storeDir))
	if !strings.Contains(dry, "would delete snapshots/"+ids[2]+".json ") || !strings.Contains(dry, "keep last 1, on-demand 3: kept 1 of 2") {
		t.Errorf("prune --dry-run does not explain what it would delete:\n%s", dry)
	}
	if got := idRE.FindAllString(ok(t, run(t, "homesnap", nil, "list", "--store", storeDir)), -1); len(got) != 2 {
		t.Errorf("--dry-run deleted something: %v", got)
	}
	ok(t, run(t, "prune", nil, "--keep-last", "1", "--store", storeDir))
	target := t.TempDir()
	ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir))
	same(t, "restore after prune", want, selectedTree(t, target))

	if r := run(t, "prune", nil, "--keep-daily", "-1", "--store", storeDir); r.code != 2 {
		t.Errorf("a negative count: exit %d, want 2:\n%s", r.code, r.stderr)
	}
}
