package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/engine"
	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/prune"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/retention"
	"github.com/homesnap/homesnap/internal/store"
)

// Repacking configures the repack that follows a prune (see engine.Repack).
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

// runRepack repacks and logs; st must encrypt like the head's snapshot.
func runRepack(ctx context.Context, st store.Store, r *Repacking, maxArchives int, keep func(string) bool, dryRun bool, log zerolog.Logger) (*engine.RepackResult, error) {
	res, err := engine.Repack(ctx, engine.RepackOptions{Store: st, Keep: keep, DryRun: dryRun, Log: log,
		Policy: engine.RepackPolicy{MaxUnused: r.MaxUnused / 100, MaxArchives: maxArchives}})
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

// pruneRepack is the prune command's repack: it needs the store's
// recipients to rewrite an encrypted store's manifests, which prune is not
// given, so an encrypted store is left alone (the sidecar repacks it).
func pruneRepack(ctx context.Context, st store.Store, r *Retention, p *prune.Plan, dryRun bool, log zerolog.Logger) (*engine.RepackResult, error) {
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
	return runRepack(ctx, st, &r.Repacking, 0, keep, dryRun, log)
}

// printRepack tells the prune command's user what a repack did.
func printRepack(w io.Writer, res *engine.RepackResult, dryRun bool) {
	verb := "repacked"
	if dryRun {
		verb = "would repack"
	}
	for _, a := range res.Repacked {
		fmt.Fprintf(w, "%s archives/%s.tar.zst: %s\n", verb, a, res.Why[a])
	}
	if len(res.Repacked) > 0 {
		fmt.Fprintf(w, "%s %d archives (%d bytes, about %d of them still used, copied into one)", verb, len(res.Repacked), res.Freed, res.Live)
		if !dryRun {
			fmt.Fprintf(w, " into archives/%s.tar.zst (%d bytes); the old ones are deleted by a prune once --repack-grace has passed", res.ID, res.Stored)
		}
		fmt.Fprintln(w)
	}
}

// afterSnapshot keeps the store in shape after a committed snapshot. With
// a --keep-* policy and prune on, it prunes and then repacks, which bounds
// both the unused bytes and the head's archives for every kept snapshot;
// otherwise (nothing may be deleted, so a repack would only add copies) it
// consolidates the head and prunes as configured. Failures are logged; the
// snapshot stands either way.
func afterSnapshot(ctx context.Context, cfg *snapshotConfig, opts engine.SnapshotOptions, m *metrics.Metrics, stdout io.Writer, log zerolog.Logger) {
	pruning := cfg.Prune && !cfg.policy().Empty()
	if !pruning || !cfg.Repack || cfg.ConsolidateMax <= 0 {
		consolidate(ctx, opts, cfg.ConsolidateMax, stdout, log)
		if pruning {
			runPrune(ctx, opts.Store, &cfg.Retention, false, log)
		}
		return
	}
	if _, err := runPrune(ctx, opts.Store, &cfg.Retention, false, log); err != nil {
		return
	}
	head, _, err := repo.LoadHead(ctx, opts.Store)
	if err != nil || head == nil {
		return
	}
	if !slices.Equal(head.Recipients, opts.Recipients) {
		log.Info().Msg("repack skipped: the head is encrypted to other recipients (the next snapshot is a full one)")
		return
	}
	res, err := runRepack(ctx, opts.Store, &cfg.Repacking, cfg.ConsolidateMax, nil, false, log)
	if err == nil && len(res.Repacked) > 0 {
		m.Repacked(res.Stored, len(res.Repacked))
	}
}
