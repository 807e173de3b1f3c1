package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestDeltaManifestsThroughTheBinaries: an incremental's record lists the
// manifests it needs (--list shows them), it restores exactly, and when one
// of them is missing the restore exits 6 (corrupt store) naming it and
// leaves the home alone.
func TestDeltaManifestsThroughTheBinaries(t *testing.T) {
	testenv.Long(t, "takes many delta snapshots through the binaries")
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	env := []string{"HOMESNAP_HOME=" + home, "HOMESNAP_STORE=" + storeDir}
	id1 := ok(t, run(t, "snapshot", env, "--once"))
	testhome.Change(t, home)
	id2 := ok(t, run(t, "snapshot", env, "--once"))
	var recs []struct {
		ID        string   `json:"id"`
		Manifests []string `json:"manifests"`
	}
	out := ok(t, run(t, "homesnap", env, "list", "--output", "json"))
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("--list --output json: %v\n%s", err, out)
	}
	if len(recs[0].Manifests) != 0 || !slices.Equal(recs[1].Manifests, []string{id1, id2}) {
		t.Errorf("--list: the incremental must need its own and its parent's manifest:\n%s", out)
	}
	if table := ok(t, run(t, "homesnap", env, "list")); !strings.Contains(table, "MANIFESTS") {
		t.Errorf("--list table has no MANIFESTS column:\n%s", table)
	}
	target := t.TempDir()
	ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir))
	if d := testhome.Diff(selectedTree(t, home), selectedTree(t, target)); len(d) > 0 {
		t.Fatalf("restore through a delta differs: %v", d[:min(len(d), 5)])
	}

	base := filepath.Join(storeDir, "snapshots", id1+".json.zst")
	if err := os.Remove(base); err != nil {
		t.Fatal(err)
	}
	other := buildHome(t, "", 0) // a home the store knows nothing about
	before := selectedTree(t, other)
	r := run(t, "restore", nil, "--home", other, "--store", storeDir, "--force")
	if r.code != 6 || !strings.Contains(r.stderr, "snapshots/"+id1+".json.zst") {
		t.Errorf("restore with its base manifest missing: exit %d, want 6 naming snapshots/%s.json.zst\n%s", r.code, id1, tail(r.stderr, 5))
	}
	if d := testhome.Diff(before, selectedTree(t, other)); len(d) > 0 {
		t.Errorf("a failed restore changed the home: %v", d[:min(len(d), 5)])
	}
}
