package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/engine"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
	_ "github.com/homesnap/homesnap/internal/store/all" // every backend
)

// Main runs a command and returns the process exit status: 0 success,
// 1 failure, 2 a usage mistake.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft ceiling that keeps the sidecar small; GOMEMLIMIT overrides.
		debug.SetMemoryLimit(80 << 20)
	}
	if p := os.Getenv("HOMESNAP_CPUPROFILE"); p != "" { // for profiling runs
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "error:", err)
		return 2
	default:
		return 1
	}
}

// setup loads the configuration, the logger and the store.
func setup(ctx context.Context, name, about string, cfg any, c *Common, args []string, stderr io.Writer) (zerolog.Logger, store.Store, error) {
	rest, err := load(name, about, cfg, args, stderr)
	if err != nil {
		return zerolog.Logger{}, nil, err
	}
	if len(rest) > 0 {
		return zerolog.Logger{}, nil, usageError{fmt.Errorf("unexpected argument %q (see %s --help)", rest[0], name)}
	}
	log, err := newLogger(c, stderr)
	if err != nil {
		return log, nil, err
	}
	st, err := store.Open(ctx, c.Store)
	if err != nil {
		log.Error().Err(err).Str("store", store.Redact(c.Store)).Msg("cannot open the store")
		return log, nil, err
	}
	return log, st, nil
}

type snapshotConfig struct {
	Common
	Once     bool          `envconfig:"HOMESNAP_ONCE" flag:"once" desc:"take one snapshot and exit (cron, disaster recovery)"`
	Interval time.Duration `envconfig:"HOMESNAP_INTERVAL" default:"5m" flag:"interval" desc:"time between snapshots when running as a sidecar"`
	Grace    time.Duration `envconfig:"HOMESNAP_FINAL_TIMEOUT" default:"25s" flag:"final-timeout" desc:"deadline of the final snapshot taken on SIGTERM (keep below the pod's grace period)"`
	Preset   string        `envconfig:"HOMESNAP_PRESET" default:"jenkins" flag:"preset" desc:"selection preset: jenkins, all or none"`
	Include  []string      `envconfig:"HOMESNAP_INCLUDE" flag:"include" desc:"glob of extra paths to select, relative to the home (** allowed)"`
	Exclude  []string      `envconfig:"HOMESNAP_EXCLUDE" flag:"exclude" desc:"glob of paths to leave out"`
	Level    string        `envconfig:"HOMESNAP_LEVEL" default:"fastest" flag:"level" desc:"zstd level: fastest, default, better or best"`
	Force    bool          `envconfig:"HOMESNAP_FORCE" flag:"force" desc:"commit a snapshot even when nothing changed"`
	AgeSnapshot
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
	sel, err := selector.New(selector.Spec{Preset: cfg.Preset, Include: cfg.Include, Exclude: cfg.Exclude})
	if err != nil {
		return usageError{err}
	}
	if cfg.Reencrypt {
		return reencrypt(ctx, &cfg.AgeSnapshot, st, log, stdout)
	}
	ok, level := zstd.EncoderLevelFromString(cfg.Level)
	if !ok {
		return usageError{fmt.Errorf("level %q: want fastest, default, better or best", cfg.Level)}
	}
	enc, err := snapshotStore(ctx, &cfg.AgeSnapshot, st, log)
	if err != nil {
		return err
	}
	opts := engine.SnapshotOptions{Home: cfg.Home, Store: enc.Store, Selector: sel, Jobs: cfg.Jobs, Level: archive.Level(level), Log: log, Force: cfg.Force, Recipients: enc.Recipients}
	once := func(ctx context.Context) error {
		res, err := engine.Snapshot(ctx, opts)
		if err != nil {
			log.Error().Err(err).Str("home", cfg.Home).Str("store", st.String()).Msg("snapshot failed")
			return err
		}
		if res.Unchanged {
			log.Info().Str("parent", res.Parent).Msg("nothing changed since the last snapshot; none taken")
			return nil
		}
		log.Info().Str("snapshot", res.ID).Str("parent", res.Parent).
			Int64("entries", res.Totals.Entries).Int64("files", res.Totals.Files).Int64("bytes", res.Totals.Bytes).
			Int64("new_entries", res.Totals.New).Int64("new_bytes", res.Totals.NewBytes).Int64("deleted", res.Deleted).
			Int64("stored_bytes", res.Stored).Dur("elapsed", res.Elapsed).Msg("snapshot committed")
		fmt.Fprintln(stdout, res.ID)
		return nil
	}
	if cfg.Once {
		ctx, cancel := withTimeout(ctx, cfg.Timeout)
		defer cancel()
		return once(ctx)
	}
	log.Info().Dur("interval", cfg.Interval).Str("store", st.String()).Msg("snapshot sidecar started")
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		if err := once(ctx); err != nil && ctx.Err() != nil {
			break
		}
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
		}
		break
	}
	// The pod is stopping: one last snapshot within the grace period.
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Grace)
	defer cancel()
	log.Info().Dur("deadline", cfg.Grace).Msg("stopping: taking the final snapshot")
	return once(final)
}

type restoreConfig struct {
	Common
	Snapshot   string `envconfig:"HOMESNAP_SNAPSHOT" flag:"snapshot" desc:"snapshot ID to restore (default: the newest)"`
	AllowEmpty bool   `envconfig:"HOMESNAP_ALLOW_EMPTY" flag:"allow-empty" desc:"succeed without changes when the store has no snapshot yet (first boot)"`
	List       bool   `envconfig:"HOMESNAP_LIST" flag:"list" desc:"list the snapshots in the store and exit"`
	AgeIdentity
}

const restoreAbout = `Restores a snapshot of a Jenkins home from a store, before the controller
starts (init container) or by hand (disaster recovery). Only the selected
paths (nodes/, secrets/, jobs/, identity files by default) are changed; the
home is left as it was if anything fails.`

// Restore is the restore command.
func Restore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg restoreConfig
	log, st, err := setup(ctx, "restore", restoreAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.List {
		return list(ctx, st, stdout, log)
	}
	ctx, cancel := withTimeout(ctx, cfg.Timeout)
	defer cancel()
	dec, err := restoreStore(ctx, &cfg.AgeIdentity, st, cfg.Snapshot, log)
	if err != nil {
		return err
	}
	res, err := engine.Restore(ctx, engine.RestoreOptions{
		Home: cfg.Home, Store: dec.Store, Snapshot: cfg.Snapshot, Jobs: cfg.Jobs, AllowEmpty: cfg.AllowEmpty, Log: log,
	})
	if err != nil {
		log.Error().Err(err).Str("home", cfg.Home).Str("store", st.String()).Msg("restore failed")
		return err
	}
	if res.Empty {
		log.Info().Str("store", st.String()).Msg("the store has no snapshot yet; nothing restored (first boot)")
		return nil
	}
	log.Info().Str("snapshot", res.ID).Str("home", cfg.Home).Int64("entries", res.Entries).Int64("files", res.Files).
		Int64("bytes", res.Bytes).Int64("fetched_bytes", res.Fetched).Dur("elapsed", res.Elapsed).Msg("restore complete")
	return nil
}

// withTimeout bounds an operation when a timeout is set.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

func list(ctx context.Context, st store.Store, stdout io.Writer, log zerolog.Logger) error {
	snaps, head, err := repo.List(ctx, st)
	if err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg("cannot list snapshots")
		return err
	}
	for _, s := range snaps {
		mark := ""
		if s == head {
			mark = "\thead"
		}
		fmt.Fprintf(stdout, "%s%s\n", s, mark)
	}
	return nil
}
