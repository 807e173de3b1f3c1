package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// idTime is the time a snapshot ID records (to the millisecond).
func idTime(t *testing.T, id string) time.Time {
	t.Helper()
	at, _, _ := strings.Cut(id, "-")
	tm, err := time.Parse("20060102T150405.000Z", at)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestPointInTimeChecksTheChosenSnapshot: with --at, the encryption, the
// agent check and its master-key check are those of the snapshot --at
// chooses, not the head's. The store was migrated to age after its first
// snapshot: the head is encrypted, the snapshot at t1 is plain.
func TestPointInTimeChecksTheChosenSnapshot(t *testing.T) {
	testenv.Long(t, "takes and restores many snapshots through the binaries")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	key, _, _ := ageKeys(t)
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	id1 := ok(t, run(t, "snapshot", env, "--once", "--home", home))
	want1 := selectedTree(t, home)
	testhome.Change(t, home)
	id2 := ok(t, run(t, "snapshot", env, "--once", "--home", home, "--age-identity-file", key, "--age-migrate"))
	at := idTime(t, id1).Add(time.Millisecond).Format(time.RFC3339Nano)
	if !idTime(t, id2).After(idTime(t, id1).Add(time.Millisecond)) {
		t.Skip("both snapshots within a millisecond")
	}

	// A snapshot from before the store was encrypted and authenticated is
	// read only when the admin allows it: --at reads only authenticated
	// records, and its record has no tag (exit 10; it could have been
	// planted).
	if r := run(t, "homesnap", env, "check-agents", "--at", at, "--age-identity-file", key); r.code != 10 {
		t.Fatalf("--check-agents --at of a snapshot from before authentication: exit %d, want 10\n%s", r.code, tail(r.stderr, 2000))
	}
	env = append(env, "HOMESNAP_ALLOW_UNAUTHENTICATED=true")
	// (The test home's keys are broken on purpose: the check exits 1.)
	r := run(t, "homesnap", env, "check-agents", "--at", at, "--age-identity-file", key)
	if r.code > 1 || !strings.Contains(r.stdout, "checked:     snapshot "+id1) {
		t.Fatalf("--check-agents --at: exit %d, want the snapshot at %s (%s) checked:\n%s\n%s", r.code, at, id1, r.stdout, tail(r.stderr, 2000))
	}
	target := t.TempDir()
	r = run(t, "restore", env, "--home", target, "--at", at, "--age-identity-file", key)
	if action, id := outcome(t, r); r.code != 0 || action != "restore" || id != id1 {
		t.Fatalf("restore --at: exit %d, %q; want %s restored\n%s", r.code, r.stdout, id1, tail(r.stderr, 2000))
	}
	same(t, "restore --at of the plain snapshot", want1, wholeTree(t, target))
}
