package maint

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
)

// ConsolidatePolicy bounds what a restore of the head must read. Every
// incremental snapshot adds an archive the head may point into, and files
// replaced since leave dead bytes in old archives; consolidation copies the
// live files of some archives into one new archive, from the store (never
// re-reading the home), and commits a snapshot of the same tree that points
// at it.
//
// Copying is not free: the snapshots retention still keeps point into the
// old archives, so every byte copied is stored twice until they age out.
// The choice is therefore size-tiered, as in an LSM tree: the small recent
// archives are merged, an archive is only copied again once the merge at
// least doubles what it joins, and a large archive (a quarter or more of
// what the head uses, such as the first full snapshot's) is only rewritten
// once most of it is dead.
type ConsolidatePolicy struct {
	// MaxArchives: when the head points into more archives, the cheapest
	// ones (fewest live bytes) are merged until at most this many remain,
	// and further while that stays cheap, down to half of it. 0 turns
	// consolidation off.
	MaxArchives int
	// MaxDead: an archive at least this fraction of which no file of the
	// head uses is rewritten too (0 means 0.5), alone only when that frees
	// a tenth of what the head's archives hold.
	MaxDead float64
}

// Shares of chooseRewrite's decisions.
const (
	// largeShare: an archive holding at least this share of the head's
	// live bytes is never merged just to lower the count.
	largeShare = 0.25
	// minReclaim: rewriting mostly dead archives alone, without a merge
	// due anyway, must free at least this share of the archives' bytes;
	// each consolidation stores a manifest and takes a retention slot.
	minReclaim = 0.1
)

// Consolidate applies p to the head, taking a consolidating snapshot when
// it is due (o gives the store, workers and level; o.Home is not walked,
// only its mark moves to the consolidated snapshot: see snapshot.Rewrite). It
// returns an Unchanged result when nothing was due.
func Consolidate(ctx context.Context, o snapshot.Options, p ConsolidatePolicy) (*snapshot.Result, error) {
	if p.MaxArchives <= 0 {
		return &snapshot.Result{Unchanged: true}, nil
	}
	if p.MaxDead <= 0 {
		p.MaxDead = 0.5
	}
	head, _, err := repo.LoadHead(ctx, o.Store)
	if err != nil || head == nil || !slices.Equal(head.Recipients, o.Recipients) {
		// No snapshot yet, or the next one is a full one anyway.
		return &snapshot.Result{Unchanged: true}, err
	}
	// A head that points only into its own archive uses every byte of it:
	// there is nothing to merge or reclaim, and no need to read a manifest
	// of a million lines to learn so (the first full snapshot's case).
	if rec, err := repo.LoadRecord(ctx, o.Store, head.Snapshot); err == nil && slices.Equal(rec.Archives, []string{head.Snapshot}) {
		return &snapshot.Result{Parent: head.Snapshot, Unchanged: true}, nil
	}
	live, err := LiveBytes(ctx, o.Store, head.Snapshot)
	if err != nil {
		return nil, err
	}
	size, err := repo.PlainArchiveSizes(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	maps.DeleteFunc(size, func(id string, _ int64) bool { _, ok := live[id]; return !ok })
	rewrite := chooseRewrite(live, size, p)
	if len(rewrite) == 0 {
		return &snapshot.Result{Parent: head.Snapshot, Unchanged: true}, nil
	}
	var copied int64
	for _, id := range rewrite {
		copied += live[id]
	}
	o.Log.Info().Str("head", head.Snapshot).Int("archives", len(live)).Strs("rewrite", rewrite).Int64("live_bytes", copied).
		Msg("consolidating: copying the live files of these archives into one")
	return snapshot.Rewrite(ctx, o, rewrite)
}

// chooseRewrite picks the archives to rewrite, given per archive the bytes
// the head uses (live) and its stored size. It returns them sorted, or nil.
//
//   - An archive at least p.MaxDead dead is rewritten whenever a merge is
//     due, and alone when those archives' dead bytes are worth a snapshot.
//   - When more than p.MaxArchives would remain, archives are merged
//     cheapest first (fewest live bytes; ties: the larger, then by ID), skipping
//     large ones, until at most p.MaxArchives remain; then the next is
//     merged too while it holds no more live bytes than those merged so
//     far and more than half of p.MaxArchives remain. That doubling rule
//     bounds how often a byte is copied, as size-tiered compaction does.
func chooseRewrite(live, size map[string]int64, p ConsolidatePolicy) []string {
	ids := make([]string, 0, len(live))
	var totalLive, totalSize int64
	for id := range live {
		ids = append(ids, id)
		totalLive += live[id]
		totalSize += max(size[id], live[id])
	}
	slices.SortFunc(ids, func(a, b string) int {
		// For the same copy, the larger archive frees more dead bytes.
		return cmp.Or(cmp.Compare(live[a], live[b]), cmp.Compare(size[b], size[a]), cmp.Compare(a, b))
	})
	chosen := map[string]bool{}
	var merged, reclaim int64 // live bytes copied; dead bytes freed
	for _, id := range ids {
		if dead := size[id] - live[id]; size[id] > 0 && float64(dead) >= p.MaxDead*float64(size[id]) {
			chosen[id] = true
			merged += live[id]
			reclaim += dead
		}
	}
	if len(ids) <= p.MaxArchives {
		if float64(reclaim) < minReclaim*float64(totalSize) {
			return nil
		}
	} else {
		mergeCheapest(ids, live, chosen, merged, p.MaxArchives)
	}
	out := make([]string, 0, len(chosen))
	for id := range chosen {
		out = append(out, id)
	}
	if len(out) == 1 && reclaim == 0 {
		return nil // rewriting one healthy archive into another gains nothing
	}
	slices.Sort(out)
	return out
}

// mergeCheapest adds to chosen the archives of ids (sorted cheapest
// first, those chosen already included) to merge into one new archive, so
// that at most maxArchives remain, and further while each merge at least
// doubles what was merged and more than half of maxArchives remain
// (size-tiered: a byte is copied again only once what joins it is as
// large). An archive holding largeShare or more of ids' live bytes is
// never merged for the count. merged is the live bytes chosen already.
func mergeCheapest(ids []string, live map[string]int64, chosen map[string]bool, merged int64, maxArchives int) {
	var total int64
	for _, id := range ids {
		total += live[id]
	}
	remain := func() int {
		n, any := 0, false
		for _, id := range ids {
			if chosen[id] {
				any = true
			} else {
				n++
			}
		}
		if any {
			n++ // the new archive
		}
		return n
	}
	for _, id := range ids {
		if chosen[id] || float64(live[id]) >= largeShare*float64(total) {
			continue
		}
		if remain() <= maxArchives && (remain() <= max(maxArchives/2, 1) || live[id] > merged) {
			break
		}
		chosen[id] = true
		merged += live[id]
	}
}
