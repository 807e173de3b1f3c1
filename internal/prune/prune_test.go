package prune

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/retention"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testhome"
)

const (
	idA = "20261201T100000.000Z-aaaaaa"
	idB = "20261201T110000.000Z-bbbbbb"
	idC = "20261201T120000.000Z-cccccc"
	idX = "20261201T113000.000Z-dddddd" // lost a race against C
)

func rec(id, parent string, archives ...string) *repo.Record {
	return &repo.Record{ID: id, Parent: parent, Time: repo.IDTime(id), Archives: archives}
}

func objs(at time.Time, keys ...string) []store.Object {
	var out []store.Object
	for _, k := range keys {
		out = append(out, store.Object{Key: k, Size: 10, Modified: at})
	}
	return out
}

func render(p *Plan) string {
	var b strings.Builder
	for _, r := range p.Reparent {
		fmt.Fprintf(&b, "reparent %s: %s → %s\n", short(r.Record.ID), short(r.Old), short(r.Record.Parent))
	}
	for _, d := range p.Delete {
		fmt.Fprintf(&b, "delete %s (%s)\n", d.Key, d.Why)
	}
	return b.String()
}

func short(id string) string {
	if id == "" {
		return "-"
	}
	return id[len(id)-6:]
}

func TestMakePlan(t *testing.T) {
	// A ← B ← C (head). C still points into A's and B's archives; X was
	// discarded by a lost race.
	h := &repo.History{
		Head:         idC,
		Snapshots:    []*repo.Record{rec(idC, idB, idA, idB, idC), rec(idB, idA, idA, idB), rec(idA, "", idA)},
		Unreferenced: []string{idX},
	}
	all := func(ids ...string) (keys []string) {
		for _, id := range ids {
			keys = append(keys, repo.Keys(id)...)
		}
		return keys
	}
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		policy retention.Policy
		now    time.Time
		want   string
	}{
		{"no policy, orphan too young", retention.Policy{}, now, ""},
		{"no policy, orphan old enough", retention.Policy{}, now.Add(6 * time.Hour),
			"delete archives/" + idX + ".tar.zst (never committed (a lost race or a crash) and older than 6h0m0s)\n" +
				"delete snapshots/" + idX + ".json (never committed (a lost race or a crash) and older than 6h0m0s)\n" +
				"delete snapshots/" + idX + ".json.zst (never committed (a lost race or a crash) and older than 6h0m0s)\n"},
		{"keep last 1: A and B go, their archives stay (C points into them)", retention.Policy{Last: 1}, now,
			"reparent cccccc: bbbbbb → -\n" +
				"delete snapshots/" + idA + ".json (snapshot dropped by the policy (keep last 1))\n" +
				"delete snapshots/" + idA + ".json.zst (snapshot dropped by the policy (keep last 1))\n" +
				"delete snapshots/" + idB + ".json (snapshot dropped by the policy (keep last 1))\n" +
				"delete snapshots/" + idB + ".json.zst (snapshot dropped by the policy (keep last 1))\n"},
		{"keep last 2: only A goes", retention.Policy{Last: 2}, now,
			"reparent bbbbbb: aaaaaa → -\n" +
				"delete snapshots/" + idA + ".json (snapshot dropped by the policy (keep last 2))\n" +
				"delete snapshots/" + idA + ".json.zst (snapshot dropped by the policy (keep last 2))\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := MakePlan(Inputs{History: h, Objects: objs(now.Add(-2*time.Hour), all(idA, idB, idC, idX)...), Policy: c.policy, Now: c.now, Delay: 6 * time.Hour})
			if got := render(p); got != c.want {
				t.Errorf("\ngot:\n%swant:\n%s", got, c.want)
			}
		})
	}

	// An archive no kept snapshot points into goes with its snapshot.
	h2 := &repo.History{Head: idC, Snapshots: []*repo.Record{rec(idC, idB, idC), rec(idB, idA, idB), rec(idA, "", idA)}}
	p := MakePlan(Inputs{History: h2, Objects: objs(now, all(idA, idB, idC)...), Policy: retention.Policy{Last: 1}, Now: now, Delay: time.Hour})
	if got := render(p); !strings.Contains(got, "delete archives/"+idA+".tar.zst (archive of a dropped snapshot") {
		t.Errorf("dead archive kept:\n%s", got)
	}
	// A's snapshot was dropped by an earlier prune while B and C still
	// pointed into its archive; when they are dropped, the archive goes at
	// once, not after the delay for uploads in flight.
	h4 := &repo.History{Head: idC, Snapshots: []*repo.Record{rec(idC, idB, idC), rec(idB, "", idA, idB)}}
	p = MakePlan(Inputs{History: h4, Objects: objs(now, append(all(idB, idC), repo.ArchiveKey(idA))...), Policy: retention.Policy{Last: 1}, Now: now, Delay: time.Hour})
	if got := render(p); !strings.Contains(got, "delete archives/"+idA+".tar.zst (archive of a snapshot dropped earlier") {
		t.Errorf("an archive only dropped snapshots pointed into was kept:\n%s", got)
	}
	// A kept snapshot from before records (no archive list) keeps every archive.
	const idOld = "20261101T100000.000Z-eeeeee"
	old := rec(idOld, "")
	old.Partial = true
	h3 := &repo.History{Head: idC, Snapshots: []*repo.Record{rec(idC, idB, idC), rec(idB, idOld, idB), old}}
	p = MakePlan(Inputs{History: h3, Objects: objs(now, all(idOld, idB, idC)...), Policy: retention.Policy{Last: 1, Monthly: 2}, Now: now, Delay: time.Hour})
	if got := render(p); !strings.Contains(got, "delete snapshots/"+idB+".json.zst") {
		t.Errorf("B should be dropped:\n%s", got)
	}
	if got := render(p); strings.Contains(got, "archives/") {
		t.Errorf("an archive was deleted although a kept snapshot may point into it:\n%s", got)
	}
}

// TestPruneKeepsRestoresExact: after many churned snapshots and a prune
// with keep-last 3, every kept snapshot restores exactly, the dropped ones
// are gone from the store and the list, and planted orphans are collected
// only once older than the delay.
func TestPruneKeepsRestoresExact(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	st, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	trees := map[string]testhome.Tree{}
	var ids []string
	for i := range 6 {
		if i > 0 {
			testhome.Change(t, home)
		}
		res, err := snapshot.Snapshot(ctx, snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: sel, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
		if trees[res.ID], err = testhome.Read(home, sel.Selected); err != nil {
			t.Fatal(err)
		}
	}
	// An orphan: a snapshot that crashed after its archive and record were
	// stored, before its manifest.
	orphan := repo.NewID(time.Now().Add(-time.Minute))
	for _, k := range []string{repo.RecordKey(orphan), repo.ArchiveKey(orphan)} {
		st.Put(ctx, k, strings.NewReader("partial"))
	}
	policy := retention.Policy{Last: 3}
	plan, err := Run(ctx, Options{Store: st, Policy: policy, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Reparent) == 0 {
		t.Fatal("nothing reparented: the test no longer covers a rewritten record")
	}
	// What the plan says remains is what a listing finds now (the sidecar's
	// store-size gauges take it instead of listing again): every key, and
	// every size but those of the records the prune rewrote.
	line := func(o store.Object) string {
		if slices.ContainsFunc(plan.Reparent, func(r Reparent) bool { return repo.RecordKey(r.Record.ID) == o.Key }) {
			return o.Key + " (rewritten)"
		}
		return fmt.Sprintf("%s %d", o.Key, o.Size)
	}
	var now []string
	repo.ListObjects(ctx, st, func(o store.Object) error { now = append(now, line(o)); return nil })
	var remaining []string
	for _, o := range plan.Remaining() {
		remaining = append(remaining, line(o))
	}
	slices.Sort(now)
	slices.Sort(remaining)
	if !slices.Equal(now, remaining) || len(plan.Delete) == 0 {
		t.Errorf("Remaining after deleting %d objects:\n%s\nthe store lists:\n%s", len(plan.Delete), strings.Join(remaining, "\n"), strings.Join(now, "\n"))
	}
	h, err := repo.LoadHistory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range h.Snapshots {
		listed = append(listed, r.ID)
	}
	want := []string{ids[5], ids[4], ids[3]}
	if strings.Join(listed, " ") != strings.Join(want, " ") {
		t.Fatalf("history after prune = %v, want %v", listed, want)
	}
	if _, err := st.Get(ctx, repo.ArchiveKey(orphan), 0, -1); err != nil {
		t.Errorf("a young orphan was collected: %v", err)
	}
	for _, id := range want {
		target := t.TempDir()
		if _, err := restore.Restore(ctx, restore.Options{Home: testhome.Open(t, target), Store: st, Snapshot: id, Log: zerolog.Nop()}); err != nil {
			t.Fatalf("restore %s after prune: %v", id, err)
		}
		got, _ := testhome.Read(target, sel.Selected)
		if d := testhome.Diff(trees[id], got); len(d) > 0 {
			t.Errorf("snapshot %s restores differently after prune: %v", id, d[:min(len(d), 5)])
		}
	}
	needed := map[string]bool{}
	for _, r := range h.Snapshots {
		for _, id := range r.Layers() {
			needed[id] = true
		}
	}
	for _, id := range ids[:3] {
		if _, err := st.Get(ctx, repo.RecordKey(id), 0, -1); err == nil {
			t.Errorf("dropped snapshot %s is still recorded", id)
		}
		if _, err := st.Get(ctx, repo.ManifestKey(id), 0, -1); (err == nil) != needed[id] {
			t.Errorf("dropped snapshot %s: manifest stored %v, but a kept snapshot's chain needs it: %v", id, err == nil, needed[id])
		}
	}
	// Later, the orphan is old enough.
	later := func() time.Time { return time.Now().Add(DefaultDelay + time.Hour) }
	if _, err := Run(ctx, Options{Store: st, Policy: policy, Now: later, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, repo.ArchiveKey(orphan), 0, -1); err == nil {
		t.Error("an old orphan survived the prune")
	}
	// And the next snapshot still chains onto the kept history.
	testhome.Change(t, home)
	if _, err := snapshot.Snapshot(ctx, snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: sel, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
}

// TestPlanKeepsManifestLayers: a kept snapshot whose delta manifest applies
// to dropped snapshots' manifests keeps those manifests (not their records);
// a layer goes once no kept snapshot needs it.
func TestPlanKeepsManifestLayers(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	a, b, c := rec(idA, "", idA), rec(idB, idA, idA, idB), rec(idC, idB, idA, idB, idC)
	b.Manifests = []string{idA, idB}
	c.Manifests = []string{idA, idB, idC}
	h := &repo.History{Head: idC, Snapshots: []*repo.Record{c, b, a}}
	keys := append(append(repo.Keys(idA), repo.Keys(idB)...), repo.Keys(idC)...)
	keys = append(keys, "snapshots/"+idB+".json.zst.age") // as an encrypted store lists it
	p := MakePlan(Inputs{History: h, Objects: objs(now, keys...), Policy: retention.Policy{Last: 1}, Now: now, Delay: time.Hour})
	want := "reparent cccccc: bbbbbb → -\n" +
		"delete snapshots/" + idA + ".json (snapshot dropped by the policy (keep last 1))\n" +
		"delete snapshots/" + idB + ".json (snapshot dropped by the policy (keep last 1))\n"
	if got := render(p); got != want {
		t.Errorf("the head's chain A←B←C, keep last 1:\ngot:\n%swant:\n%s", got, want)
	}
	// C's manifest is full again: A's and B's manifests go too.
	c.Manifests = nil
	p = MakePlan(Inputs{History: h, Objects: objs(now, keys...), Policy: retention.Policy{Last: 1}, Now: now, Delay: time.Hour})
	for _, k := range []string{repo.ManifestKey(idA), repo.ManifestKey(idB), "snapshots/" + idB + ".json.zst.age"} {
		if !strings.Contains(render(p), "delete "+k+" ") {
			t.Errorf("%s kept although no kept snapshot needs it:\n%s", k, render(p))
		}
	}
	// A later prune sees A and B only as layers: their leftover records go,
	// their manifests stay.
	h = &repo.History{Head: idC, Snapshots: []*repo.Record{{ID: idC, Time: now, Manifests: []string{idA, idB, idC}}}, Layers: []string{idA, idB}}
	p = MakePlan(Inputs{History: h, Objects: objs(now, keys...), Policy: retention.Policy{Last: 1}, Now: now, Delay: time.Hour})
	got := render(p)
	if strings.Contains(got, ".json.zst") || !strings.Contains(got, "delete snapshots/"+idA+".json (record of a snapshot dropped earlier") {
		t.Errorf("layers of the head, records left over:\n%s", got)
	}
}

// TestPruneOfAChainKeepsWhatKeptSnapshotsNeed: through the store, a prune
// that drops snapshots whose manifests a kept delta applies to keeps those
// manifests, the kept snapshots restore exactly, and once a compacted
// delta no longer needs some of them, the next prune deletes those.
func TestPruneOfAChainKeepsWhatKeptSnapshotsNeed(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	st, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	trees := map[string]testhome.Tree{}
	var ids []string
	var chains [][]string
	step := func(i int) {
		f, err := os.OpenFile(filepath.Join(home, "jobs/test/builds/2/log"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "line %d\n", i)
		f.Close()
		res, err := snapshot.Snapshot(ctx, snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: sel, Log: zerolog.Nop(), MaxManifestChain: 4})
		if err != nil {
			t.Fatal(err)
		}
		ids, chains = append(ids, res.ID), append(chains, res.Manifests)
		if trees[res.ID], err = testhome.Read(home, sel.Selected); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		step(i)
	}
	if len(chains[3]) != 4 {
		t.Fatalf("chains %v: want the fourth snapshot to need four manifests", chains)
	}
	stored := func(key string) bool {
		rc, err := st.Get(ctx, key, 0, -1)
		if err == nil {
			rc.Close()
		}
		return err == nil
	}
	restores := func(id string) {
		t.Helper()
		target := t.TempDir()
		if _, err := restore.Restore(ctx, restore.Options{Home: testhome.Open(t, target), Store: st, Snapshot: id, Log: zerolog.Nop()}); err != nil {
			t.Fatalf("restore %s after prune: %v", id, err)
		}
		got, _ := testhome.Read(target, sel.Selected)
		if d := testhome.Diff(trees[id], got); len(d) > 0 {
			t.Errorf("snapshot %s restores differently after prune: %v", id, d[:min(len(d), 5)])
		}
	}
	if _, err := Run(ctx, Options{Store: st, Policy: retention.Policy{Last: 1}, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:3] {
		if !stored(repo.ManifestKey(id)) || stored(repo.RecordKey(id)) {
			t.Errorf("dropped %s: its manifest must stay (the head's delta needs it) and its record go", id)
		}
	}
	restores(ids[3])
	h, err := repo.LoadHistory(ctx, st)
	if err != nil || len(h.Snapshots) != 1 || len(h.Unreferenced) != 0 || len(h.Layers) != 3 {
		t.Fatalf("history after prune: %+v (%v), want the head and three layers", h, err)
	}
	// The next snapshot merges the upper half of the chain (it is at its
	// limit of 4) into a delta on the second snapshot: the third and
	// fourth manifests are needed no more once the head alone is kept.
	step(4)
	if !slices.Equal(chains[4], []string{ids[0], ids[1], ids[4]}) {
		t.Fatalf("chains %v: want the fifth on the second", chains)
	}
	if _, err := Run(ctx, Options{Store: st, Policy: retention.Policy{Last: 1}, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids[:4] {
		if stored(repo.ManifestKey(id)) != (i < 2) || stored(repo.RecordKey(id)) {
			t.Errorf("snapshot %d: manifest stored %v, record stored %v; want the manifest only for the first two", i, stored(repo.ManifestKey(id)), stored(repo.RecordKey(id)))
		}
	}
	restores(ids[4])
}

// TestPlanRepackedArchives: an archive a repack replaced goes once no kept
// record lists it and the grace period is over, even when its own snapshot
// is kept; one a kept record still lists (a repack cut short) stays
// whatever the note says; a note goes once every archive it replaced is
// gone.
func TestPlanRepackedArchives(t *testing.T) {
	const idR = "20261201T123000.000Z-eeeeee" // the repack's new archive
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	note := &repo.RepackNote{ID: idR, Time: now.Add(-10 * time.Minute), Replaced: []string{idA, idB}}
	// B and C kept; C no longer lists B's archive, B still lists A's (cut short).
	h := &repo.History{Head: idC, Snapshots: []*repo.Record{rec(idC, idB, idC, idR), rec(idB, "", idA, idR)}}
	objects := objs(now.Add(-time.Hour), repo.ArchiveKey(idA), repo.ArchiveKey(idB), repo.ArchiveKey(idC), repo.ArchiveKey(idR), repo.RecordKey(idB), repo.RecordKey(idC))
	plan := func(grace time.Duration, objects []store.Object) string {
		return render(MakePlan(Inputs{History: h, Objects: objects, Policy: retention.Policy{Last: 2}, Now: now, Delay: time.Hour, Notes: []*repo.RepackNote{note}, Grace: grace}))
	}
	if got := plan(time.Hour, objects); got != "" {
		t.Errorf("within the grace period:\n%s", got)
	}
	want := "delete archives/" + idB + ".tar.zst (repacked into archive " + idR + " at 2026-12-01T12:50:00Z; no kept snapshot points into it)\n"
	if got := plan(5*time.Minute, objects); got != want {
		t.Errorf("after the grace period:\ngot:\n%swant:\n%s", got, want)
	}
	objects = slices.DeleteFunc(objects, func(o store.Object) bool { return o.Key == repo.ArchiveKey(idB) })
	if got := plan(5*time.Minute, objects); got != "" {
		t.Errorf("the note went while A, which it names, is still there:\n%s", got)
	}
	objects = slices.DeleteFunc(objects, func(o store.Object) bool { return o.Key == repo.ArchiveKey(idA) })
	if got, want := plan(5*time.Minute, objects), "delete "+repo.RepackKey(idR)+" (note of a finished repack: every archive it replaced is deleted)\n"; got != want {
		t.Errorf("once both archives are gone:\ngot:\n%swant:\n%s", got, want)
	}
}
