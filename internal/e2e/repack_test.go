package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestRepackThroughTheBinaries: a sidecar-style run (`snapshot --once
// --keep-last 2` after each change) repacks once replaced file versions
// leave archives partly unused: every kept snapshot, the oldest too,
// restores exactly; `prune --dry-run` says what it would repack and
// changes nothing. An encrypted store is repacked by the snapshot command
// (it has the identity and recipients) and left alone by prune.
func TestRepackThroughTheBinaries(t *testing.T) {
	testenv.Long(t, "snapshots, repacks and restores through the binaries, twice")
	t.Run("plain", func(t *testing.T) { repackThroughTheBinaries(t, nil) })
	t.Run("encrypted", func(t *testing.T) {
		key, _, _ := ageKeys(t)
		repackThroughTheBinaries(t, []string{"--age-identity-file", key})
	})
}

func repackThroughTheBinaries(t *testing.T, keyArgs []string) {
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
		r := run(t, "snapshot", env, append([]string{"--once", "--keep-last", "2", "--home", home, "--store", storeDir}, keyArgs...)...)
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
		ok(t, run(t, "restore", nil, append([]string{"--home", target, "--store", storeDir, "--snapshot", id}, keyArgs...)...))
		same(t, "restore of "+id+" after repacks", trees[id], selectedTree(t, target))
	}
	// One more replaced version, without a repack: the dry run explains.
	writeRandom(t, home, "jobs/test/builds/10/log", 300<<10)
	ok(t, run(t, "snapshot", env, append([]string{"--once", "--keep-last", "1", "--repack=false", "--home", home, "--store", storeDir}, keyArgs...)...))
	before := list(t, storeDir, nil)
	r := run(t, "prune", env, "--dry-run", "--keep-last", "1", "--repack-max-unused", "0", "--store", storeDir)
	dry := ok(t, r)
	switch {
	case keyArgs == nil && (!strings.Contains(dry, "would repack archives/") || !strings.Contains(dry, "% unused")):
		t.Errorf("prune --dry-run does not say what it would repack:\n%s", dry)
	case keyArgs != nil && (strings.Contains(dry, "repack") || !strings.Contains(r.stderr, "repack skipped: the store is encrypted")):
		t.Errorf("prune --dry-run on an encrypted store, which it cannot repack:\n%s\n%s", dry, r.stderr)
	}
	if after := list(t, storeDir, nil); len(after.ids) != len(before.ids) {
		t.Errorf("--dry-run changed the store: %v, then %v", before, after)
	}
}
