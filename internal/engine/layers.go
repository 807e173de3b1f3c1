package engine

import (
	"cmp"
	"context"
	"slices"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
)

// DefaultManifestChain bounds the manifests a restore merges: a snapshot
// whose parent's chain is this long writes a full manifest. 16 layers cost
// a restore at most 15 small extra GETs, in parallel.
const DefaultManifestChain = 16

// maxDeltaShare: once the delta manifests of the parent's chain hold more
// lines than this share of its entries, reading the chain costs noticeably
// more than a full manifest would, so the next manifest is a full one.
const maxDeltaShare = 4 // one line in four

// chooseManifest decides whether the snapshot writes a delta manifest on
// its parent or a full one. A delta holds only the entries that differ
// from the parent's and a marker per deleted path, so an incremental costs
// what changed; the chain a restore merges stays short (MaxManifestChain)
// and mostly full manifest (maxDeltaShare). A consolidation writes a full
// manifest, and so does a snapshot after a key change (no parent is read).
func (s *snapshotter) chooseManifest(ctx context.Context, parent *archive.ChainReader) error {
	if s.o.rewrite != nil {
		return nil
	}
	layers := parent.Layers()
	limit := cmp.Or(s.o.MaxManifestChain, DefaultManifestChain)
	if len(layers) >= limit {
		s.o.Log.Debug().Int("layers", len(layers)).Msg("the parent's manifest chain is at its limit: writing a full manifest")
		return nil
	}
	rec, err := repo.LoadRecord(ctx, s.o.Store, s.parentID)
	if err != nil {
		s.o.Log.Warn().Err(err).Str("parent", s.parentID).Msg("cannot read the parent's record: writing a full manifest")
		return nil
	}
	if rec.Partial && len(layers) > 1 || rec.DeltaLines*maxDeltaShare > rec.Entries {
		s.o.Log.Debug().Int64("delta_lines", rec.DeltaLines).Int64("entries", rec.Entries).Msg("the parent's delta manifests are large: writing a full manifest")
		return nil
	}
	// Older releases cannot read a delta, nor would their prune keep its
	// layers: the store says so before the first one is written.
	if err := repo.UpgradeMarker(ctx, s.o.Store); err != nil {
		return err
	}
	s.base, s.chain, s.deltaLines = s.parentID, append(slices.Clone(layers), s.id), rec.DeltaLines
	return nil
}

// deleted handles a path of the parent that the walk no longer finds: a
// delta manifest marks it.
func (s *snapshotter) deleted(jobs *cutter, old *archive.Entry, cnt *counts) error {
	cnt.deleted++
	if s.base == "" {
		return nil
	}
	return jobs.add(item{base: old})
}
