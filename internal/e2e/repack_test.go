package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testhome"
)

// TestRepackThroughTheBinaries: a sidecar-style run (`snapshot --once
// --keep-last 2` after each change) repacks once replaced file versions
// leave archives partly unused: every kept snapshot, the oldest too,
// restores exactly; `prune --dry-run` says what it would repack and
// changes nothing.
func TestRepackThroughTheBinaries(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	for k := range 4 {
		writeRandom(t, home, fmt.Sprintf("jobs/test/builds/%d/log", 10+k), 300<<10)
	}
	env := []string{"HOMESNAP_LOG_LEVEL=info", "HOMESNAP_REPACK_GRACE=0"}
	trees := map[string]testhome.Tree{}
	repacked := false
	for round := range 5 {
		if round > 0 { // one of the four logs replaced: its old version dies once its snapshots are dropped
			writeRandom(t, home, fmt.Sprintf("jobs/test/builds/%d/log", 10+round%4), 300<<10)
		}
		r := run(t, "snapshot", env, "--once", "--keep-last", "2", "--home", home, "--store", storeDir)
		id := ok(t, r)
		trees[strings.TrimSpace(id)] = selectedTree(t, home)
		repacked = repacked || strings.Contains(r.stderr, "repacked: the kept snapshots point into the new archive")
	}
	if !repacked {
		t.Fatal("no snapshot repacked, though old log versions left the first archive partly unused")
	}
	l := list(t, storeDir, nil)
	if len(l.ids) != 2 {
		t.Fatalf("the store keeps %d snapshots, want 2", len(l.ids))
	}
	for id := range trees {
		if !l.has(id) {
			continue
		}
		target := t.TempDir()
		ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir, "--snapshot", id))
		same(t, "restore of "+id+" after repacks", trees[id], selectedTree(t, target))
	}
	// One more replaced version, without a repack: the dry run explains.
	writeRandom(t, home, "jobs/test/builds/10/log", 300<<10)
	ok(t, run(t, "snapshot", env, "--once", "--keep-last", "1", "--repack=false", "--home", home, "--store", storeDir))
	before := list(t, storeDir, nil)
	dry := ok(t, run(t, "prune", nil, "--dry-run", "--keep-last", "1", "--repack-max-unused", "0", "--store", storeDir))
	if !strings.Contains(dry, "would repack archives/") || !strings.Contains(dry, "% unused") {
		t.Errorf("prune --dry-run does not say what it would repack:\n%s", dry)
	}
	if after := list(t, storeDir, nil); len(after.ids) != len(before.ids) {
		t.Errorf("--dry-run changed the store: %v, then %v", before, after)
	}
}
