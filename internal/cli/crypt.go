package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// Keys come from files in age's own formats (a mounted Kubernetes Secret)
// or from variables holding a file's content, never from flags: a flag's
// value shows in `ps`.

// AgeIdentity is the restore's setting, shared by the snapshot, which reads
// its parent's manifest back.
type AgeIdentity struct {
	IdentityFile string `envconfig:"HOMESNAP_AGE_IDENTITY_FILE" flag:"age-identity-file" desc:"age identity file (age-keygen output) to decrypt an encrypted store"`
	Identity     string `envconfig:"HOMESNAP_AGE_IDENTITY" desc:"the identity file's content, for a Secret mapped to a variable"`
	StoreAuth
}

// StoreAuth is the key that authenticates a plain store's metadata (an
// encrypted store's comes from the age identities), and the override.
type StoreAuth struct {
	AuthKeyFile          string `envconfig:"HOMESNAP_AUTH_KEY_FILE" flag:"auth-key-file" desc:"file holding 32+ random bytes (raw or hex, e.g. openssl rand -hex 32): authenticate a plain store's snapshots with it (an encrypted store uses the age identity)"`
	AuthKey              string `envconfig:"HOMESNAP_AUTH_KEY" desc:"the auth key file's content, for a Secret mapped to a variable"`
	AllowUnauthenticated bool   `envconfig:"HOMESNAP_ALLOW_UNAUTHENTICATED" flag:"allow-unauthenticated" desc:"read snapshots that are not authenticated, fail authentication, are plain in an encrypted store or older than the store's newest (upgrades, pre-upgrade snapshots); each is logged as a warning"`
}

// allowHint is what every authentication refusal tells the admin.
const allowHint = "if you trust the store (the snapshots predate authentication, or you restored the bucket from a backup yourself), pass --allow-unauthenticated (HOMESNAP_ALLOW_UNAUTHENTICATED=true) once; otherwise someone with write access to the bucket changed it: keep the objects for inspection"

// authKeys returns the keys the command authenticates with: one per age
// identity, and the auth key file's.
func (a *AgeIdentity) authKeys(ids []age.Identity) ([]auth.Key, error) {
	keys := crypt.AuthKeys(ids)
	r, name, err := keySource(a.AuthKeyFile, a.AuthKey, "HOMESNAP_AUTH_KEY")
	if r == nil || err != nil {
		return keys, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, 1<<16))
	if err != nil {
		return nil, usageError{fmt.Errorf("auth key %s: %v", name, err)}
	}
	k, err := auth.ParseKeyFile(data, name)
	if err != nil {
		return nil, usageError{err}
	}
	return append(keys, k), nil
}

// AgeSnapshot is the snapshot's age settings: what to encrypt to, and the
// switches for migration and rotation.
type AgeSnapshot struct {
	AgeIdentity
	RecipientsFile string `envconfig:"HOMESNAP_AGE_RECIPIENTS_FILE" flag:"age-recipients-file" desc:"age recipients file (age1... public keys, one per line): encrypt snapshots to them (default: the identities' own recipients)"`
	Recipients     string `envconfig:"HOMESNAP_AGE_RECIPIENTS" desc:"the recipients file's content"`
	Migrate        bool   `envconfig:"HOMESNAP_AGE_MIGRATE" flag:"age-migrate" desc:"allow switching the store between plain and age-encrypted snapshots (the next snapshot is a full one)"`
	Reencrypt      bool   `envconfig:"HOMESNAP_AGE_REENCRYPT" flag:"age-reencrypt" desc:"rewrite every snapshot of the store for the recipients (key rotation; the identity file holds the old keys and one new one), then exit"`
}

func (a *AgeIdentity) identities() ([]age.Identity, error) {
	r, name, err := keySource(a.IdentityFile, a.Identity, "HOMESNAP_AGE_IDENTITY")
	if r == nil || err != nil {
		return nil, err
	}
	defer r.Close()
	ids, err := crypt.ParseIdentities(r, name)
	if err != nil {
		return nil, usageError{err}
	}
	return ids, nil
}

func (a *AgeSnapshot) keys() (crypt.Keys, error) {
	ids, err := a.identities()
	if err != nil {
		return crypt.Keys{}, err
	}
	k := crypt.Keys{Identities: ids, Recipients: crypt.IdentityRecipients(ids), Migrate: a.Migrate}
	r, name, err := keySource(a.RecipientsFile, a.Recipients, "HOMESNAP_AGE_RECIPIENTS")
	if err != nil || r == nil {
		return k, err
	}
	defer r.Close()
	if k.Recipients, err = crypt.ParseRecipients(r, name); err != nil {
		return k, usageError{err}
	}
	return k, nil
}

// keySource opens a key file, or the content of variable; nil when neither
// is set. The variable is removed from the environment once read.
func keySource(file, content, variable string) (io.ReadCloser, string, error) {
	if content != "" {
		os.Unsetenv(variable)
		if file != "" {
			return nil, "", usageError{fmt.Errorf("set either the %s_FILE file or %s, not both", variable, variable)}
		}
		return io.NopCloser(strings.NewReader(content)), "$" + variable, nil
	}
	if file == "" {
		return nil, "", nil
	}
	if strings.HasPrefix(strings.ToUpper(file), "AGE-SECRET-KEY-") {
		// Not echoed: a key pasted here is already in `ps` and must not reach the logs too.
		return nil, "", usageError{fmt.Errorf("%s_FILE is a path to a file in age's format, and this looks like a key: put the key in a file (or in %s) and generate a new one, since this one was on a command line", variable, variable)}
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, "", usageError{fmt.Errorf("key file: %v", err)}
	}
	return f, file, nil
}

// pickSnapshot resolves what a restore or a verify reads: snapshot, or
// with at set the newest snapshot of the head's history taken at or before
// it, or "" for the head (and for an empty store). It reads through st,
// which verifies what it reads when tagged: no record that fails steers
// --at, and a record rebuilt from a manifest's header (a snapshot from
// before records), whose bytes are not verified, is refused like an
// untagged one. The one place --at is resolved.
func pickSnapshot(ctx context.Context, a *AgeIdentity, st store.Store, tagged bool, snapshot string, at time.Time, log zerolog.Logger) (string, error) {
	if at.IsZero() {
		if snapshot != "" && repo.CheckID(snapshot) == nil {
			// The record is read only after the home changed (for its
			// mark): check it before, and tell a wrong ID from a damaged
			// store (a snapshot from before records has a manifest only).
			_, err := repo.LoadRecord(ctx, st, snapshot)
			if errors.Is(err, store.ErrNotExist) {
				return snapshot, repo.CheckSnapshotExists(ctx, st, snapshot)
			}
			if err != nil && tagged {
				return snapshot, err
			}
		}
		return snapshot, nil
	}
	head, _, err := repo.LoadHead(ctx, st)
	if err != nil || head == nil {
		return "", err
	}
	var trust func(*repo.Record) error
	if tagged {
		trust = func(r *repo.Record) error {
			if !r.Partial {
				return nil
			}
			err := &auth.Error{Object: repo.Name(st, repo.RecordKey(r.ID)), Err: auth.ErrUnauthenticated, Untagged: true,
				Detail: "it is missing, and the manifest header it is rebuilt from is not verified (a snapshot from before records, or a record deleted)"}
			if !a.AllowUnauthenticated {
				return err
			}
			log.Warn().Err(err).Msg("READING AN UNAUTHENTICATED OBJECT: it may have been written by anyone with write access to the bucket")
			return nil
		}
	}
	return repo.SnapshotAt(ctx, st, head.Snapshot, at, trust)
}

// checkRollback verifies the head and its record, and refuses a head that
// the store's authenticated records prove old (auth.CheckRollback), or
// warns when overridden. The record and the listing CheckRollback makes
// are read at once.
func checkRollback(ctx context.Context, a *AgeIdentity, st store.Store, log zerolog.Logger) error {
	head, _, err := repo.LoadHead(ctx, st)
	if err == nil && head != nil {
		var rollback error
		listed := make(chan struct{})
		go func() {
			defer close(listed)
			rollback = auth.CheckRollback(ctx, st, head)
		}()
		_, err = repo.LoadRecord(ctx, st, head.Snapshot)
		<-listed
		if err == nil {
			err = rollback
		}
	}
	if err != nil && a.AllowUnauthenticated && errors.Is(err, auth.ErrRollback) {
		log.Warn().Err(err).Msg("READING A HEAD OLDER THAN THE STORE'S NEWEST SNAPSHOT, as --allow-unauthenticated says")
		return nil
	}
	return err
}

// reencrypt rewrites every snapshot for the recipients (key rotation).
func reencrypt(ctx context.Context, a *AgeSnapshot, st store.Store, log zerolog.Logger, stdout io.Writer) error {
	k, err := a.keys()
	if err != nil {
		return err
	}
	if a.RecipientsFile == "" && a.Recipients == "" {
		return usageError{fmt.Errorf("--age-reencrypt needs the new recipients: --age-recipients-file or HOMESNAP_AGE_RECIPIENTS_FILE")}
	}
	ast, _, err := authenticated(ctx, &a.AgeIdentity, k.Identities, st, false, log)
	if err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg("re-encryption refused")
		return reported{err}
	}
	res, err := crypt.Reencrypt(ctx, ast, k, func(key string) { log.Debug().Str("object", key).Msg("re-encrypted") })
	if err != nil {
		done := 0
		if res != nil {
			done = res.Objects
		}
		log.Error().Err(err).Str("store", st.String()).Int("objects_done", done).Msg("re-encryption stopped")
		return err
	}
	log.Info().Str("store", st.String()).Int("objects", res.Objects).Int64("bytes", res.Bytes).Int("plain_left", res.Plain).
		Strs("age_recipients", crypt.RecipientFingerprints(k.Recipients)).Msg("re-encryption complete")
	fmt.Fprintf(stdout, "re-encrypted %d objects\n", res.Objects)
	return nil
}

// needKey refuses a command that writes to an authenticated store
// without a key (why says what would go wrong), unless overridden. A
// command that reads content (decrypting) is refused by an encrypted
// store for lack of an identity, naming the recipients, so only a plain
// store is checked for it; one that does not (prune) is checked whatever
// the encryption, since the records it rewrites are plain either way.
func needKey(ctx context.Context, a *AgeIdentity, st store.Store, why string, decrypts bool) error {
	m, _, err := repo.LoadMarker(ctx, st)
	if err != nil || m == nil || !m.Authenticated || decrypts && m.Encryption != "" || a.AllowUnauthenticated {
		return err
	}
	return noKeyError{st.String(), why}
}

// noKeyError: the store's marker says it is authenticated and the command
// holds no key; it counts as unauthenticated (exit status).
type noKeyError struct{ store, why string }

func (e noKeyError) Error() string {
	return fmt.Sprintf("%s is authenticated and this command holds no key (%s): give it the age identity (--age-identity-file) or the auth key (--auth-key-file / HOMESNAP_AUTH_KEY_FILE)", e.store, e.why)
}

func (e noKeyError) Unwrap() error { return auth.ErrUnauthenticated }
