// Package maint keeps a store in shape after snapshots: it prunes what the
// retention policy drops (internal/prune plans it), consolidates the head's
// archives, and repacks archives that kept snapshots barely use, with the
// live-range accounting these choices rest on. Maintain is the policy the
// sidecar applies after every committed snapshot.
package maint

import (
	"context"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/prune"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/retention"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
)

// Policy says what maintenance does.
type Policy struct {
	// Keep is the retention policy Prune applies (empty: nothing is
	// dropped, so Maintain does not prune). Without Prune, Maintain
	// leaves deleting to others (the prune command, a lifecycle rule).
	Keep  retention.Policy
	Prune bool
	// PruneDelay: see prune.Options.Delay; RepackGrace: see
	// prune.Options.RepackGrace.
	PruneDelay, RepackGrace time.Duration
	// Repack, after a prune, re-points every kept snapshot away from
	// archives of which more than MaxUnused (a share, 0 to 1) is unused;
	// without it the head alone is consolidated.
	Repack    bool
	MaxUnused float64
	// MaxArchives bounds the archives the head points into (0: no
	// bound; nothing is then consolidated, nor repacked for it).
	MaxArchives int
	// Snapshot gives a consolidating snapshot its workers, level and
	// recipients (the head's); its Store is Maintain's store.
	Snapshot snapshot.Options
	Log      zerolog.Logger
}

// Report says what Maintain did; a step that did not run is nil.
type Report struct {
	Consolidated *snapshot.Result // a consolidating snapshot, committed or Unchanged
	Pruned       *prune.Plan
	Repacked     *RepackResult
}

// Maintain keeps the store in shape after a committed snapshot. With a
// retention policy and pruning on, it prunes and then repacks, which
// bounds both the unused bytes and the head's archives for every kept
// snapshot; otherwise (nothing may be deleted, so a repack would only add
// copies) it consolidates the head and prunes as configured. Each failure
// is logged and returned; the snapshot stands either way, and the store
// reads as before.
func Maintain(ctx context.Context, st store.Store, p Policy) (Report, error) {
	var rep Report
	var err error
	pruning := p.Prune && !p.Keep.Empty()
	if !pruning || !p.Repack || p.MaxArchives <= 0 {
		rep.Consolidated, err = consolidateHead(ctx, st, p)
		if pruning {
			var perr error
			if rep.Pruned, perr = Prune(ctx, st, p, false); err == nil {
				err = perr
			}
		}
		return rep, err
	}
	if rep.Pruned, err = Prune(ctx, st, p, false); err != nil {
		return rep, err
	}
	head, _, err := repo.LoadHead(ctx, st)
	if err != nil || head == nil {
		return rep, err
	}
	if !slices.Equal(head.Recipients, p.Snapshot.Recipients) {
		p.Log.Info().Msg("repack skipped: the head is encrypted to other recipients (the next snapshot is a full one)")
		return rep, nil
	}
	rep.Repacked, err = RepackStore(ctx, st, p, p.MaxArchives, nil, false)
	return rep, err
}

// consolidateHead takes a consolidating snapshot when the head is due one;
// a failure is logged and leaves the head as it was.
func consolidateHead(ctx context.Context, st store.Store, p Policy) (*snapshot.Result, error) {
	o := p.Snapshot
	o.Store = st
	res, err := Consolidate(ctx, o, ConsolidatePolicy{MaxArchives: p.MaxArchives})
	switch {
	case err != nil:
		p.Log.Error().Err(err).Msg("consolidation failed; the head is unchanged")
	case !res.Unchanged:
		p.Log.Info().Str("snapshot", res.ID).Str("parent", res.Parent).Int("archives", len(res.Totals.Archives)).
			Int64("stored_bytes", res.Stored).Dur("elapsed", res.Elapsed).Msg("consolidated: the head points into fewer archives")
	}
	return res, err
}

// Prune applies p.Keep to the store and logs a summary line.
func Prune(ctx context.Context, st store.Store, p Policy, dryRun bool) (*prune.Plan, error) {
	plan, err := prune.Run(ctx, prune.Options{Store: st, Policy: p.Keep, Delay: p.PruneDelay, RepackGrace: p.RepackGrace, DryRun: dryRun, Log: p.Log})
	if err != nil {
		p.Log.Error().Err(err).Str("store", st.String()).Msg("prune failed")
		return nil, err
	}
	p.Log.Info().Str("policy", plan.Policy.String()).Int("kept", plan.Kept()).Int("dropped", len(plan.Decisions)-plan.Kept()).
		Int("objects_deleted", len(plan.Delete)).Int64("bytes_freed", plan.Freed()).Bool("dry_run", dryRun).Msg("prune done")
	return plan, nil
}

// RepackStore repacks with p.MaxUnused and maxArchives, and logs; st must
// encrypt like the head's snapshot. keep: see RepackOptions.Keep.
func RepackStore(ctx context.Context, st store.Store, p Policy, maxArchives int, keep func(string) bool, dryRun bool) (*RepackResult, error) {
	log := p.Log
	res, err := Repack(ctx, RepackOptions{Store: st, Keep: keep, DryRun: dryRun, Log: log,
		Policy: RepackPolicy{MaxUnused: p.MaxUnused, MaxArchives: maxArchives}})
	switch {
	case err != nil:
		log.Error().Err(err).Str("store", st.String()).Msg("repack failed; every snapshot still reads as before (the next repack finishes or redoes it)")
	case res.Skipped != "":
		log.Info().Str("why", res.Skipped).Msg("repack skipped")
	case len(res.Repacked) == 0:
		log.Debug().Msg("repack: nothing worth repacking")
	default:
		for _, a := range res.Repacked {
			log.Info().Str("archive", a).Str("why", res.Why[a]).Bool("dry_run", dryRun).Msg("repack: replace")
		}
	}
	return res, err
}
