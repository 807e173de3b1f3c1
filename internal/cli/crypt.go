package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/crypt"
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
		return nil, "", usageError{fmt.Errorf("age key file: %v", err)}
	}
	return f, file, nil
}

// snapshotStore checks the store's encryption against the snapshot's keys
// and returns what the snapshot writes through.
func snapshotStore(ctx context.Context, a *AgeSnapshot, st store.Store, log zerolog.Logger) (*crypt.Setup, error) {
	k, err := a.keys()
	if err != nil {
		return nil, err
	}
	setup, err := crypt.ForSnapshot(ctx, st, k)
	if err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg("snapshot refused")
		return nil, reported{err}
	}
	if setup.Note != "" {
		log.Warn().Str("store", st.String()).Msg(setup.Note)
	}
	if len(setup.Recipients) > 0 {
		log.Info().Strs("age_recipients", setup.Recipients).Msg("snapshots are encrypted with age")
	}
	return setup, nil
}

// restoreStore returns what a restore of snapshot reads through; a missing
// or wrong identity fails here, before the home is touched.
func restoreStore(ctx context.Context, a *AgeIdentity, st store.Store, snapshot string, log zerolog.Logger) (*crypt.Setup, error) {
	ids, err := a.identities()
	if err != nil {
		log.Error().Err(err).Msg("cannot read the age identity; nothing was changed in the home")
		return nil, reported{err}
	}
	setup, err := crypt.ForRestore(ctx, st, crypt.Keys{Identities: ids}, snapshot)
	if err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg("restore failed; nothing was changed in the home")
		return nil, err
	}
	if setup.Note != "" {
		log.Warn().Str("store", st.String()).Msg(setup.Note)
	}
	return setup, nil
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
	res, err := crypt.Reencrypt(ctx, st, k, func(key string) { log.Debug().Str("object", key).Msg("re-encrypted") })
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

// headStore returns the store the head snapshot is read through, which is
// plain while a migration's first encrypted snapshot is being taken.
func headStore(ctx context.Context, a *AgeSnapshot, st store.Store) (store.Store, error) {
	ids, err := a.identities()
	if err != nil {
		return nil, err
	}
	setup, err := crypt.ForRestore(ctx, st, crypt.Keys{Identities: ids}, "")
	if err != nil {
		return nil, err
	}
	return setup.Store, nil
}
