package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testenv"
)

// outcome is the decision restore printed on stdout ("restore\tID").
func outcome(t *testing.T, r result) (action, id string) {
	t.Helper()
	action, id, _ = strings.Cut(strings.TrimSpace(r.stdout), "\t")
	return action, id
}

// logField returns a field of the last JSON log line whose message starts
// with msg.
func logField(stderr, msg, field string) any {
	var v any
	for _, line := range strings.Split(stderr, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec["message"].(string), msg) {
			v = rec[field]
		}
	}
	return v
}

// TestRestoreDecisions goes through every row of docs/usage.md's decision
// table with the built binaries, starting with the story of the issue: a
// job Jenkins created after the last snapshot survives the next pod start.
func TestRestoreDecisions(t *testing.T) {
	testenv.Long(t, "runs the restore binary through every decision")
	home, storeDir := buildHome(t, "jobs/test/builds/1/archive/big.bin", 4<<20), t.TempDir()
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	restore := func(home string, args ...string) result {
		t.Helper()
		return run(t, "restore", env, append([]string{"--home", home}, args...)...)
	}
	expect := func(what string, r result, code int, action string) {
		t.Helper()
		if got, _ := outcome(t, r); r.code != code || (action != "" && got != action) {
			t.Fatalf("%s: exit %d, decision %q; want exit %d, decision %q\n%s", what, r.code, got, code, action, tail(r.stderr, 3000))
		}
	}

	// Empty store: a first boot with --allow-empty, an error without.
	expect("empty store, --allow-empty", restore(t.TempDir(), "--allow-empty"), 0, "first-boot")
	expect("empty store", restore(t.TempDir()), 4, "")

	id1 := ok(t, run(t, "snapshot", env, "--once", "--home", home))
	want1 := selectedTree(t, home)

	// The home is at the head and unchanged: nothing to do.
	expect("home at the head", restore(home), 0, "nothing")

	// Jenkins creates a job and a build after the snapshot; the pod
	// restarts before the sidecar took another: the home is newer.
	writeRandom(t, home, "jobs/newjob/builds/1/log", 3000)
	expect("home newer than the store", restore(home), 0, "nothing")
	if _, err := os.Stat(filepath.Join(home, "jobs/newjob/builds/1/log")); err != nil {
		t.Fatalf("the new job did not survive: %v", err)
	}
	id2 := ok(t, run(t, "snapshot", env, "--once", "--home", home))
	want2 := selectedTree(t, home)

	// A new volume: the head is restored, and the home marked.
	fresh := t.TempDir()
	r := restore(fresh)
	expect("empty home", r, 0, "restore")
	if _, got := outcome(t, r); got != id2 {
		t.Errorf("restored %s, want the head %s", got, id2)
	}
	same(t, "restore into an empty home", want2, wholeTree(t, fresh))
	expect("restored home again", restore(fresh), 0, "nothing")

	// The store is newer than the home: only what changed is fetched.
	behind := t.TempDir()
	expect("restore of the first snapshot", restore(behind, "--snapshot", id1), 0, "restore")
	same(t, "restore of the first snapshot", want1, wholeTree(t, behind))
	r = restore(behind)
	expect("home behind the store", r, 0, "delta")
	same(t, "delta restore", want2, wholeTree(t, behind))
	if fetched, _ := logField(r.stderr, "restore complete", "fetched_bytes").(float64); fetched <= 0 || fetched > 256<<10 {
		t.Errorf("the delta restore fetched %v bytes; want only the new job's (a few KiB), not the 4 MiB archive", fetched)
	}

	// Both changed: refused, the home untouched; --force restores and
	// keeps the local change in a displaced directory.
	both := t.TempDir()
	expect("restore of the first snapshot", restore(both, "--snapshot", id1), 0, "restore")
	writeRandom(t, both, "jobs/local/config.xml", 100)
	before := wholeTree(t, both)
	r = restore(both)
	expect("both changed", r, 3, "")
	if !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stderr, both) {
		t.Errorf("the refusal does not name the home and --force:\n%s", tail(r.stderr, 2000))
	}
	same(t, "home after the refusal", before, wholeTree(t, both))
	expect("both changed, --force", restore(both, "--force"), 0, "forced-delta")
	same(t, "forced restore", want2, selectedTree(t, both))
	kept, _ := filepath.Glob(filepath.Join(both, ".homesnap-displaced-*", "jobs", "local", "config.xml"))
	if len(kept) != 1 {
		t.Errorf("the local change is not kept in .homesnap-displaced-*: %v", kept)
	}

	// Data and no mark (a home that predates homesnap, another store's).
	foreign := buildHome(t, "", 0)
	expect("unmarked data", restore(foreign), 3, "")

	// Point in time, into another directory, leaving the home alone.
	at := strings.SplitN(id1, "-", 2)[0]
	t1, err := time.Parse("20060102T150405.000Z", at)
	if err != nil {
		t.Fatal(err)
	}
	beforeHome := wholeTree(t, home)
	inspect := filepath.Join(t.TempDir(), "inspect")
	expect("--at --target", restore(home, "--at", t1.Add(time.Millisecond).Format(time.RFC3339Nano), "--target", inspect), 0, "restore")
	same(t, "--at the first snapshot's time", want1, wholeTree(t, inspect))
	same(t, "the home during a --target restore", beforeHome, wholeTree(t, home))
	expect("--at before every snapshot", restore(t.TempDir(), "--at", t1.Add(-time.Hour).Format(time.RFC3339)), 4, "")

	// A dry run lists what it would do and changes nothing.
	dry := t.TempDir()
	expect("restore of the first snapshot", restore(dry, "--snapshot", id1), 0, "restore")
	before = wholeTree(t, dry)
	r = restore(dry, "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "write\tjobs/newjob\t") {
		t.Errorf("--dry-run: exit %d, does not list the file it would write:\n%s\n%s", r.code, r.stdout, tail(r.stderr, 2000))
	}
	same(t, "home after a dry run", before, wholeTree(t, dry))

	// A partial restore of one job into an empty directory.
	part := t.TempDir()
	expect("--only one job", restore(part, "--only", "jobs/newjob"), 0, "delta")
	for p := range wholeTree(t, part) {
		if p != "jobs" && !strings.HasPrefix(p, "jobs/newjob") {
			t.Errorf("--only jobs/newjob restored %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(part, "jobs/newjob/builds/1/log")); err != nil {
		t.Errorf("--only jobs/newjob: %v", err)
	}
}

// TestRelativeHomeIsResolved: --home jenkins_home from the working directory.
func TestRelativeHomeIsResolved(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
	dir := t.TempDir()
	cmd := command("restore", nil, "--home", "jenkins_home", "--store", storeDir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("relative --home: %v\n%s", err, out)
	}
	same(t, "restore into a relative home", selectedTree(t, home), wholeTree(t, filepath.Join(dir, "jenkins_home")))
}

// TestDeadlineAgainstADeadEndpoint: nothing listens at the endpoint; the
// default-style deadline ends the run with the store's exit status and a
// message naming the store and the step.
func TestDeadlineAgainstADeadEndpoint(t *testing.T) {
	storeURL := "s3://bucket/prefix?endpoint=http%3A%2F%2F127.0.0.1%3A9&region=us-east-1&path_style=true&max_attempts=100"
	r, took := timed(t, time.Minute, "restore", s3Env(), "--home", t.TempDir(), "--store", storeURL, "--timeout", "3s", "--log-format", "json")
	if r.code != 5 {
		t.Errorf("exit %d, want 5 (store unreachable)\n%s", r.code, tail(r.stderr, 2000))
	}
	if took > 15*time.Second {
		t.Errorf("took %v with --timeout 3s", took)
	}
	msg := errorLine(r.stderr)
	if !strings.Contains(msg, "gave up after 3s") || !strings.Contains(msg, "s3://bucket/prefix") {
		t.Errorf("the error does not name the deadline and the store: %s\n%s", msg, tail(r.stderr, 2000))
	}
	if n := strings.Count(r.stderr, `"level":"error"`); n != 1 {
		t.Errorf("%d error lines, want the error reported once:\n%s", n, tail(r.stderr, 3000))
	}
}

// TestChownSetsTheOwnerOfWhatIsRestored: as root, --chown UID:GID owns
// every restored path instead of the snapshot's owners.
func TestChownSetsTheOwnerOfWhatIsRestored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--chown needs root")
	}
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
	target := t.TempDir()
	ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir, "--chown", "1234:5678"))
	tree := wholeTree(t, target)
	if len(tree) == 0 {
		t.Fatal("nothing restored")
	}
	for p, a := range tree {
		if a.UID != 1234 || a.GID != 5678 {
			t.Errorf("%s owned by %d:%d, want 1234:5678", p, a.UID, a.GID)
		}
	}
	if r := run(t, "restore", nil, "--home", t.TempDir(), "--store", storeDir, "--chown", "jenkins"); r.code != 2 {
		t.Errorf("--chown jenkins: exit %d, want 2 (numeric UID:GID)", r.code)
	}
}
