package maint

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
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
	// A second scan keeps the entries to copy: only the chosen archives'.
	l, err := scanKept(ctx, o.Store, kept, func(e *archive.Entry) bool { return chosen[e.Archive] })
	if err != nil {
		return err
	}
	copies := slices.Collect(maps.Keys(l.copies))
	now := o.Now().UTC()
	res.ID = repo.NewID(now)
	if err := repo.WriteRepackNote(ctx, o.Store, &repo.RepackNote{ID: res.ID, Time: now, Replaced: res.Repacked}); err != nil {
		return err
	}
	moved := map[version]where{}
	if len(copies) > 0 {
		if moved, res.Stored, err = writeRepacked(ctx, o, res.ID, l, copies); err != nil {
			o.Store.Delete(context.WithoutCancel(ctx), repo.RepackKey(res.ID)) // best effort: prune collects it
			return err
		}
		// Rewritten layers are format 2; older releases must refuse the store.
		if err := repo.UpgradeMarker(ctx, o.Store); err != nil {
			return err
		}
	} else {
		res.ID = ""
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
		if err := rewriteLayer(ctx, o.Store, lid, chosen, res.ID, moved); err != nil {
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
	o.Log.Info().Strs("repacked", res.Repacked).Str("archive", res.ID).Int64("stored_bytes", res.Stored).
		Int64("freed_bytes", res.Freed).Int("layers", res.Layers).Int("records", res.Records).
		Msg("repacked: the kept snapshots point into the new archive; prune deletes the old ones after the grace period")
	return nil
}

// writeRepacked copies the given live file versions into archive id, each
// checked against its hash, and returns where each landed. The files of a
// range are read with one ranged GET, so that a frame of small files is
// decoded once, not once per file.
func writeRepacked(ctx context.Context, o RepackOptions, id string, l *liveness, copies []version) (map[version]where, int64, error) {
	slices.SortFunc(copies, func(a, b version) int {
		return cmp.Or(strings.Compare(a.archive, b.archive), cmp.Compare(a.offset, b.offset), archive.ComparePaths(a.path, b.path))
	})
	comp, err := archive.NewCompressor(o.Level, 1)
	if err != nil {
		return nil, 0, err
	}
	up := repo.NewUpload(ctx, o.Store, repo.ArchiveKey(id))
	var offs, lens []int64
	var pos int64
	fw := archive.NewFrameWriter(comp, func(frame []byte) error {
		offs, lens = append(offs, pos), append(lens, int64(len(frame)))
		pos += int64(len(frame))
		_, err := up.Write(frame)
		comp.Release(frame)
		return err
	})
	type placed struct {
		v           version
		first, last int
	}
	var out []placed
	// Two versions of one path must not start in the same frame: a
	// reader finds a file in its range by name.
	framePaths, frame := map[string]bool{}, -1
	buf := make([]byte, 256<<10)
	copyRange := func(group []version) error {
		a, off := group[0].archive, group[0].offset
		want := map[string]version{}
		var end, total int64
		for _, v := range group {
			e := l.copies[v]
			want[v.path] = v
			end = max(end, off+e.Length)
			total += e.Size
		}
		key := repo.ArchiveKey(a)
		at := fmt.Sprintf("%s (bytes %d-%d)", repo.Name(o.Store, key), off, end-1)
		rc, err := o.Store.Get(ctx, key, off, end-off)
		if err != nil {
			return fmt.Errorf("repack: read %s: %w", at, err)
		}
		defer rc.Close()
		tr, err := archive.NewRangeReader(rc, archive.MaxDecoded(len(group), total))
		if err != nil {
			return fmt.Errorf("repack: read %s: %w", at, err)
		}
		defer tr.Close()
		for len(want) > 0 {
			hdr, err := tr.Next()
			if err != nil {
				return fmt.Errorf("repack: %w archive %s: %v before %q was found", archive.ErrCorrupt, at, err, group[0].path)
			}
			v, ok := want[hdr.Name]
			if !ok {
				continue
			}
			delete(want, hdr.Name)
			if framePaths[v.path] && fw.Frame() == frame {
				if err := fw.Cut(); err != nil {
					return err
				}
			}
			first, last, err := fetch.CopyEntry(fw, tr, hdr.Size, l.copies[v], buf, at)
			if err != nil {
				return fmt.Errorf("repack: %w", err)
			}
			if first != frame {
				clear(framePaths)
				frame = first
			}
			framePaths[v.path] = true
			out = append(out, placed{v, first, last})
		}
		return nil
	}
	for len(copies) > 0 {
		n := 1
		for n < len(copies) && copies[n].archive == copies[0].archive && copies[n].offset == copies[0].offset {
			n++
		}
		if err := copyRange(copies[:n]); err != nil {
			return nil, 0, up.Abort(err)
		}
		copies = copies[n:]
	}
	if err := fw.Cut(); err != nil {
		return nil, 0, up.Abort(err)
	}
	if _, err := up.Write(comp.EndFrame()); err != nil {
		return nil, 0, up.Abort(err)
	}
	if err := up.Finish(); err != nil {
		return nil, 0, fmt.Errorf("repack: upload %s: %w", repo.Name(o.Store, repo.ArchiveKey(id)), err)
	}
	moved := make(map[version]where, len(out))
	for _, p := range out {
		moved[p.v] = where{offs[p.first], offs[p.last] + lens[p.last] - offs[p.first]}
	}
	return moved, up.Written(), nil
}

// rewriteLayer rewrites manifest layer lid so that its entries whose
// versions were copied point into archive id; an entry no kept snapshot
// resolves to (hidden by a newer layer in every kept chain) was not copied
// and keeps its old place, which no restore reads.
func rewriteLayer(ctx context.Context, st store.Store, lid string, chosen map[string]bool, id string, moved map[version]where) error {
	m, err := repo.OpenLayer(ctx, st, lid)
	if err != nil {
		return err
	}
	defer m.Close()
	key := repo.ManifestKey(lid)
	up := repo.NewUpload(ctx, st, key)
	_, err = archive.RewriteLayer(m, up, func(e *archive.Entry) bool {
		to, ok := moved[version{e.Archive, e.Offset, e.Path}]
		if !ok || !chosen[e.Archive] {
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
	if err != nil {
		return up.Abort(fmt.Errorf("repack: rewrite %s: %w", repo.Name(st, key), err))
	}
	if err := up.Finish(); err != nil {
		return fmt.Errorf("repack: rewrite %s: %w", repo.Name(st, key), err)
	}
	return nil
}
