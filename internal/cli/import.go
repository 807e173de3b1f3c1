package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
)

// Importing is what `snapshot --import` adds: the migration off the Jenkins
// operator's backups.
type Importing struct {
	Import     string `envconfig:"HOMESNAP_IMPORT" flag:"import" desc:"import FILE, a backup the Jenkins operator wrote (N.tar.zstd, or an older N.tar.gz; - reads standard input), as a snapshot of jobs/, then exit"`
	ImportOnto bool   `envconfig:"HOMESNAP_IMPORT_ONTO_HEAD" flag:"import-onto-head" desc:"with --import: add the snapshot on top of the store's head (kept as its parent) instead of refusing a store that has snapshots"`
}

// runImport imports the operator's backup as one snapshot, holding the
// store's lease like --once.
func runImport(ctx context.Context, cfg *snapshotConfig, st store.Store, enc *crypt.Setup, level archive.Level, log zerolog.Logger, stdout io.Writer) error {
	name := cfg.Import
	var src io.Reader = os.Stdin
	if name == "-" {
		name = "standard input"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return usageError{fmt.Errorf("--import: %w", err)}
		}
		defer f.Close()
		src = f
	}
	sel, err := selector.New(selector.Spec{Preset: "none", Include: jenkins.OperatorBackup.Include, Exclude: jenkins.OperatorBackup.Exclude})
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, cfg.Timeout)
	defer cancel()
	log.Info().Str("archive", name).Str("store", enc.Store.String()).Msg("importing the Jenkins operator's backup")
	var res *snapshot.ImportResult
	err = underLease(ctx, st, cfg.LeaseTTL, "import", "stop the sidecar writing to this store first", log,
		func(ctx context.Context, fence func(store.Store) store.Store) (err error) {
			res, err = snapshot.Import(ctx, snapshot.ImportOptions{
				Source: src, Name: name, Store: fence(enc.Store), Root: jenkins.OperatorBackupRoot, Selection: sel,
				Level: level, Log: log, Recipients: enc.Recipients, OntoHead: cfg.ImportOnto,
			})
			return err
		})
	var r reported
	if errors.As(err, &r) {
		return err
	}
	if err != nil {
		msg := "import failed; the store is as it was"
		if errors.Is(err, snapshot.ErrHeadExists) {
			msg = "import refused"
		}
		log.Error().Err(err).Str("archive", name).Str("store", enc.Store.String()).Msg(msg)
		return reported{err}
	}
	ev := log.Info().Str("snapshot", res.ID).Str("parent", res.Parent).Int64("entries", res.Totals.Entries).
		Int64("files", res.Totals.Files).Int64("bytes", res.Totals.Bytes).Int64("stored_bytes", res.Stored).
		Int64("directories_added", res.Synthesized).Dur("elapsed", res.Elapsed)
	if res.Skipped > 0 {
		ev = ev.Int64("skipped", res.Skipped).Str("first_skipped", res.FirstSkip)
	}
	ev.Msg("imported the operator's backup as a snapshot of jobs/")
	log.Warn().Str("snapshot", res.ID).Msg("the operator's backup holds jobs/ only (builds, job state, folders' children): " +
		"no nodes/, no secrets/, no instance identity, no top-level job config.xml and no workspaces, so agents and credentials are not migrated by it. " +
		"Start Jenkins with homesnap's restore (it restores these builds), let it recreate its jobs, then keep the sidecar running: " +
		"its first snapshot takes the whole live home on top of this one")
	fmt.Fprintln(stdout, res.ID)
	return nil
}
