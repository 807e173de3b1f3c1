package snapshot_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/testhome"
)

func journalSnap(t *testing.T, home string, st store.Store, j *snapshot.ChangeJournal) *snapshot.Result {
	t.Helper()
	res, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), ChangeJournal: j})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if res.ChangeJournal == nil {
		t.Fatal("the snapshot does not say how it used the journal")
	}
	return res
}

func openJournal(t *testing.T, home string, verifyEvery time.Duration) *snapshot.ChangeJournal {
	t.Helper()
	j, err := snapshot.OpenChangeJournal(testhome.Open(t, home), snaptest.Jenkins(t), verifyEvery)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// assertManifestIsWalk checks that snapshot id's manifest has exactly the
// entries a full walk of home reports now, with the same metadata.
func assertManifestIsWalk(t *testing.T, home string, st store.Store, id string) {
	t.Helper()
	var walked []*archive.Entry
	if err := scan.Walk(context.Background(), testhome.Open(t, home), snaptest.Jenkins(t), nil, func(e *archive.Entry) error {
		walked = append(walked, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	i := 0
	for e, err := range repo.ManifestEntries(context.Background(), st, id) {
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(walked) {
			t.Fatalf("manifest has %s, the walk does not", e.Path)
		}
		if w := walked[i]; w.Path != e.Path || !w.SameMeta(e) || w.Implied != e.Implied {
			t.Fatalf("manifest entry %d: %+v, the walk finds %+v", i, e, w)
		}
		i++
	}
	if i != len(walked) {
		t.Fatalf("manifest has %d entries, the walk %d (first missing: %s)", i, len(walked), walked[i].Path)
	}
}

// churn changes the home the ways a journal could miss: create, chmod,
// a directory renamed, a subtree deleted, and a write that puts size and
// mtime back.
func churn(t *testing.T, home string, round int) {
	t.Helper()
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	switch round {
	case 0:
		testhome.Change(t, home)
	case 1:
		must(os.Rename(p("jobs/test/builds/3"), p("jobs/test/builds/4")))
		must(os.Chmod(p("jobs/test/config.xml"), 0o600))
		snaptest.Write(t, home, "nodes/agent-9/config.xml", "<slave/>\n")
	case 2:
		f := p("jobs/test/config.xml")
		st, err := os.Stat(f)
		must(err)
		data, err := os.ReadFile(f)
		must(err)
		data[0] ^= 1 // same size
		must(os.WriteFile(f, data, 0o600))
		must(os.Chtimes(f, st.ModTime(), st.ModTime())) // same mtime: only the ctime tells
		must(os.RemoveAll(p("nodes/agent-9")))
	}
}

func TestJournalSnapshotsEqualWalks(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	j := openJournal(t, home, 0)
	first := journalSnap(t, home, st, j)
	if first.ChangeJournal.Mode != "walk" || first.ChangeJournal.Fallback != "started" {
		t.Fatalf("first snapshot used the journal as %+v, want a full walk (started)", *first.ChangeJournal)
	}
	if first.ChangeJournal.Watches == 0 {
		t.Error("no watches counted")
	}
	last := first
	for round := range 3 {
		churn(t, home, round)
		want := snaptest.Selected(t, home)
		res := journalSnap(t, home, st, j)
		if res.ChangeJournal.Mode != "journal" || res.Unchanged || res.Parent != last.ID {
			t.Fatalf("round %d: %+v (journal %+v), want a journal-driven snapshot over %s", round, res, *res.ChangeJournal, last.ID)
		}
		assertManifestIsWalk(t, home, st, res.ID)
		target := t.TempDir()
		if err := restoreInto(target, st, res.ID); err != nil {
			t.Fatal(err)
		}
		snaptest.AssertSame(t, want, snaptest.All(t, target))
		last = res
	}
	if res := journalSnap(t, home, st, j); !res.Unchanged || res.ChangeJournal.Mode != "journal" {
		t.Fatalf("nothing changed: %+v (journal %+v), want unchanged through the journal", res, *res.ChangeJournal)
	}
	// A consolidation rewrites the head's tree: the journal follows it.
	rw, err := snapshot.Rewrite(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), ChangeJournal: j}, []string{first.ID})
	if err != nil {
		t.Fatal(err)
	}
	snaptest.Write(t, home, "jobs/after-rewrite/config.xml", "<project/>\n")
	res := journalSnap(t, home, st, j)
	if res.ChangeJournal.Mode != "journal" || res.Parent != rw.ID {
		t.Fatalf("over a consolidation: %+v (journal %+v), want a journal-driven snapshot over %s", res, *res.ChangeJournal, rw.ID)
	}
	assertManifestIsWalk(t, home, st, res.ID)
	last = res
	// A forced walk over the journal's last snapshot finds every entry as
	// the journal left it: the manifests are equal, line for line.
	walked, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), Force: true})
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, st, last.ID)
	want := collect(t, st, walked.ID)
	if len(got) != len(want) {
		t.Fatalf("journal manifest has %d entries, walk manifest %d", len(got), len(want))
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Errorf("entry %d: journal %+v, walk %+v", i, got[i], want[i])
		}
	}
	// That snapshot was another writer's: the journal walks fully.
	if res := journalSnap(t, home, st, j); res.ChangeJournal.Mode != "walk" || res.ChangeJournal.Fallback != "parent" {
		t.Fatalf("over another writer's snapshot: journal %+v, want a full walk (parent)", *res.ChangeJournal)
	}
}

func collect(t *testing.T, st store.Store, id string) []*archive.Entry {
	t.Helper()
	var es []*archive.Entry
	for e, err := range repo.ManifestEntries(context.Background(), st, id) {
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// A second name in a directory the journal does not watch changes a
// file's ctime unheard (see internal/journal): the verification walk
// finds it, counts it, and its entries are the ones stored.
func TestJournalVerificationWalkFindsWhatTheJournalMissed(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	j := openJournal(t, home, time.Nanosecond) // every snapshot over the journal's base verifies
	journalSnap(t, home, st, j)
	res := journalSnap(t, home, st, j)
	if res.ChangeJournal.Mode != "verify" || res.ChangeJournal.Differences != 0 || !res.Unchanged {
		t.Fatalf("verification of an unchanged home: %+v (journal %+v)", res, *res.ChangeJournal)
	}
	if err := os.MkdirAll(filepath.Join(home, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(home, "jobs/test/config.xml"), filepath.Join(home, "workspace/config.xml")); err != nil {
		t.Fatal(err)
	}
	res = journalSnap(t, home, st, j)
	if res.ChangeJournal.Mode != "verify" || res.ChangeJournal.Differences != 1 || res.Unchanged {
		t.Fatalf("verification after an unheard change: %+v (journal %+v), want 1 difference, stored", res, *res.ChangeJournal)
	}
	assertManifestIsWalk(t, home, st, res.ID)
}

// A failed snapshot took changes it did not apply: the next one walks.
func TestJournalWalksAfterAFailedSnapshot(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	j := openJournal(t, home, 0)
	journalSnap(t, home, st, j)
	testhome.Change(t, home)
	o := snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), ChangeJournal: j,
		BeforeCommit: func(context.Context) error { return os.ErrPermission }}
	if _, err := snapshot.Snapshot(context.Background(), o); err == nil {
		t.Fatal("the guard did not refuse the snapshot")
	}
	res := journalSnap(t, home, st, j)
	if res.ChangeJournal.Mode != "walk" || res.ChangeJournal.Fallback != "invalidated" {
		t.Fatalf("after a failed snapshot: journal %+v, want a full walk (invalidated)", *res.ChangeJournal)
	}
	assertManifestIsWalk(t, home, st, res.ID)
}

// Snapshots driven by the change journal through every shape of manifest a sidecar
// writes: deltas on the parent, a chain at its limit compacted, a full
// manifest once the deltas are heavy, with whole trees deleted and
// created. Each manifest equals a walk, and its record's totals count
// what the walk finds.
func TestJournalSnapshotsThroughCompactionAndFullManifests(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	j := openJournal(t, home, 0)
	snap := func() *snapshot.Result {
		t.Helper()
		res, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), ChangeJournal: j, MaxManifestChain: 3})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	snap()
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	var lens []int
	for round := range 7 {
		switch round {
		case 0, 3: // a tree appears
			for b := range 3 {
				snaptest.Write(t, home, fmt.Sprintf("jobs/t%d/builds/%d/log", round, b), "line\n")
			}
		case 1, 4: // and goes, whole
			if err := os.RemoveAll(p(fmt.Sprintf("jobs/t%d", round-1))); err != nil {
				t.Fatal(err)
			}
		case 5: // every entry changes: the next manifest is a full one
			later := time.Now().Add(time.Hour)
			for rel := range snaptest.Selected(t, home) {
				os.Chtimes(p(rel), later, later)
			}
		default:
			appendTo(t, p("jobs/test/builds/2/log"), "more\n")
		}
		res := snap()
		if res.ChangeJournal.Mode != "journal" || res.Unchanged {
			t.Fatalf("round %d: %+v (journal %+v), want a journal-driven snapshot", round, res, *res.ChangeJournal)
		}
		lens = append(lens, len(res.Manifests))
		assertManifestIsWalk(t, home, st, res.ID)
		rec, err := repo.LoadRecord(context.Background(), st, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		var entries, files, bytes int64
		if err := scan.Walk(context.Background(), testhome.Open(t, home), snaptest.Jenkins(t), nil, func(e *archive.Entry) error {
			entries++
			if e.Type == archive.TypeFile {
				files, bytes = files+1, bytes+e.Size
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if rec.Entries != entries || rec.Files != files || rec.Bytes != bytes {
			t.Errorf("round %d: record counts %d entries, %d files, %d bytes; the walk %d, %d, %d", round, rec.Entries, rec.Files, rec.Bytes, entries, files, bytes)
		}
	}
	// 2, 3, then compacted to 2 (limit 3), 3, 2, a delta holding every
	// entry, then a full manifest.
	if !slices.Equal(lens, []int{2, 3, 2, 3, 2, 3, 1}) {
		t.Errorf("chain lengths %v, want [2 3 2 3 2 3 1]", lens)
	}
	target := t.TempDir()
	if err := restoreInto(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, target))
}

// A verification walk runs after the journal's changes were taken: what
// changes while it runs is found by the walk and brought by the next
// Take, and is no difference. The walk's entries are stored, and the
// journal snapshot after it still equals a walk.
func TestJournalVerificationIgnoresChangesMadeWhileItRuns(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	j := openJournal(t, home, time.Nanosecond) // every snapshot over the journal's base verifies
	journalSnap(t, home, st, j)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // a build writing as fast as it can, through the whole snapshot
		defer close(done)
		dir := filepath.Join(home, "jobs/test/builds/900")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Error(err)
			return
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("step-%d.xml", i)), []byte("<step/>"), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	res := journalSnap(t, home, st, j)
	close(stop)
	<-done
	if res.ChangeJournal.Mode != "verify" || res.ChangeJournal.Differences != 0 {
		t.Fatalf("verification while a build writes: journal %+v, want no difference", *res.ChangeJournal)
	}
	res = journalSnap(t, home, st, j)
	if res.ChangeJournal.Mode != "verify" || res.ChangeJournal.Differences != 0 {
		t.Fatalf("verification after the writer stopped: journal %+v, want no difference", *res.ChangeJournal)
	}
	assertManifestIsWalk(t, home, st, cmp.Or(res.ID, res.Parent))
}

// The journal no longer stats every file at its open to find those with
// several names: the sidecar's full walk tells it. A file of the
// selection with a second name outside it, written through that name
// (which no watched directory hears of), is still stored by the next
// journal-driven snapshot.
func TestJournalHearsAWriteThroughAnotherNameAfterTheWalk(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	other := filepath.Join(home, "workspace/config.xml") // outside the selection, not watched
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(home, "jobs/test/config.xml"), other); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, home, 0)
	if res := journalSnap(t, home, st, j); res.ChangeJournal.Mode != "walk" {
		t.Fatalf("first snapshot: journal %+v, want a full walk", *res.ChangeJournal)
	}
	if err := os.WriteFile(other, []byte("<project>changed</project>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := journalSnap(t, home, st, j)
	if res.ChangeJournal.Mode != "journal" || res.Unchanged {
		t.Fatalf("after a write through the other name: %+v (journal %+v), want a journal-driven snapshot that stores it", res, *res.ChangeJournal)
	}
	assertManifestIsWalk(t, home, st, res.ID)
}

// A change among thousands of unchanged paths: the journal's snapshot
// passes over the parent's spans where nothing changed (neither decoded
// nor compared), and what it stores is still what a walk finds: the
// manifest, the record's totals, the home's fingerprint, the agent
// guard's entries (which no span passed over may hold) and a restore.
// bulkHome is a home of 9,000 files in 90 builds of one job, about nine
// spans, with its change journal open.
func bulkHome(t *testing.T) (home string, st store.Store, j *snapshot.ChangeJournal, sel *selector.Selector) {
	t.Helper()
	home, st = snaptest.NewHome(t), snaptest.NewStore(t)
	for b := range 90 {
		for f := range 100 {
			snaptest.Write(t, home, fmt.Sprintf("jobs/bulk/builds/%02d/f%03d", b, f), "x\n")
		}
	}
	return home, st, openJournal(t, home, 0), snaptest.Jenkins(t)
}

func TestJournalSnapshotPassesOverWhatDidNotChange(t *testing.T) {
	home, st, j, sel := bulkHome(t)
	snap := func(st store.Store, j *snapshot.ChangeJournal) *snapshot.Result {
		t.Helper()
		res, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: sel, Log: zerolog.Nop(), ChangeJournal: j, Keep: jenkins.Needed})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	snap(st, j)
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	for round, change := range []func(){
		func() { appendTo(t, p("jobs/bulk/builds/20/f050"), "more\n") },
		func() { // a build goes, one comes, and a node changes
			if err := os.RemoveAll(p("jobs/bulk/builds/07")); err != nil {
				t.Fatal(err)
			}
			snaptest.Write(t, home, "jobs/bulk/builds/90/log", "new\n")
			snaptest.Write(t, home, "nodes/agent-2/config.xml", "<slave/>\n")
		},
	} {
		change()
		res := snap(st, j)
		if res.ChangeJournal.Mode != "journal" || res.Unchanged {
			t.Fatalf("round %d: %+v (journal %+v), want a journal-driven snapshot", round, res, *res.ChangeJournal)
		}
		if unread := res.ChangeJournal.Unread; unread < res.Totals.Entries/2 {
			t.Errorf("round %d: passed over %d of %d entries, want most of them", round, unread, res.Totals.Entries)
		}
		mark, err := homemark.Read(testhome.Open(t, home))
		if err != nil || mark.Snapshot != res.ID {
			t.Fatalf("round %d: home mark %+v, %v", round, mark, err)
		}
		print, err := homemark.TakeFingerprint(context.Background(), testhome.Open(t, home), sel)
		if err != nil {
			t.Fatal(err)
		}
		if mark.Print != print {
			t.Errorf("round %d: the snapshot fingerprinted the home as %+v, a walk as %+v", round, mark.Print, print)
		}
		assertManifestIsWalk(t, home, st, res.ID)
		rec, err := repo.LoadRecord(context.Background(), st, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		walked := snap(snaptest.NewStore(t), nil)
		if w := walked.Totals; rec.Entries != w.Entries || rec.Files != w.Files || rec.Bytes != w.Bytes {
			t.Errorf("round %d: record counts %d entries, %d files, %d bytes; a walk %d, %d, %d", round, rec.Entries, rec.Files, rec.Bytes, w.Entries, w.Files, w.Bytes)
		}
		if len(res.Kept) == 0 || len(res.Kept) != len(walked.Kept) {
			t.Fatalf("round %d: the agent guard's entries: %d, a walk's %d", round, len(res.Kept), len(walked.Kept))
		}
		for i := range res.Kept {
			if !res.Kept[i].SameMeta(walked.Kept[i]) || res.Kept[i].Path != walked.Kept[i].Path {
				t.Errorf("round %d: kept %+v, a walk keeps %+v", round, res.Kept[i], walked.Kept[i])
			}
		}
		target := t.TempDir()
		if err := restoreInto(target, st, res.ID); err != nil {
			t.Fatal(err)
		}
		snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, target))
	}
}

// After a churn that touched every span, a one-file change decodes the
// churn's delta's spans too; the snapshot after that writes a full
// manifest, and the ones after it pass over what did not change again.
func TestAWideChurnIsFollowedByAFullManifest(t *testing.T) {
	home, st, j, sel := bulkHome(t)
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	snap := func() (*snapshot.Result, *repo.Record) {
		t.Helper()
		res, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: sel, Log: zerolog.Nop(), ChangeJournal: j, Keep: jenkins.Needed})
		if err != nil {
			t.Fatal(err)
		}
		if res.Unchanged || res.ChangeJournal == nil || res.ChangeJournal.Mode != "journal" {
			t.Fatalf("%+v, want a snapshot through the journal", res)
		}
		rec, err := repo.LoadRecord(context.Background(), st, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		assertManifestIsWalk(t, home, st, res.ID)
		return res, rec
	}
	if _, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: sel, Log: zerolog.Nop(), ChangeJournal: j, Keep: jenkins.Needed}); err != nil {
		t.Fatal(err)
	}
	for b := range 90 { // the churn: a line in every build
		appendTo(t, p(fmt.Sprintf("jobs/bulk/builds/%02d/f000", b)), "more\n")
	}
	if _, rec := snap(); len(rec.Manifests) != 2 {
		t.Fatalf("the churn's snapshot has the layers %q, want a delta on the first", rec.Manifests)
	}
	appendTo(t, p("jobs/bulk/builds/40/f050"), "more\n")
	res, rec := snap()
	if len(rec.Manifests) != 3 || rec.SpannedEntries == 0 || rec.CoveredEntries*2 <= rec.SpannedEntries {
		t.Fatalf("one file after the churn: layers %q, %d of %d entries in spans a delta covers; want a delta that met mostly covered spans", rec.Manifests, rec.CoveredEntries, rec.SpannedEntries)
	}
	if res.ChangeJournal.Unread > res.Totals.Entries/2 {
		t.Fatalf("one file after the churn passed over %d of %d entries, which the churn's delta changed", res.ChangeJournal.Unread, res.Totals.Entries)
	}
	appendTo(t, p("jobs/bulk/builds/41/f050"), "more\n")
	if _, rec := snap(); len(rec.Manifests) != 0 {
		t.Fatalf("the next snapshot has the layers %q, want a full manifest", rec.Manifests)
	}
	appendTo(t, p("jobs/bulk/builds/42/f050"), "more\n")
	res, rec = snap()
	if len(rec.Manifests) != 2 || rec.CoveredEntries != 0 || res.ChangeJournal.Unread < res.Totals.Entries/2 {
		t.Fatalf("one file after the full manifest: layers %q, %d entries in covered spans, passed over %d of %d entries; want most passed over", rec.Manifests, rec.CoveredEntries, res.ChangeJournal.Unread, res.Totals.Entries)
	}
	target := t.TempDir()
	if err := restoreInto(target, st, res.ID); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, target))
}
