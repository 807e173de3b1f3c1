package maint

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// RepackOptions configure Repack. Store must read and write the store's
// manifests and archives as the head's snapshot does (an encrypted store
// through its identity and recipients).
type RepackOptions struct {
	Store  store.Store
	Policy RepackPolicy
	Level  archive.Level // zstd level of the new archive; 0: fastest
	// Keep, when set, says which snapshots of the history are kept (a
	// prune dry run has not dropped the others yet); nil: all of them.
	Keep   func(id string) bool
	DryRun bool
	Now    func() time.Time // nil: time.Now
	Log    zerolog.Logger
}

// RepackResult says what a repack did, or would do.
type RepackResult struct {
	// Skipped says why no repack was considered; empty otherwise.
	Skipped string
	// Repacked are the archives replaced, and why each was chosen.
	Repacked []string
	Why      map[string]string
	// ID is the new archive (empty when nothing had to be copied).
	ID string
	// Live estimates the bytes to copy; Freed is what the repacked
	// archives store, deleted by prune once the grace period is over.
	Live, Freed int64
	Stored      int64 // bytes of the new archive
	Copied      int   // file versions copied into it
	Layers      int   // manifest layers rewritten
	Records     int   // snapshot records rewritten
}

// Repack copies the files that kept snapshots still use out of archives
// holding many bytes no kept snapshot uses (or, for the head's archive
// bound, out of its smallest archives) into one new archive, and re-points
// every kept snapshot at it. The old archives are left to prune, which
// deletes them once the grace period after the repack's note is over.
//
// Order, so that a kill at any step leaves every snapshot restorable and
// the store prunable (prune keeps every archive a kept record lists and
// reads no manifest): the note; the new archive; the records list it too;
// the manifest layers are rewritten one by one (each an atomic overwrite,
// the same tree with its bytes elsewhere); the records stop listing the
// old archives. Until the last step, every archive any layer points into
// is listed; a repack killed half-way is finished by the next one, which
// finds the old archives unused and drops them from the records.
func Repack(ctx context.Context, o RepackOptions) (*RepackResult, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Level == 0 {
		o.Level = archive.Level(1)
	}
	res := &RepackResult{}
	h, err := repo.LoadHistory(ctx, o.Store)
	if err != nil || h.Head == "" {
		return res, err
	}
	var kept []*repo.Record
	for _, r := range h.Snapshots {
		if o.Keep != nil && !o.Keep(r.ID) {
			continue
		}
		if r.Partial {
			res.Skipped = fmt.Sprintf("snapshot %s predates snapshot records, so which archives it needs is unknown", r.ID)
			return res, nil
		}
		kept = append(kept, r)
	}
	listed := map[string]bool{}
	for _, r := range kept {
		for _, a := range r.Archives {
			listed[a] = true
		}
	}
	size, err := repo.PlainArchiveSizes(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	maps.DeleteFunc(size, func(id string, _ int64) bool { return !listed[id] })
	l, err := scanKept(ctx, o.Store, kept, nil)
	if err != nil {
		return nil, err
	}
	live := l.live()
	// An archive a record lists but the store lacks is not repacked: a
	// restore or verify names it; copying from it would only fail.
	head := slices.DeleteFunc(slices.Clone(h.Snapshots[0].Archives), func(a string) bool { _, ok := size[a]; return !ok })
	res.Repacked, res.Why = chooseRepack(live, size, head, o.Policy)
	for _, a := range res.Repacked {
		res.Live += live[a]
		res.Freed += size[a]
	}
	if len(res.Repacked) == 0 || o.DryRun {
		return res, nil
	}
	return res, repack(ctx, o, kept, res)
}

// where is a copied file's place in the new archive.
type where struct{ offset, length int64 }

func repack(ctx context.Context, o RepackOptions, kept []*repo.Record, res *RepackResult) error {
	chosen := map[string]bool{}
	for _, a := range res.Repacked {
		chosen[a] = true
	}
	now := o.Now().UTC()
	res.ID = repo.NewID(now)
	if err := repo.WriteRepackNote(ctx, o.Store, &repo.RepackNote{ID: res.ID, Time: now, Replaced: res.Repacked}); err != nil {
		return err
	}
	// A second scan copies the live versions of the chosen archives as
	// it finds them.
	c, err := newCopier(ctx, o, res.ID, chosen)
	if err != nil {
		return err
	}
	l, err := scanKept(ctx, o.Store, kept, c)
	if err != nil {
		err = c.abort(err)
	} else {
		err = c.finish()
	}
	if err != nil {
		o.Store.Delete(context.WithoutCancel(ctx), repo.RepackKey(res.ID)) // best effort: prune collects it
		return err
	}
	res.Copied = c.copied()
	if res.Copied == 0 {
		res.ID = ""
	} else {
		res.Stored = c.up.Written()
		// Rewritten layers are of the current format; older releases must refuse the store.
		if err := repo.UpgradeMarker(ctx, o.Store); err != nil {
			return err
		}
	}
	// Which kept snapshots point into the repacked archives, by their records.
	var affected []*repo.Record
	for _, r := range kept {
		if slices.ContainsFunc(r.Archives, func(a string) bool { return chosen[a] }) {
			affected = append(affected, r)
		}
	}
	rewrite := func(r *repo.Record, archives []string) error {
		nr := *r
		nr.Archives = archives
		res.Records++
		return repo.WriteRecord(ctx, o.Store, &nr)
	}
	if res.ID != "" {
		for _, r := range affected {
			if err := rewrite(r, append(slices.Clone(r.Archives), res.ID)); err != nil {
				return err
			}
		}
	}
	for i, lid := range l.layers {
		touched := false
		for a := range l.uses[i] {
			touched = touched || chosen[a]
		}
		if !touched {
			continue
		}
		if err := rewriteLayer(ctx, o.Store, lid, chosen, res.ID, l.moves[i], c.where); err != nil {
			return err
		}
		res.Layers++
	}
	for _, r := range affected {
		var keep []string
		for _, a := range r.Archives {
			if !chosen[a] {
				keep = append(keep, a)
			}
		}
		if res.ID != "" && l.pointsInto(r.ID, chosen) {
			keep = append(keep, res.ID)
		}
		if err := rewrite(r, keep); err != nil {
			return err
		}
	}
	o.Log.Info().Strs("repacked", res.Repacked).Str("archive", res.ID).Int("files", res.Copied).Int64("stored_bytes", res.Stored).
		Int64("freed_bytes", res.Freed).Int("layers", res.Layers).Int("records", res.Records).
		Msg("repacked: the kept snapshots point into the new archive; prune deletes the old ones after the grace period")
	return nil
}

// rewriteLayer rewrites manifest layer lid so that its entries whose
// versions were copied point into archive id. moves says, for each of its
// entries in a repacked archive in order, which copied version it resolves
// to (scanKept); an entry no kept snapshot resolves to (-1: hidden by a
// newer layer in every kept chain) was not copied and keeps its old place,
// which no restore reads.
func rewriteLayer(ctx context.Context, st store.Store, lid string, chosen map[string]bool, id string, moves []int32, at func(n int32, path string) (where, bool)) error {
	m, err := repo.OpenLayer(ctx, st, lid)
	if err != nil {
		return err
	}
	defer m.Close()
	key := repo.ManifestKey(lid)
	up := repo.NewUpload(ctx, st, key)
	next, changed := 0, ""
	_, err = archive.RewriteLayer(m, up, func(e *archive.Entry) bool {
		if !chosen[e.Archive] {
			return false
		}
		if next == len(moves) {
			changed = e.Path
			return false
		}
		n := moves[next]
		next++
		if n < 0 {
			return false
		}
		to, ok := at(n, e.Path)
		if !ok {
			changed = e.Path
			return false
		}
		e.Archive, e.Offset, e.Length = id, to.offset, to.length
		return true
	}, func(archives []string) []string {
		var out []string
		for _, a := range archives {
			if !chosen[a] {
				out = append(out, a)
			}
		}
		if id != "" && len(archives) != len(out) {
			out = append(out, id)
		}
		return out
	})
	if err == nil && (changed != "" || next != len(moves)) {
		err = fmt.Errorf("the layer changed while it was repacked (at %q); it was left as it was, and the next prune finishes the repack", changed)
	}
	if err != nil {
		return up.Abort(fmt.Errorf("repack: rewrite %s: %w", repo.Name(st, key), err))
	}
	if err := up.Finish(); err != nil {
		return fmt.Errorf("repack: rewrite %s: %w", repo.Name(st, key), err)
	}
	return nil
}
