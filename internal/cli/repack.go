package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/maint"
	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/prune"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/retention"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
)

// Repacking configures the repack that follows a prune (see maint.Repack).
type Repacking struct {
	Repack      bool          `envconfig:"HOMESNAP_REPACK" default:"true" flag:"repack" desc:"after pruning, copy the files kept snapshots still use out of mostly unused archives into one and re-point every kept snapshot at it (false: consolidate the head only, as before)"`
	MaxUnused   float64       `envconfig:"HOMESNAP_REPACK_MAX_UNUSED" default:"2" flag:"repack-max-unused" desc:"percent of the kept snapshots' archive bytes that no kept snapshot uses, tolerated before archives are repacked"`
	RepackGrace time.Duration `envconfig:"HOMESNAP_REPACK_GRACE" default:"15m" flag:"repack-grace" desc:"prune deletes an archive a repack replaced only once this long has passed since the repack, so that a restore that read the old manifest can finish (0: at the next prune)"`
}

func (r *Repacking) validate() error {
	if r.MaxUnused < 0 || r.MaxUnused >= 100 {
		return usageError{fmt.Errorf("--repack-max-unused/HOMESNAP_REPACK_MAX_UNUSED %v: want a percentage from 0 to 100", r.MaxUnused)}
	}
	if r.RepackGrace < 0 {
		return usageError{fmt.Errorf("--repack-grace/HOMESNAP_REPACK_GRACE %v: must not be negative", r.RepackGrace)}
	}
	return nil
}

// pruneRepack is the prune command's repack: it needs the store's
// recipients to rewrite an encrypted store's manifests, which prune is not
// given, so an encrypted store is left alone (the sidecar repacks it).
func pruneRepack(ctx context.Context, st store.Store, r *Retention, p *prune.Plan, dryRun bool, log zerolog.Logger) (*maint.RepackResult, error) {
	if !r.Repack {
		return nil, nil
	}
	m, _, err := repo.LoadMarker(ctx, st)
	if err != nil {
		return nil, err
	}
	if m != nil && m.Encryption != "" {
		log.Info().Msg("repack skipped: the store is encrypted and prune has no recipients; the sidecar repacks it")
		return nil, nil
	}
	keep := func(id string) bool {
		return slices.ContainsFunc(p.Decisions, func(d retention.Decision) bool { return d.ID == id && d.Keep })
	}
	return maint.RepackStore(ctx, st, maintenance(r, true, 0, snapshot.Options{}, log), 0, keep, dryRun)
}

// printRepack tells the prune command's user what a repack did.
func printRepack(w io.Writer, res *maint.RepackResult, dryRun bool) {
	verb := "repacked"
	if dryRun {
		verb = "would repack"
	}
	for _, a := range res.Repacked {
		fmt.Fprintf(w, "%s %s: %s\n", verb, repo.ArchiveKey(a), res.Why[a])
	}
	if len(res.Repacked) > 0 {
		fmt.Fprintf(w, "%s %d archives (%d bytes, about %d of them still used, copied into one)", verb, len(res.Repacked), res.Freed, res.Live)
		if !dryRun {
			fmt.Fprintf(w, " into %s (%d bytes); the old ones are deleted by a prune once --repack-grace has passed", repo.ArchiveKey(res.ID), res.Stored)
		}
		fmt.Fprintln(w)
	}
}

// maintenance is the maintenance policy of r's and maxArchives' flags,
// logging to log; a consolidating snapshot is taken like opts.
func maintenance(r *Retention, prune bool, maxArchives int, opts snapshot.Options, log zerolog.Logger) maint.Policy {
	return maint.Policy{Keep: r.policy(), Prune: prune, PruneDelay: r.PruneDelay, RepackGrace: r.RepackGrace,
		Repack: r.Repack, MaxUnused: r.MaxUnused / 100, MaxArchives: maxArchives, Snapshot: opts, Log: log}
}

// afterSnapshot runs the maintenance after a committed snapshot (see
// maint.Maintain): failures are logged there, and the snapshot stands. It
// returns the ID of the snapshot a consolidation committed, if any.
func afterSnapshot(ctx context.Context, cfg *snapshotConfig, opts snapshot.Options, m *metrics.Metrics, log zerolog.Logger) (consolidated string) {
	rep, err := maint.Maintain(ctx, opts.Store, maintenance(&cfg.Retention, cfg.Prune, cfg.ConsolidateMax, opts, log))
	if c := rep.Consolidated; c != nil && !c.Unchanged {
		consolidated = c.ID
	}
	if r := rep.Repacked; err == nil && r != nil && len(r.Repacked) > 0 {
		m.Repacked(r.Stored, len(r.Repacked))
	}
	storeContents(ctx, opts.Store, rep.Pruned, err, m, log)
	return consolidated
}

// storeContents keeps the store-size gauges right: a prune's listing sets
// them (less what it deleted), and without one the sidecar lists the
// store once, after its first snapshot; puts add to them in between.
func storeContents(ctx context.Context, st store.Store, pruned *prune.Plan, err error, m *metrics.Metrics, log zerolog.Logger) {
	switch {
	case m == nil:
	case pruned != nil && err == nil:
		m.StoreContents(pruned.Remaining())
	case !m.StoreContentsKnown():
		var objs []store.Object
		if err := repo.ListObjects(ctx, st, func(o store.Object) error { objs = append(objs, o); return nil }); err != nil {
			log.Warn().Err(err).Msg("cannot list the store for homesnap_store_bytes; the next snapshot tries again")
			return
		}
		m.StoreContents(objs)
	}
}
