package cli

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/snaptest"
)

// decode reads a command's JSON result strictly: a field renamed in the
// code and not in the test (and docs/usage.md) fails.
func decode(t *testing.T, r ran, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("exit %d, stdout not the documented JSON: %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document on stdout:\n%s", r.stdout)
	}
}

// snapshot --once, verify and prune give their results as one documented
// JSON object with --output json.
func TestJSONResults(t *testing.T) {
	home, store := snaptest.NewHome(t), t.TempDir()
	homesnap := func(args ...string) ran {
		return homesnapRun("homesnap", append(args, "--store", store, "--output", "json", "--log-level", "error")...)
	}

	var first, same, second snapshotReport
	decode(t, homesnap("snapshot", "--once", "--home", home), &first)
	if first.Snapshot == "" || first.Unchanged || first.Parent != "" || first.Files == 0 || first.Bytes == 0 || first.NewBytes == 0 || first.StoredBytes == 0 {
		t.Errorf("the first snapshot: %+v", first)
	}
	decode(t, homesnap("snapshot", "--once", "--home", home), &same)
	if same.Snapshot != "" || !same.Unchanged || same.Parent != first.Snapshot {
		t.Errorf("a snapshot of an unchanged home: %+v, want unchanged over %s", same, first.Snapshot)
	}
	snaptest.Write(t, home, "jobs/added/config.xml", "<new/>")
	decode(t, homesnap("snapshot", "--once", "--home", home), &second)
	if second.Snapshot == "" || second.Parent != first.Snapshot || second.NewEntries == 0 || second.Files != first.Files+1 {
		t.Errorf("the second snapshot: %+v", second)
	}

	var v verifyReport
	decode(t, homesnap("verify"), &v)
	if !v.OK || v.Mode != "full" || len(v.Snapshots) != 2 || !v.Snapshots[0].OK || len(v.Problems) != 0 || v.Files == 0 || v.BytesRead == 0 {
		t.Errorf("verify: %+v", v)
	}

	var p pruneReport
	decode(t, homesnap("prune", "--keep-last", "1", "--dry-run"), &p)
	if !p.DryRun || p.Kept != 1 || len(p.Snapshots) != 2 || p.Snapshots[0].ID != second.Snapshot || !p.Snapshots[0].Keep || p.Snapshots[1].Keep || len(p.Deleted) == 0 || p.FreedBytes == 0 {
		t.Errorf("prune --dry-run: %+v", p)
	}

	// A damaged store: verify names the object in its problems, exit 6.
	var archive string
	filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && archive == "" && strings.Contains(p, "archives") {
			archive = p
		}
		return err
	})
	if archive == "" || os.Remove(archive) != nil {
		t.Fatalf("cannot remove an archive of %s", store)
	}
	r := homesnap("verify", "--structure")
	decode(t, r, &v)
	if r.code != ExitCorrupt || v.OK || v.Mode != "structure" || len(v.Problems) == 0 || !strings.Contains(v.Problems[0].Object, filepath.Base(archive)) {
		t.Errorf("verify of a store missing %s: exit %d, %+v", archive, r.code, v)
	}
}
