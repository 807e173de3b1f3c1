package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testenv"
)

// TestRestoreDecidesAlikeAfterAConsolidation: the sidecar consolidates the
// head right after a snapshot (a snapshot of the same tree, copied from the
// store without walking the home). A restore into that home then decides
// as it would have had the walked snapshot stayed the head: nothing to do
// when the home is unchanged, a delta back to an older snapshot with --at,
// nothing when the consolidated head is named (which walks the home and
// compares the fingerprint the consolidation carried), and, once Jenkins
// wrote to it, nothing for the head with the new build kept (a mark naming
// the head is not walked). It used to mark the home with an empty
// fingerprint, so an unchanged home read as changed and --at was refused
// as diverged.
func TestRestoreDecidesAlikeAfterAConsolidation(t *testing.T) {
	testenv.Long(t, "consolidates and restores through the binaries")
	// One large archive, then small ones: the small ones are merged once
	// the head points into more than two.
	home, storeDir := buildHome(t, "jobs/test/builds/1/archive/big.bin", 1<<20), t.TempDir()
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json", "HOMESNAP_CONSOLIDATE_MAX_ARCHIVES=2"}
	restore := func(what string, want string, args ...string) result {
		t.Helper()
		r := run(t, "restore", env, append([]string{"--home", home}, args...)...)
		if got, _ := outcome(t, r); r.code != 0 || got != want {
			t.Fatalf("%s: exit %d, decision %q; want %q\n%s", what, r.code, got, want, tail(r.stderr, 3000))
		}
		return r
	}
	builds := 20
	// consolidate takes snapshots of a home Jenkins adds builds to until
	// one is followed by a consolidation; the consolidated snapshot is
	// the head.
	consolidate := func() (head string) {
		t.Helper()
		for range 6 {
			builds++
			writeRandom(t, home, fmt.Sprintf("jobs/test/builds/%d/log", builds), 8<<10)
			ids := strings.Fields(ok(t, run(t, "snapshot", env, "--once", "--repack=false", "--home", home)))
			if len(ids) == 2 { // the walked snapshot, then the consolidated one
				return ids[1]
			}
		}
		t.Fatal("no snapshot was consolidated")
		return ""
	}

	first := strings.TrimSpace(ok(t, run(t, "snapshot", env, "--once", "--home", home)))
	wantFirst := selectedTree(t, home)
	head := consolidate()
	r := restore("unchanged home after a consolidation", "nothing")
	if _, id := outcome(t, r); id != head {
		t.Fatalf("decided about %s, want the consolidated head %s", id, head)
	}
	restore("--at the first snapshot after a consolidation", "delta", "--at", idTime(t, first).Add(time.Millisecond).Format(time.RFC3339Nano))
	same(t, "the home restored to the first snapshot", wantFirst, selectedTree(t, home))

	head = consolidate()
	restore("unchanged home after a consolidation, the head named", "nothing", "--snapshot", head)
	writeRandom(t, home, "jobs/test/builds/99/log", 100)
	restore("home changed after a consolidation", "nothing")
	if _, err := os.Stat(filepath.Join(home, "jobs/test/builds/99/log")); err != nil {
		t.Fatalf("the new build did not survive: %v", err)
	}
}
