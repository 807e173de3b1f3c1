package cli

import (
	"context"
	"errors"
	"time"

	"filippo.io/age"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// A command's store is a stack of layers, each wrapping the one below
// (store.Layer); this file is the one place they are stacked, per kind
// of command, bottom up:
//
//	snapshot:  backend, Checked (openStore), metrics (the sidecar's
//	           count of what is stored), auth, crypt (snapshotStack),
//	           and the lease's fence on top once the lease is held
//	           (underLease, sidecar)
//	restore:   backend, Checked, ReadOnce (the small objects read once),
//	           auth, crypt (restoreStack)
//	prune:     backend, Checked, auth (maintenanceStack), the fence
//	re-encryption: backend, Checked, the fence, auth (reencrypt)
//	--list, --verify: backend, Checked, auth (listStore, verify), and
//	           for --verify crypt per snapshot as a restore reads it
//
// The order matters: the metrics count the bytes stored, beneath the
// encryption; auth tags and verifies the stored (encrypted) bytes; the
// fence guards every head move and delete whatever is above it. Look a
// layer up with store.As, never with a type assertion.

// openStore opens the configured store; a failure is logged once.
func openStore(ctx context.Context, c *Common, log zerolog.Logger) (store.Store, error) {
	st, err := store.Open(ctx, c.Store)
	if err != nil {
		log.Error().Err(err).Str("store", store.Redact(c.Store)).Msg("cannot open the store")
		return nil, reported{err}
	}
	return st, nil
}

// authenticated wraps st so that what is read is verified and what is
// written is tagged. legacy lets a snapshot read the untagged head of a
// store from before authentication (it then takes a full snapshot).
// Without a key, a store whose marker says it is authenticated is
// refused, unless overridden.
func authenticated(ctx context.Context, a *AgeIdentity, ids []age.Identity, st store.Store, legacy bool, log zerolog.Logger) (store.Store, bool, error) {
	keys, err := a.authKeys(ids)
	if err != nil {
		return nil, false, err
	}
	warn := func(err error) {
		log.Warn().Err(err).Bool("allow_unauthenticated", a.AllowUnauthenticated).Msg("READING AN UNAUTHENTICATED OBJECT: it may have been written by anyone with write access to the bucket")
	}
	if a.AllowUnauthenticated {
		log.Warn().Str("store", st.String()).Msg("--allow-unauthenticated: objects that fail authentication are read anyway, each with a warning")
	}
	if len(keys) == 0 {
		m, _, err := repo.LoadMarker(ctx, st)
		if err != nil {
			return st, false, err
		}
		// An encrypted store refuses a command without an identity anyway,
		// naming the recipients it needs.
		if m == nil || (!m.Authenticated && m.Encryption == "") {
			warnUnauthenticated(log, st)
		}
		if legacy || m == nil || !m.Authenticated || m.Encryption != "" {
			return st, false, nil // a writer's needKey refuses an authenticated store
		}
		err = noKeyError{st.String(), "nothing it reads could be checked"}
		if !a.AllowUnauthenticated {
			return nil, false, err
		}
		warn(err)
		return st, false, nil
	}
	return auth.Wrap(st, auth.Options{Keys: keys, Allow: a.AllowUnauthenticated, Legacy: legacy, Warn: warn}), true, nil
}

// snapshotStack checks the store's encryption against the snapshot's
// keys and returns what the snapshot writes through, counted by m when
// not nil.
func snapshotStack(ctx context.Context, a *AgeSnapshot, st store.Store, m *metrics.Metrics, log zerolog.Logger) (*crypt.Setup, error) {
	k, err := a.keys()
	if err != nil {
		return nil, err
	}
	if m != nil {
		st = m.Store(st)
	}
	st, tagged, err := authenticated(ctx, &a.AgeIdentity, k.Identities, st, true, log)
	if err == nil && !tagged {
		err = needKey(ctx, &a.AgeIdentity, st, "snapshots written without it would be refused by every restore", true)
	}
	if err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg("snapshot refused")
		return nil, reported{err}
	}
	setup, err := crypt.ForSnapshot(ctx, st, k)
	if err == nil && tagged {
		// Marked before the first tagged snapshot commits: a reader holding
		// a key refuses untagged snapshots anyway, and one holding none
		// must learn that it needs one. A store authenticated before
		// stores had identities gets its identity first.
		var bound bool
		if bound, err = authStore(st).Bind(ctx); bound {
			log.Info().Str("store", st.String()).Msg("the store has its identity now (format 4): objects copied from another store with the same key are refused; older releases refuse the store")
		}
		if err == nil {
			err = repo.MarkAuthenticated(ctx, st)
		}
		if err == nil {
			setup.Authenticated = true
			log.Info().Strs("auth_keys", authStore(st).KeyIDs()).Msg("snapshots are authenticated")
		}
	}
	if err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg("snapshot refused")
		return nil, reported{err}
	}
	if note := setup.Note; note != "" {
		if setup.Migrating {
			note += "; drop --age-migrate once it is committed"
		}
		log.Warn().Str("store", st.String()).Msg(note)
	}
	if len(setup.Recipients) > 0 {
		log.Info().Strs("age_recipients", setup.Recipients).Msg("snapshots are encrypted with age")
	}
	return setup, nil
}

// restoreStack returns what a restore reads through and the snapshot it
// restores: snapshot, the one --at chooses (when at is set), or "" for the
// head. A missing or wrong identity fails here, before the home is
// touched; the caller reports the error. The store is authenticated first (see authenticated), and in
// an authenticated store the head is checked for a rollback whatever the
// restore chooses: --at chooses from the history the head names, and an
// explicit snapshot is judged against it (the home's mark).
func restoreStack(ctx context.Context, a *AgeIdentity, raw store.Store, snapshot string, at time.Time, log zerolog.Logger) (*crypt.Setup, string, error) {
	r, err := openReader(ctx, a, raw, log)
	if err != nil {
		return nil, "", err
	}
	return r.choose(ctx, snapshot, at)
}

// storeReader is the restore's stack before a snapshot is chosen: diff
// chooses two through one, and warns about the store once.
type storeReader struct {
	a      *AgeIdentity
	ids    []age.Identity
	st     store.Store
	tagged bool
	log    zerolog.Logger
}

func openReader(ctx context.Context, a *AgeIdentity, raw store.Store, log zerolog.Logger) (*storeReader, error) {
	// The restore reads the store's small objects once each: the marker
	// and the head, which every step needs, travel together now.
	raw = repo.ReadOnce(ctx, raw, repo.MarkerKey, repo.HeadKey)
	ids, err := a.identities()
	if err != nil {
		return nil, err
	}
	st, tagged, err := authenticated(ctx, a, ids, raw, false, log)
	if err != nil {
		return nil, err
	}
	return &storeReader{a, ids, st, tagged, log}, nil
}

// choose is restoreStack's choice of the snapshot and its encryption.
func (r *storeReader) choose(ctx context.Context, snapshot string, at time.Time) (*crypt.Setup, string, error) {
	a, st, tagged, log := r.a, r.st, r.tagged, r.log
	fail := func(err error) (*crypt.Setup, string, error) { return nil, "", err }
	// The rollback check and the choice with the encryption's reads are
	// independent, so their round trips overlap.
	var checkErr error
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		if tagged {
			checkErr = checkRollback(ctx, a, st, log)
		}
	}()
	chosen, chooseErr := pickSnapshot(ctx, a, st, tagged, snapshot, at, log)
	var setup *crypt.Setup
	var err error
	if chooseErr == nil || at.IsZero() { // an explicit snapshot's encryption is judged first
		setup, err = crypt.ForRestore(ctx, st, crypt.Keys{Identities: r.ids, AllowPlaintext: a.AllowUnauthenticated}, chosen)
	}
	<-checked
	if errors.Is(checkErr, store.ErrNotExist) {
		checkErr = nil // the head's snapshot is missing: its restore says so
	}
	for _, err := range []error{err, checkErr, chooseErr} {
		if err != nil {
			return fail(err)
		}
	}
	if setup.Note != "" {
		log.Warn().Str("store", st.String()).Msg(setup.Note)
	}
	setup.Authenticated = tagged
	return setup, chosen, nil
}

// headStore returns the store the head snapshot is read through, which is
// plain while a migration's first encrypted snapshot is being taken.
func headStore(ctx context.Context, a *AgeSnapshot, st store.Store) (store.Store, error) {
	ids, err := a.identities()
	if err != nil {
		return nil, err
	}
	// The agent-key guard compares keys only: a migration's first
	// encrypted snapshot reads the plain head it replaces.
	setup, err := crypt.ForRestore(ctx, st, crypt.Keys{Identities: ids, AllowPlaintext: true}, "")
	if err != nil {
		return nil, err
	}
	return setup.Store, nil
}

// maintenanceStack is what prune reads and rewrites records through: a
// reparented record is tagged again, so an authenticated store needs a key
// unless nothing is written (dryRun).
func maintenanceStack(ctx context.Context, a *AgeIdentity, st store.Store, dryRun bool, log zerolog.Logger) (store.Store, error) {
	ids, err := a.identities()
	if err != nil {
		return nil, err
	}
	// Without a key, an authenticated store is refused: its records
	// would be rewritten untagged.
	keyed := len(ids) > 0 || a.AuthKeyFile != "" || a.AuthKey != ""
	ast, tagged, err := authenticated(ctx, a, ids, st, keyed, log)
	if err == nil && !tagged && !dryRun {
		err = needKey(ctx, a, st, "prune rewrites records", false)
	}
	if err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg("refused")
		return nil, reported{err}
	}
	return ast, nil
}

// authStore is the authentication layer of a stack that authenticated
// built with a key.
func authStore(st store.Store) *auth.Store {
	a, _ := store.As[*auth.Store](st)
	return a
}
