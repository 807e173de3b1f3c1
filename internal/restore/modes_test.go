package restore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

func timeAt(ns int64) time.Time { return time.Unix(0, ns) }

// The new-job case: a forced restore replaces the home by the
// snapshot and keeps the job created since, and the local edit it
// replaced, where it says.
func TestForcedRestoreKeepsWhatItReplacesOrRemoves(t *testing.T) {
	testenv.Long(t, "restores many variants of a home")
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	want := snaptest.Selected(t, home)
	target := t.TempDir()
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.Write(t, target, "jobs/newjob/config.xml", "<project/>")
	snaptest.Write(t, target, "jobs/newjob/builds/1/log", "Started by timer\n")
	snaptest.Write(t, target, "jobs/test/config.xml", "<project>local edit</project>")
	local := snaptest.All(t, target)

	res, err := restoreWith(target, st, "", func(o *Options, s *staged) { o.Force = true })
	if err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.Selected(t, target))
	if res.Displaced == "" || !strings.HasPrefix(res.Displaced, target+"/"+displacedPrefix) {
		t.Fatalf("Displaced = %q, want a %s* directory in the home", res.Displaced, displacedPrefix)
	}
	kept, err := testhome.Read(res.Displaced, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"jobs/newjob/config.xml", "jobs/newjob/builds/1/log", "jobs/test/config.xml"} {
		if kept[p].Sum != local[p].Sum || kept[p].Mode != local[p].Mode {
			t.Errorf("%s not kept as it was in %s: %+v, was %+v", p, res.Displaced, kept[p], local[p])
		}
	}
	if res.Removed != 5 { // jobs/newjob, its config, builds, builds/1, builds/1/log
		t.Errorf("Removed = %d, want 5", res.Removed)
	}
	// A later restore leaves it alone, and a snapshot never includes it.
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(res.Displaced, "jobs/newjob/builds/1/log")); err != nil {
		t.Fatalf("a later restore removed the displaced paths: %v", err)
	}
}

func TestEmptySnapshotIsRefusedUnlessForced(t *testing.T) {
	st, err := file.Open(filepath.Join(hostileDir(), "empty-manifest"))
	if err != nil {
		t.Fatal(err)
	}
	home := hostileHome(t)
	before := snaptest.All(t, home)
	_, err = restoreWith(home, st, "", nil)
	var rm *RemoveMostError
	if !errors.Is(err, ErrWouldRemoveMost) || !errors.As(err, &rm) || rm.Removed == 0 || rm.Removed != rm.Present {
		t.Fatalf("restore of an empty snapshot: %v", err)
	}
	snaptest.AssertSame(t, before, snaptest.All(t, home))
	res, err := restoreWith(home, st, "", func(o *Options, s *staged) { o.Force = true })
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := testhome.Read(res.Displaced, nil)
	for p, a := range before {
		if snaptest.Jenkins(t).Selected(p) && a.Type == "f" && kept[p].Sum != a.Sum {
			t.Errorf("%s was removed without being kept in %s", p, res.Displaced)
		}
	}
}

func TestDeltaRestoreFetchesOnlyWhatDiffers(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	full, err := restoreWith(target, st, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, home)
	// Same content, new mtime: fixed without a fetch.
	touched := filepath.Join(home, "jobs/test/builds/1/archive/blob.bin")
	if err := testhome.Lchtimes(touched, timeAt(12345)); err != nil {
		t.Fatal(err)
	}
	snaptest.Snap(t, home, st)
	want := snaptest.Selected(t, home)
	local := snaptest.All(t, target)
	var changed int64
	for p, a := range want {
		if b, ok := local[p]; a.Type == "f" && a.Size > 0 && (!ok || b.Sum != a.Sum) {
			changed++
		}
	}
	res, err := restoreWith(target, st, "", func(o *Options, s *staged) { s.delta = true })
	if err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.Selected(t, target))
	if res.Fetched != changed {
		t.Errorf("delta restore fetched %d files, %d differ", res.Fetched, changed)
	}
	if res.FetchedBytes*3 > full.FetchedBytes {
		t.Errorf("delta restore read %d bytes, the full one %d", res.FetchedBytes, full.FetchedBytes)
	}
	if res.MetaFixed == 0 || res.Unchanged < res.Entries/2 || res.Removed == 0 {
		t.Errorf("counts: %+v", res)
	}
}

func TestDryRunReportsAndChangesNothing(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, home)
	snaptest.Snap(t, home, st)
	before := snaptest.All(t, target)
	var changes []Change
	dry, err := restoreWith(target, st, "", func(o *Options, s *staged) {
		o.DryRun, s.delta = true, true
		o.OnChange = func(c Change) { changes = append(changes, c) }
	})
	if err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, before, snaptest.All(t, target))
	snaptest.AssertNoStaging(t, target)
	if !slices.ContainsFunc(changes, func(c Change) bool {
		return c.Kind == ChangeRemove && c.Path == "jobs/parameterized-windows/builds/1"
	}) {
		t.Errorf("the deleted build is not reported as removed: %v", changes)
	}
	real, err := restoreWith(target, st, "", func(o *Options, s *staged) { s.delta = true })
	if err != nil {
		t.Fatal(err)
	}
	if dry.Fetched != real.Fetched || dry.Written != real.Written || dry.WrittenBytes != real.WrittenBytes || dry.WrittenBytes == 0 || dry.Removed != real.Removed || dry.MetaFixed != real.MetaFixed || !dry.DryRun {
		t.Errorf("dry run %+v\nreal run %+v", dry, real)
	}
	if _, err := restoreWith(filepath.Join(target, "nowhere"), st, "", func(o *Options, s *staged) { o.DryRun = true }); err != nil {
		t.Errorf("dry run into a home that does not exist yet: %v", err)
	}
}

func TestBeforeCommitSeesTheHomeToBeAndCanAbort(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, home)
	snaptest.Snap(t, home, st)
	snaptest.Write(t, target, "plugins/git.jpi", "PK")
	before := snaptest.All(t, target)
	veto := errors.New("agents would not reconnect")
	_, err := restoreWith(target, st, "", func(o *Options, s *staged) {
		s.delta = true
		o.BeforeCommit = func(ctx context.Context, fsys fs.FS) error {
			got, err := fs.ReadFile(fsys, "jobs/test/config.xml")
			if err != nil || !strings.Contains(string(got), "edited") {
				t.Errorf("staged config.xml: %q %v", got, err)
			}
			if got, err := fs.ReadFile(fsys, "plugins/git.jpi"); err != nil || string(got) != "PK" {
				t.Errorf("unselected file: %q %v", got, err)
			}
			builds, err := fs.ReadDir(fsys, "jobs/test/builds")
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, d := range builds {
				names = append(names, d.Name())
			}
			if !slices.Contains(names, "3") || !slices.Contains(names, "1") {
				t.Errorf("jobs/test/builds lists %v, want old and new builds", names)
			}
			if _, err := fs.Stat(fsys, "jobs/parameterized-windows/builds/1"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a removed build is still visible: %v", err)
			}
			if root, _ := fs.ReadDir(fsys, "."); slices.ContainsFunc(root, func(d fs.DirEntry) bool { return strings.HasPrefix(d.Name(), ".homesnap-") }) {
				t.Error("the staging area is visible")
			}
			return veto
		}
	})
	if !errors.Is(err, veto) {
		t.Fatalf("restore: %v, want the veto", err)
	}
	snaptest.AssertSame(t, before, snaptest.All(t, target))
	snaptest.AssertNoStaging(t, target)
}

func TestChownOwnsWhatTheRestoreWrites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	if _, err := restoreWith(target, st, "", func(o *Options, s *staged) { o.Chown = &Owner{UID: 1234, GID: 5678} }); err != nil {
		t.Fatal(err)
	}
	for p, a := range snaptest.Selected(t, target) {
		if p != "" && (a.UID != 1234 || a.GID != 5678) {
			t.Errorf("%s owned by %d:%d", p, a.UID, a.GID)
		}
	}
	// What a forced restore keeps is reachable by that user.
	snaptest.Write(t, target, "jobs/newjob/config.xml", "<project/>")
	res, err := restoreWith(target, st, "", func(o *Options, s *staged) { o.Force, o.Chown = true, &Owner{UID: 1234, GID: 5678} })
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{res.Displaced, filepath.Join(res.Displaced, "jobs")} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("%s owned by %d:%d (%v)", p, st.Uid, st.Gid, err)
		}
	}
}

func TestPartialRestoreStaysInsideTheInclude(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	want := snaptest.Selected(t, home)
	target := t.TempDir()
	if err := testhome.Build(target); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, target)
	snaptest.Write(t, target, "jobs/test/builds/99/log", "local build")
	snaptest.Write(t, target, "jobs/newjob/config.xml", "<project/>")
	before := snaptest.Selected(t, target)
	if _, err := restoreWith(target, st, "", func(o *Options, s *staged) { o.Include = []string{"jobs/test"} }); err != nil {
		t.Fatal(err)
	}
	after := snaptest.Selected(t, target)
	for p := range mergeKeys(want, before, after) {
		inside := p == "jobs/test" || strings.HasPrefix(p, "jobs/test/")
		switch {
		case inside && after[p] != want[p]:
			t.Errorf("%s not restored: %v, want %v", p, after[p], want[p])
		case !inside && p != "jobs" && p != "" && after[p] != before[p]:
			t.Errorf("%s outside the include changed: %v, was %v", p, after[p], before[p])
		}
	}
}

func mergeKeys(trees ...testhome.Tree) map[string]bool {
	keys := map[string]bool{}
	for _, tr := range trees {
		for p := range tr {
			keys[p] = true
		}
	}
	return keys
}
