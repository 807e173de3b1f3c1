package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/homesnap/homesnap/internal/maint"
	"github.com/homesnap/homesnap/internal/prune"
	"github.com/homesnap/homesnap/internal/retention"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
)

// Retention is the policy both the sidecar and the prune command apply.
type Retention struct {
	KeepLast    int `envconfig:"HOMESNAP_KEEP_LAST" flag:"keep-last" desc:"keep the newest N snapshots"`
	KeepHourly  int `envconfig:"HOMESNAP_KEEP_HOURLY" flag:"keep-hourly" desc:"keep the newest snapshot of each of the last N hours that have one"`
	KeepDaily   int `envconfig:"HOMESNAP_KEEP_DAILY" flag:"keep-daily" desc:"keep the newest snapshot of each of the last N days (UTC)"`
	KeepWeekly  int `envconfig:"HOMESNAP_KEEP_WEEKLY" flag:"keep-weekly" desc:"keep the newest snapshot of each of the last N ISO weeks"`
	KeepMonthly int `envconfig:"HOMESNAP_KEEP_MONTHLY" flag:"keep-monthly" desc:"keep the newest snapshot of each of the last N months"`
	KeepYearly  int `envconfig:"HOMESNAP_KEEP_YEARLY" flag:"keep-yearly" desc:"keep the newest snapshot of each of the last N years"`
	// Durations count back from the newest snapshot, not from now.
	KeepWithin        retention.Duration `envconfig:"HOMESNAP_KEEP_WITHIN" flag:"keep-within" desc:"keep every snapshot taken within this long of the newest one (30d, 2w, 36h, 1y: years, weeks, days, hours)"`
	KeepWithinHourly  retention.Duration `envconfig:"HOMESNAP_KEEP_WITHIN_HOURLY" flag:"keep-within-hourly" desc:"keep the newest snapshot of each hour within this long of the newest one"`
	KeepWithinDaily   retention.Duration `envconfig:"HOMESNAP_KEEP_WITHIN_DAILY" flag:"keep-within-daily" desc:"keep the newest snapshot of each day within this long of the newest one"`
	KeepWithinWeekly  retention.Duration `envconfig:"HOMESNAP_KEEP_WITHIN_WEEKLY" flag:"keep-within-weekly" desc:"keep the newest snapshot of each ISO week within this long of the newest one"`
	KeepWithinMonthly retention.Duration `envconfig:"HOMESNAP_KEEP_WITHIN_MONTHLY" flag:"keep-within-monthly" desc:"keep the newest snapshot of each month within this long of the newest one"`
	KeepWithinYearly  retention.Duration `envconfig:"HOMESNAP_KEEP_WITHIN_YEARLY" flag:"keep-within-yearly" desc:"keep the newest snapshot of each year within this long of the newest one"`
	PruneDelay        time.Duration      `envconfig:"HOMESNAP_PRUNE_DELAY" default:"6h" flag:"prune-delay" desc:"collect objects of snapshots that were never committed once older than this"`
	Repacking

	// Snapshots taken on demand are kept apart, so that requests cannot
	// push the scheduled history out of the counts above.
	KeepOnDemand int `envconfig:"HOMESNAP_KEEP_ON_DEMAND" default:"3" flag:"keep-on-demand" desc:"with a --keep-* policy, keep the newest N snapshots taken on demand (POST /snapshot, SIGUSR1); the other --keep-* counts neither keep nor count them"`
}

func (r *Retention) policy() retention.Policy {
	return retention.Policy{Last: r.KeepLast, Hourly: r.KeepHourly, Daily: r.KeepDaily, Weekly: r.KeepWeekly, Monthly: r.KeepMonthly, Yearly: r.KeepYearly,
		Within: time.Duration(r.KeepWithin), WithinHourly: time.Duration(r.KeepWithinHourly), WithinDaily: time.Duration(r.KeepWithinDaily),
		WithinWeekly: time.Duration(r.KeepWithinWeekly), WithinMonthly: time.Duration(r.KeepWithinMonthly), WithinYearly: time.Duration(r.KeepWithinYearly),
		OnDemand: r.KeepOnDemand}
}

func (r *Retention) validate() error {
	for _, k := range []struct {
		flag string
		n    int
	}{{"--keep-last/HOMESNAP_KEEP_LAST", r.KeepLast}, {"--keep-hourly/HOMESNAP_KEEP_HOURLY", r.KeepHourly},
		{"--keep-daily/HOMESNAP_KEEP_DAILY", r.KeepDaily}, {"--keep-weekly/HOMESNAP_KEEP_WEEKLY", r.KeepWeekly},
		{"--keep-monthly/HOMESNAP_KEEP_MONTHLY", r.KeepMonthly}, {"--keep-yearly/HOMESNAP_KEEP_YEARLY", r.KeepYearly}, {"--keep-on-demand/HOMESNAP_KEEP_ON_DEMAND", r.KeepOnDemand}} {
		if k.n < 0 {
			return usageError{fmt.Errorf("%s %d: want 0 (no such rule) or more", k.flag, k.n)}
		}
	}
	if err := r.policy().Validate(); err != nil {
		return usageError{err}
	}
	if err := r.Repacking.validate(); err != nil {
		return err
	}
	return positive("--prune-delay/HOMESNAP_PRUNE_DELAY", r.PruneDelay)
}

type pruneConfig struct {
	Common
	Retention
	AgeIdentity               // an encrypted store's records are read through age
	Timeout     time.Duration `envconfig:"HOMESNAP_TIMEOUT" flag:"timeout" desc:"give up on the prune after this long (0: never)"`
	DryRun      bool          `envconfig:"HOMESNAP_DRY_RUN" flag:"dry-run" desc:"list what would be deleted and why; delete nothing"`
	LeaseTTL    time.Duration `envconfig:"HOMESNAP_LEASE_TTL" default:"60s" flag:"lease-ttl" desc:"prune holds the store's one-writer lease while it deletes (renewed every third of this); it refuses while another process, such as a running sidecar, holds it"`
	OutputFormat
}

func (c *pruneConfig) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := c.Retention.validate(); err != nil {
		return err
	}
	if err := nonNegative("--timeout/HOMESNAP_TIMEOUT", c.Timeout, "0 means no timeout"); err != nil {
		return err
	}
	if err := c.OutputFormat.validate(); err != nil {
		return err
	}
	// Prune needs no key, but one given broken (a Secret shared with the
	// restore) is a mistake to report, not to pass over.
	if _, err := c.AgeIdentity.identities(); err != nil {
		return err
	}
	return positive("--lease-ttl/HOMESNAP_LEASE_TTL", c.LeaseTTL)
}

const pruneAbout = `Applies a retention policy to a store: deletes the snapshots the policy
drops, the archives no kept snapshot points into, and the objects of
snapshots that were never committed once older than --prune-delay. The head
and everything a kept snapshot needs are never deleted. Without any --keep-*
flag every snapshot is kept and only uncommitted leftovers are collected.`

// Prune is the prune command.
func Prune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg pruneConfig
	log, st, err := setup(ctx, "prune", pruneAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := withTimeout(ctx, cfg.Timeout)
	defer cancel()
	if st, err = maintenanceStack(ctx, &cfg.AgeIdentity, st, cfg.DryRun, log); err != nil {
		return err
	}
	// Records are never encrypted and prune deletes the keys it lists, so
	// an encrypted store needs no identity to be read here; one is needed
	// to tag the records a prune rewrites (maintenanceStack).
	var p *prune.Plan
	var rp *maint.RepackResult
	do := func(ctx context.Context, st store.Store) (err error) {
		if p, err = maint.Prune(ctx, st, maintenance(&cfg.Retention, true, 0, snapshot.Options{}, log), cfg.DryRun); err != nil {
			return err
		}
		rp, err = pruneRepack(ctx, st, &cfg.Retention, p, cfg.DryRun, log)
		return err
	}
	if cfg.DryRun { // writes nothing, so it needs no lease
		err = do(ctx, st)
	} else {
		err = underLease(ctx, st, cfg.LeaseTTL, "prune", "the sidecar writing to this store prunes after every snapshot with its --keep-* policy; stop it first, or let it", log,
			func(ctx context.Context, fence func(store.Store) store.Store) error { return do(ctx, fence(st)) })
	}
	if err != nil {
		return err
	}
	if cfg.json() {
		return writeJSON(stdout, newPruneReport(p, cfg.DryRun))
	}
	if rp != nil {
		printRepack(stdout, rp, cfg.DryRun)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, d := range p.Decisions {
		verdict := "drop"
		if d.Keep {
			verdict = "keep"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", verdict, d.ID, d.Time.UTC().Format(time.RFC3339), d.Reasons)
	}
	tw.Flush()
	verb := "deleted"
	if cfg.DryRun {
		verb = "would delete"
	}
	for _, d := range p.Delete {
		fmt.Fprintf(stdout, "%s %s (%d bytes): %s\n", verb, d.Key, d.Size, d.Why)
	}
	fmt.Fprintf(stdout, "%s: kept %d of %d snapshots; %s %d objects, %d bytes\n", p.Policy, p.Kept(), len(p.Decisions), verb, len(p.Delete), p.Freed())
	return nil
}
