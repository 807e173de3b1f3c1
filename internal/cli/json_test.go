package cli

import (
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/agents"
	"github.com/homesnap/homesnap/internal/snaptest"
)

// Every command that prints a result gives it, with --output json, as one
// object documented in docs/usage.md: each decodes strictly into its
// documented struct, and says what a user would check (the IDs list
// shows, the counts of the home). A command added to the table without a
// case here fails.
func TestEveryCommandJSON(t *testing.T) {
	home, store := snaptest.NewHome(t), t.TempDir()
	homesnap := func(args ...string) ran {
		return homesnapRun("homesnap", append(args, "--store", store, "--output", "json", "--log-level", "error")...)
	}
	var first, second snapshotReport
	decode(t, homesnap("snapshot", "--once", "--home", home), &first)
	snaptest.Write(t, home, "jobs/added/config.xml", "<added/>")
	decode(t, homesnap("snapshot", "--once", "--home", home), &second)
	if first.Snapshot == "" || second.Parent != first.Snapshot {
		t.Fatalf("snapshots %+v then %+v", first, second)
	}
	files := 0 // the regular files of the home's selection
	for _, a := range snaptest.Selected(t, home) {
		if a.Type == "f" {
			files++
		}
	}
	if int64(files) != second.Files {
		t.Fatalf("snapshot --once says %d files, the home's selection has %d", second.Files, files)
	}

	cases := []struct {
		command string
		args    []string
		result  func() any // the documented struct, to decode into
		check   func(t *testing.T, v any)
	}{
		{"snapshot", []string{"--once", "--home", home}, func() any { return &snapshotReport{} }, func(t *testing.T, v any) {
			if r := v.(*snapshotReport); !r.Unchanged || r.Snapshot != "" || r.Parent != second.Snapshot {
				t.Errorf("snapshot of an unchanged home: %+v, want unchanged over %s", r, second.Snapshot)
			}
		}},
		{"list", nil, func() any { return &[]listEntry{} }, func(t *testing.T, v any) {
			l := *v.(*[]listEntry)
			if len(l) != 2 || l[0].ID != first.Snapshot || l[1].ID != second.Snapshot || !l[1].Head || l[0].Head || l[1].Files != second.Files {
				t.Errorf("list: %+v, want %s then the head %s", l, first.Snapshot, second.Snapshot)
			}
		}},
		{"verify", nil, func() any { return &verifyReport{} }, func(t *testing.T, v any) {
			r := v.(*verifyReport)
			ids := []string{}
			for _, s := range r.Snapshots {
				ids = append(ids, s.ID)
			}
			slices.Sort(ids)
			if !r.OK || !slices.Equal(ids, []string{first.Snapshot, second.Snapshot}) || r.Files == 0 || r.BytesRead == 0 {
				t.Errorf("verify: %+v", r)
			}
		}},
		{"prune", []string{"--keep-last", "1", "--dry-run"}, func() any { return &pruneReport{} }, func(t *testing.T, v any) {
			if r := v.(*pruneReport); !r.DryRun || r.Kept != 1 || len(r.Snapshots) != 2 || r.Snapshots[0].ID != second.Snapshot || r.Snapshots[1].Keep {
				t.Errorf("prune --dry-run: %+v", r)
			}
		}},
		{"check-agents", []string{"--snapshot", first.Snapshot}, func() any { return &agents.Report{} }, func(t *testing.T, v any) {
			if r := v.(*agents.Report); r.Checked != "snapshot "+first.Snapshot || r.State == nil || len(r.State.Nodes) == 0 {
				t.Errorf("check-agents: %+v", r)
			}
		}},
		{"ls", nil, func() any { return &lsResult{} }, func(t *testing.T, v any) {
			r := v.(*lsResult)
			n, added := 0, false
			for _, e := range r.Entries {
				if e.Type == "f" {
					n++
				}
				added = added || e.Path == "jobs/added/config.xml" && e.Size == int64(len("<added/>")) && e.Mode != "" && e.SHA256 != ""
			}
			if r.Snapshot != second.Snapshot || r.Time == nil || int64(n) != second.Files || !added {
				t.Errorf("ls: snapshot %s at %v, %d files (want %d), jobs/added/config.xml listed: %v", r.Snapshot, r.Time, n, second.Files, added)
			}
		}},
		{"diff", []string{first.Snapshot, second.Snapshot}, func() any { return &diffResult{} }, func(t *testing.T, v any) {
			r := v.(*diffResult)
			var added []string
			for _, c := range r.Changes {
				added = append(added, c.Change+" "+c.Path)
			}
			if r.Old.Snapshot != first.Snapshot || r.New.Snapshot != second.Snapshot || !slices.Equal(added, []string{"added jobs/added", "added jobs/added/config.xml"}) {
				t.Errorf("diff: %+v, changes %v", r, added)
			}
		}},
		{"restore", []string{"--home", t.TempDir() + "/new"}, func() any { return &restoreReport{} }, func(t *testing.T, v any) {
			r := v.(*restoreReport)
			if r.Decision != "restore" || r.Snapshot != second.Snapshot || r.Time == nil || r.Files != second.Files || r.Written == 0 || !r.Marked || r.Agents == nil || r.Agents.Nodes == 0 {
				t.Errorf("restore into a new home: %+v", r)
			}
		}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.command] = true
		t.Run(c.command, func(t *testing.T) {
			r := homesnap(append([]string{c.command}, c.args...)...)
			v := c.result()
			decode(t, r, v)
			if r.code > ExitFailure { // check-agents exits 1 for the fixture's agents, with its report
				t.Errorf("exit %d\n%s", r.code, r.stderr)
			}
			c.check(t, v)
		})
	}
	for _, c := range commands {
		if c.config != nil && !covered[c.name] {
			t.Errorf("%s --output json has no case here", c.name)
		}
	}

	// On a failure, standard output holds nothing and standard error says why.
	bad := "20000101T000000.000Z-000000"
	for _, args := range [][]string{{"restore", "--home", t.TempDir(), "--snapshot", bad}, {"ls", bad}, {"check-agents", "--snapshot", bad}} {
		if r := homesnap(args...); r.code != ExitNoSnapshot || r.stdout != "" || !strings.Contains(r.stderr, bad) {
			t.Errorf("%v: exit %d, stdout %q, want %d and nothing, stderr naming it:\n%s", args, r.code, r.stdout, ExitNoSnapshot, r.stderr)
		}
	}
}

// lsResult is ls's documented object: lsHead and its entries.
type lsResult struct {
	lsHead
	Entries []fileJSON `json:"entries"`
	Error   string     `json:"error"`
}

// A listing that fails midway still leaves one valid document on
// standard output, the error its last field.
func TestJSONStreamError(t *testing.T) {
	var out strings.Builder
	boom := errors.New("manifest ends early")
	items := func(yield func(*fileJSON, error) bool) {
		_ = yield(&fileJSON{Path: "a", Type: "f", Mode: "0644"}, nil) && yield(nil, boom)
	}
	err := writeJSONStream(&out, lsHead{Snapshot: "X"}, "entries", iter.Seq2[*fileJSON, error](items))
	var r lsResult
	dec := json.NewDecoder(strings.NewReader(out.String()))
	dec.DisallowUnknownFields()
	if !errors.Is(err, boom) || dec.Decode(&r) != nil || r.Snapshot != "X" || len(r.Entries) != 1 || r.Entries[0].Path != "a" || !strings.Contains(r.Error, boom.Error()) {
		t.Errorf("err %v, %+v from:\n%s", err, r, out.String())
	}
	out.Reset()
	if err := writeJSONStream(&out, struct{}{}, "entries", iter.Seq2[*fileJSON, error](func(func(*fileJSON, error) bool) {})); err != nil || out.String() != "{\n  \"entries\": []\n}\n" {
		t.Errorf("an empty object and list: %v, %q", err, out.String())
	}
}
