package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/check"
	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// VerifyConfig holds restore's settings for checking the store instead of
// restoring (docs/runbooks.md: "Verifying backups").
type VerifyConfig struct {
	Verify          bool `ignored:"true" flag:"verify" desc:"deprecated: run homesnap verify (this flag stops working in the next release; HOMESNAP_VERIFY is refused)"`
	VerifyStructure bool `ignored:"true" flag:"verify-structure" desc:"deprecated: run homesnap verify --structure (this flag stops working in the next release; HOMESNAP_VERIFY_STRUCTURE is refused)"`
}

func (v VerifyConfig) verifying() bool { return v.Verify || v.VerifyStructure }

// verify is the verify command (and restore's deprecated --verify and
// --verify-structure). A log line for every
// problem, a summary line, and one line per snapshot on standard output:
// "ok<TAB>ID" or "damaged<TAB>ID".
func verify(ctx context.Context, cfg *restoreConfig, st store.Store, stdout, stderr io.Writer, log zerolog.Logger) error {
	start := time.Now()
	ids, err := cfg.AgeIdentity.identities()
	if err != nil {
		return err
	}
	raw := st
	st, tagged, err := authenticated(ctx, &cfg.AgeIdentity, ids, raw, false, log)
	if err == nil && tagged {
		err = checkRollback(ctx, &cfg.AgeIdentity, st, log)
	}
	// The snapshot chosen, if any, as a restore chooses it.
	var snapshot string
	if err == nil && (cfg.Snapshot != "" || !cfg.at.IsZero()) {
		if cfg.Snapshot == "head" {
			var head *repo.Head
			if head, _, err = repo.LoadHead(ctx, st); head != nil {
				snapshot = head.Snapshot
			}
		} else {
			snapshot, err = pickSnapshot(ctx, &cfg.AgeIdentity, st, tagged, cfg.Snapshot, cfg.at, log)
		}
		if err == nil && snapshot == "" {
			err = fmt.Errorf("%w in %s yet", repo.ErrNoSnapshot, st)
		}
	}
	if err != nil {
		log.Error().Err(err).Str("store", raw.String()).Msg("verify refused")
		return reported{err}
	}
	found := &problems{}
	opts := check.Options{
		Store: st, Structure: cfg.VerifyStructure && !cfg.Verify, Jobs: cfg.Jobs,
		// Each snapshot is read as the restore would read it: through age
		// when it is encrypted (a migrated store holds both kinds).
		Open: func(ctx context.Context, id string) (store.Store, error) {
			setup, err := crypt.ForRestore(ctx, st, crypt.Keys{Identities: ids, AllowPlaintext: cfg.AllowUnauthenticated}, id)
			if err != nil {
				return nil, err
			}
			return setup.Store, nil
		},
		OnProblem: func(p check.Problem) {
			found.add(p)
			log.Error().Err(p.Err).Str("snapshot", p.Snapshot).Str("object", p.Object).Msg("damaged object")
		},
	}
	if snapshot != "" {
		opts.Snapshots = []string{snapshot}
	}
	mode := "full"
	if opts.Structure {
		mode = "structure"
	}
	var progress reporter
	if !opts.Structure {
		progress = newProgress(cfg.Progress, "verify", stderr, log)
		opts.Progress = progressOf(progress)
	}
	res, err := check.Verify(ctx, opts)
	if progress != nil {
		progress.stop()
	}
	if res == nil {
		log.Error().Err(err).Str("store", st.String()).Msg("verify failed")
		return reported{err}
	}
	report := newVerifyReport(mode, res, found)
	if cfg.json() {
		if err := writeJSON(stdout, report); err != nil {
			return err
		}
	} else {
		for _, v := range report.Snapshots {
			verdict := "ok"
			if !v.OK {
				verdict = "damaged"
			}
			fmt.Fprintf(stdout, "%s\t%s\n", verdict, v.ID)
		}
	}
	ev := log.Info()
	msg := "verify complete: every object the snapshots need is present and intact"
	if opts.Structure {
		msg = "structure check complete: every manifest is whole and every archive it needs is present (contents not read)"
	}
	if err != nil {
		ev, msg = log.Error().Err(err).Strs("damaged", res.Damaged), "verify found problems"
	}
	ev.Str("mode", mode).Str("store", st.String()).Int("snapshots", len(res.Snapshots)).Int("objects", res.Objects).
		Int64("files", res.Files).Int64("bytes_read", res.Bytes).Int("problems", res.Problems).
		Dur("elapsed", time.Since(start)).Msg(msg)
	if err != nil {
		return reported{err}
	}
	return nil
}

// errVerifyAndList refuses two commands at once.
var errVerifyAndList = usageError{errors.New("--verify, --verify-structure and --list are separate commands (homesnap verify, homesnap list): give one")}
