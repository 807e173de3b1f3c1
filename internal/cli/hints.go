package cli

import (
	"errors"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
)

// flagHints are what the user can do, in flags, about the conditions the
// packages below report without naming flags: the one place that does,
// as exitCode is for exit statuses. The first match is added.
var flagHints = []struct {
	is   func(error) bool
	hint string
}{
	{authRefusal, allowHint},
	{is(homemark.ErrNoHome), "set --home, HOMESNAP_HOME or JENKINS_HOME"},
	{is(store.ErrNoStore), "set --store or HOMESNAP_STORE (a directory, file:///path, s3://bucket/prefix, ...)"},
	{is(snapshot.ErrEmpty), "pass --force if this is intended"},
	{is(snapshot.ErrShrunk), "if the shrink is intended, pass --allow-shrink"},
	{is(snapshot.ErrBehind), "if this home is to replace the head all the same, pass --allow-behind"},
	{is(snapshot.ErrHeadExists), "or pass --import-onto-head to add it on top (the current head stays in the history as its parent)"},
	{as[*restore.EmptyStoreError], "take one with `snapshot --once`, or pass --allow-empty for a first boot"},
	{is(snapshot.ErrNotOperatorBackup), "extract it onto the home's volume and take `snapshot --once --home DIR`"},
	{is(restore.ErrWouldRemoveMost), "check --store and --snapshot, or pass --force to restore anyway"},
	{is(restore.ErrDiverged), "take a snapshot of the home first, restore into another directory with --target, or pass --force to restore anyway"},
	{is(homemark.ErrDamaged), "then restore with --force if the home's data may be replaced"},
	{is(repo.ErrMissingManifest), "pick a snapshot from `homesnap list` whose manifests are all present"},
	{as[*repo.NoneAtError], "see `homesnap list`"},
	{as[*repo.NoSuchSnapshotError], "pick one from `homesnap list`"},
	{is(repo.ErrBadID), "see `homesnap list`"},
	{is(repo.ErrBadHead), "name one with --snapshot ID from `homesnap list`"},
	{is(repo.ErrWrongStore), "check --store"},
	{as[*crypt.NoIdentityError], "pass it with --age-identity-file or HOMESNAP_AGE_IDENTITY_FILE"},
	{is(crypt.ErrNoOwnIdentity), "give it with --age-identity-file or HOMESNAP_AGE_IDENTITY_FILE (the identity alone also sets the recipients)"},
	{mixed(false), "pass the recipients (--age-recipients-file / HOMESNAP_AGE_RECIPIENTS_FILE, or --age-identity-file), or, to store plain snapshots from now on, --age-migrate once"},
	{mixed(true), "to encrypt from now on, pass --age-migrate once (the next snapshot is a full, encrypted one; the older plain ones stay in clear until pruned), or point --store at a new prefix"},
	{is(crypt.ErrReencryptKeys), "give the new recipients with --age-recipients-file, and the identities in --age-identity-file"},
	{is(crypt.ErrNotEncrypted), "to encrypt a plain store, take a snapshot with --age-migrate"},
}

// authRefusal matches what --allow-unauthenticated overrides.
func authRefusal(err error) bool {
	return errors.Is(err, auth.ErrUnauthenticated) || errors.Is(err, auth.ErrForged) || errors.Is(err, auth.ErrRollback) || errors.Is(err, crypt.ErrPlaintext)
}

// mixed matches a crypt.MixedError that would (or would not) encrypt.
func mixed(encrypting bool) func(error) bool {
	return func(err error) bool {
		var m *crypt.MixedError
		return errors.As(err, &m) && m.Encrypting == encrypting
	}
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func as[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// hinted is an error with the flag hint the CLI added.
type hinted struct {
	error
	hint string
}

func (h *hinted) Error() string { return h.error.Error() + "; " + h.hint }
func (h *hinted) Unwrap() error { return h.error }

// logHinted is zerolog's ErrorMarshalFunc in the CLI: what is logged, from
// any package, reads as what is printed.
func logHinted(err error) any { return withHint(err) }

// withHint adds to err the flag hint of its condition, once.
func withHint(err error) error {
	var h *hinted
	if err == nil || errors.As(err, &h) {
		return err
	}
	for _, f := range flagHints {
		if f.is(err) {
			return &hinted{err, f.hint}
		}
	}
	return err
}
