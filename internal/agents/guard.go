package agents

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/check"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// GuardKeys runs before every snapshot replaces the head: it compares the
// home with the head snapshot, and refuses (ErrContinuity) when the
// home's keys were regenerated (a controller that started without its
// restore), so a good head is never replaced silently. Nodes added or
// removed are normal administration and pass. accept commits anyway,
// still loudly. Every refusal and failure is logged.
//
// known, when set, are the entries jenkins.Needed chooses of the snapshot
// this process committed last: when that is still the head, the guard
// reads them instead of the head's manifest (at a million files, a second
// pass over 1.3 million lines before every commit).
func GuardKeys(ctx context.Context, home *homefs.Home, st store.Store, known *Known, accept bool, log zerolog.Logger) error {
	if !home.Exists() {
		return nil // the snapshot says what is missing
	}
	err := compareWithHead(ctx, home, st, known, accept, log)
	if err != nil && !errors.Is(err, ErrContinuity) {
		log.Error().Err(err).Str("home", home.Path).Str("store", st.String()).Msg("agent check before the snapshot failed")
	}
	return err
}

// Known are a committed snapshot's entries that jenkins.Needed chooses, in
// manifest order (snapshot.Result.Kept).
type Known struct {
	Header  archive.Header // ID and selection
	Entries []*archive.Entry
}

// openHead indexes what the guard reads of the head snapshot.
func openHead(ctx context.Context, st store.Store, known *Known) (*check.SnapshotFS, error) {
	head, _, err := repo.LoadHead(ctx, st)
	switch {
	case err != nil:
		return nil, err
	case head == nil:
		return nil, fmt.Errorf("%w in %s yet", repo.ErrNoSnapshot, st)
	case known != nil && known.Header.ID == head.Snapshot:
		return check.SnapshotFSOf(ctx, st, known.Header, known.Entries), nil
	}
	return check.OpenSnapshotFS(ctx, st, head.Snapshot, jenkins.Needed)
}

func compareWithHead(ctx context.Context, home *homefs.Home, st store.Store, known *Known, accept bool, log zerolog.Logger) error {
	d := home.Dir
	var secrets unix.Stat_t
	if err := d.Lstat(jenkins.SecretsDir, &secrets); errors.Is(err, unix.ENOENT) {
		return nil // secrets/ vanished: the snapshot's shrink guard refuses it, naming it
	}
	now, err := jenkins.Inspect(homefs.FS(d), jenkins.Options{})
	if err != nil {
		return fmt.Errorf("agent check of %s: %w", home.Path, err)
	}
	sfs, err := openHead(ctx, st, known)
	if errors.Is(err, repo.ErrNoSnapshot) {
		for _, p := range now.Problems {
			if p.Breaks {
				log.Warn().Str("path", p.Path).Msg(p.Message)
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	var opts jenkins.Options
	if !ownsMasterKey(sfs) {
		opts.MasterKey, _ = d.ReadFile(jenkins.MasterKeyPath, jenkins.MaxKeyFile)
	}
	head, err := jenkins.Inspect(sfs, opts)
	if err != nil {
		return fmt.Errorf("agent check of snapshot %s: %w", sfs.ID(), err)
	}
	c := jenkins.Compare(head, now)
	// A secret or the identity changed, or keys the head could read no
	// longer unwrap. (A missing agent key alone is not refused: Jenkins
	// creates it lazily for the first inbound node.)
	if !c.KeysChanged && !(now.KeysUnreadable() && !head.KeysUnreadable()) {
		return nil
	}
	what := "compared with head snapshot " + sfs.ID()
	for _, p := range now.Problems {
		if p.Breaks {
			log.Error().Str("path", p.Path).Msg(p.Message)
		}
	}
	logComparison(log, c, what)
	if accept {
		log.Error().Str("head", sfs.ID()).Msg("the home's keys changed since the head snapshot; committing anyway (--accept-key-change)")
		return nil
	}
	err = fmt.Errorf("%w: the home's keys changed since the head snapshot %s (%s); the head is kept: restore it before Jenkins starts, or pass --accept-key-change if the keys were rotated on purpose", ErrContinuity, sfs.ID(), c.Summary())
	log.Error().Err(err).Msg("snapshot refused")
	return err
}
