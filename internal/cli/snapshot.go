package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/homesnap/homesnap/internal/agents"
	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
)

type snapshotConfig struct {
	Common
	Once     bool          `envconfig:"HOMESNAP_ONCE" flag:"once" desc:"take one snapshot and exit (cron, disaster recovery)"`
	Timeout  time.Duration `envconfig:"HOMESNAP_TIMEOUT" flag:"timeout" desc:"give up on a --once snapshot or an --import after this long (0: never; the sidecar's final snapshot has --final-timeout)"`
	Interval time.Duration `envconfig:"HOMESNAP_INTERVAL" default:"5m" flag:"interval" desc:"time between snapshots when running as a sidecar"`
	Grace    time.Duration `envconfig:"HOMESNAP_FINAL_TIMEOUT" default:"25s" flag:"final-timeout" desc:"deadline of the final snapshot taken on SIGTERM (keep below the pod's grace period)"`
	Preset   string        `envconfig:"HOMESNAP_PRESET" default:"jenkins" flag:"preset" desc:"selection preset: jenkins (agents and jobs), controller (the whole state of a controller configured by hand), all or none"`
	Include  []string      `envconfig:"HOMESNAP_INCLUDE" flag:"include" desc:"glob of extra paths to select, relative to the home (** allowed)"`
	Exclude  []string      `envconfig:"HOMESNAP_EXCLUDE" flag:"exclude" desc:"glob of paths to leave out"`
	Level    string        `envconfig:"HOMESNAP_LEVEL" default:"fastest" flag:"level" desc:"zstd level: fastest, default, better or best"`
	Force    bool          `envconfig:"HOMESNAP_FORCE" flag:"force" desc:"commit a snapshot even when nothing changed"`
	Shrink   bool          `envconfig:"HOMESNAP_ALLOW_SHRINK" flag:"allow-shrink" desc:"commit even when over half the files or bytes, or secrets/ or nodes/, vanished since the last snapshot"`
	Behind   bool          `envconfig:"HOMESNAP_ALLOW_BEHIND" flag:"allow-behind" desc:"commit even when the store's head is newer than anything the home has seen (another controller wrote since it was restored)"`
	// ExcludeMasterKey keeps secrets/master.key out of the store (restore
	// takes it from --master-key-file).
	ExcludeMasterKey bool `envconfig:"HOMESNAP_EXCLUDE_MASTER_KEY" flag:"exclude-master-key" desc:"leave secrets/master.key out of the store; keep it in a Secret and give it to restore with --master-key-file"`
	AcceptKeyChange  bool `envconfig:"HOMESNAP_ACCEPT_KEY_CHANGE" flag:"accept-key-change" desc:"commit even when the home's agent secrets or identity differ from the head snapshot (keys rotated on purpose)"`
	AgeSnapshot
	Sidecar
	Retention
	Importing
	ConsolidateMax int  `envconfig:"HOMESNAP_CONSOLIDATE_MAX_ARCHIVES" default:"8" flag:"consolidate-max-archives" desc:"after a snapshot, when the head points into more archives than this (or into one mostly dead), copy the small ones' live files into one (0: never)"`
	Prune          bool `envconfig:"HOMESNAP_PRUNE" default:"true" flag:"prune" desc:"with a --keep-* policy, prune after every committed snapshot (false: leave deleting to the prune command or a bucket lifecycle rule, so this needs no delete permission)"`
	OutputFormat        // --once only: the sidecar prints each snapshot's ID
}

const snapshotAbout = `Takes incremental, zstd-compressed snapshots of a Jenkins home into a store.
With --once it takes one snapshot and exits; otherwise it runs as a sidecar,
taking one every --interval and a final one on SIGTERM. The snapshot's ID
is printed on standard output.`

// Snapshot is the snapshot command.
func Snapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg snapshotConfig
	log, st, err := setup(ctx, "snapshot", snapshotAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.ExcludeMasterKey {
		cfg.Exclude = append(cfg.Exclude, jenkins.MasterKeyPath)
	}
	sel, err := selector.New(selector.Spec{Preset: cfg.Preset, Include: cfg.Include, Exclude: cfg.Exclude})
	if err != nil {
		return usageError{err}
	}
	if cfg.Journal != "auto" && cfg.Journal != "off" {
		return usageError{fmt.Errorf("journal %q (--journal, HOMESNAP_JOURNAL): want auto or off", cfg.Journal)}
	}
	if cfg.Reencrypt {
		return underLease(ctx, st, cfg.LeaseTTL, "re-encryption", "stop the sidecar writing to this store first (or wait for its lease to expire)", log,
			func(ctx context.Context, fence func(store.Store) store.Store) error {
				return reencrypt(ctx, &cfg.AgeSnapshot, fence(st), log, stdout)
			})
	}
	ok, level := zstd.EncoderLevelFromString(cfg.Level)
	if !ok {
		return usageError{fmt.Errorf("level %q: want fastest, default, better or best", cfg.Level)}
	}
	// The sidecar counts store traffic beneath the encryption: the bytes
	// actually stored and transferred.
	var m *metrics.Metrics
	if !cfg.Once {
		m = metrics.New()
	}
	enc, err := snapshotStack(ctx, &cfg.AgeSnapshot, st, m, log)
	if err != nil {
		return err
	}
	if cfg.Import != "" {
		return runImport(ctx, &cfg, st, enc, archive.Level(level), log, stdout)
	}
	// Opened once: every snapshot, the sidecar's for as long as it runs,
	// and the agent-key guard work beneath this descriptor.
	home, err := openHome(cfg.Home, false, false)
	if err != nil {
		log.Error().Err(err).Str("home", cfg.Home).Str("store", st.String()).Msg("cannot open the home")
		return reported{err}
	}
	defer home.Close()
	opts := snapshot.Options{Home: home, Store: enc.Store, Selector: sel, Jobs: cfg.Jobs, Level: archive.Level(level), Log: log,
		Force: cfg.Force, Vital: vital, AllowShrink: cfg.Shrink, AllowBehind: cfg.Behind, Recipients: enc.Recipients, Authenticated: enc.Authenticated}
	// The agent-key guard reads the head's manifest: only a snapshot that
	// is about to replace the head needs it. The sidecar keeps what it
	// reads of its own last snapshot, so that while that is the head the
	// guard does not read its manifest back.
	var known atomic.Pointer[agents.Known]
	if !cfg.Once {
		opts.Keep = jenkins.Needed
	}
	opts.BeforeCommit = func(ctx context.Context) error {
		head, err := headStore(ctx, &cfg.AgeSnapshot, st)
		if err != nil {
			log.Error().Err(err).Str("store", st.String()).Msg("cannot read the head snapshot")
			return reported{err}
		}
		if err := agents.GuardKeys(ctx, home, head, known.Load(), cfg.AcceptKeyChange, log); err != nil {
			return reported{err} // GuardKeys logged why
		}
		return nil
	}
	once := func(ctx context.Context, opts snapshot.Options) (*snapshot.Result, error) {
		res, err := snapshot.Snapshot(ctx, opts)
		var r reported
		if errors.As(err, &r) {
			return nil, err
		}
		if err != nil {
			log.Error().Err(err).Str("home", cfg.Home).Str("store", st.String()).Msg("snapshot failed")
			return nil, reported{err}
		}
		ev := log.Info()
		if res.ChangeJournal != nil { // how the home was read: journal, walk or verify
			ev = ev.Str("journal", res.ChangeJournal.Mode)
			if res.ChangeJournal.Unread > 0 { // the parent's entries in spans nothing changed
				ev = ev.Int64("unread_entries", res.ChangeJournal.Unread)
			}
		}
		asJSON := cfg.Once && cfg.json()
		if res.Unchanged {
			ev.Str("parent", res.Parent).Dur("elapsed", res.Elapsed).Msg("nothing changed since the last snapshot; none taken")
			if asJSON {
				return res, writeJSON(stdout, newSnapshotReport(res, ""))
			}
			return res, nil
		}
		if opts.Keep != nil {
			known.Store(&agents.Known{Header: archive.Header{ID: res.ID, Selection: archive.Selection(sel.Spec())}, Entries: res.Kept})
		}
		ev.Str("snapshot", res.ID).Str("parent", res.Parent).
			Int64("entries", res.Totals.Entries).Int64("files", res.Totals.Files).Int64("bytes", res.Totals.Bytes).
			Int64("new_entries", res.Totals.New).Int64("new_bytes", res.Totals.NewBytes).Int64("deleted", res.Deleted).
			Int("archives", len(res.Totals.Archives)).Int("manifests", len(res.Manifests)).Int64("manifest_lines", res.Totals.Lines).
			Int64("stored_bytes", res.Stored).Dur("elapsed", res.Elapsed).Msg("snapshot committed")
		if !asJSON {
			fmt.Fprintln(stdout, res.ID) // now: maintenance may take a while
		}
		consolidated := afterSnapshot(ctx, &cfg, opts, m, log)
		if asJSON {
			return res, writeJSON(stdout, newSnapshotReport(res, consolidated))
		}
		if consolidated != "" {
			fmt.Fprintln(stdout, consolidated)
		}
		return res, nil
	}
	if cfg.Once {
		ctx, cancel := withTimeout(ctx, cfg.Timeout)
		defer cancel()
		return underLease(ctx, st, cfg.LeaseTTL, "snapshot", "ask the running sidecar for one with POST /snapshot or SIGUSR1", log,
			func(ctx context.Context, fence func(store.Store) store.Store) error {
				opts.Store = fence(opts.Store)
				_, err := once(ctx, opts)
				return err
			})
	}
	l := lease.New(st, lease.Me(), cfg.LeaseTTL, nil)
	return sidecar(ctx, &cfg, opts, once, l, m, log)
}
