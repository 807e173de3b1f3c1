package crypt

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// Keys is what a command was given: recipients to encrypt to, identities to
// decrypt with, and whether it may switch the store between plain and
// encrypted.
type Keys struct {
	Recipients []age.Recipient
	Identities []age.Identity
	Migrate    bool
	// AllowPlaintext lets a restore read a plain snapshot of an
	// encrypted store (one from before its migration to age), with a
	// note; otherwise that is ErrPlaintext.
	AllowPlaintext bool
}

// Setup is the store a command works through, after the checks.
type Setup struct {
	Store store.Store
	// Recipients are the fingerprints a snapshot records in the head
	// (empty: plain).
	Recipients []string
	// Note says what changed or deserves a warning, for the log; empty
	// when nothing did.
	Note string
	// Migrating: this snapshot moves the store between plain and
	// encrypted (Keys.Migrate), which it need not be told again once
	// committed.
	Migrating bool
	// Authenticated: Store verifies what it reads and tags what it
	// writes (internal/auth).
	Authenticated bool
}

// ErrPlaintext means a snapshot of an age-encrypted store is plain: taken
// before the store was migrated to age, or planted by a bucket writer.
var ErrPlaintext = errors.New("is not encrypted, and the store is")

// ErrMixed means a snapshot would mix plain and encrypted snapshots in one
// store.
var ErrMixed = errors.New("a store never mixes plain and encrypted snapshots")

// MixedError refuses a snapshot that would mix plain and encrypted
// snapshots: Encrypting says it would encrypt onto a plain store (else it
// would store plain snapshots in an encrypted one). Keys.Migrate allows it.
type MixedError struct {
	Store      string
	Encrypting bool
}

func (e *MixedError) Error() string {
	if !e.Encrypting {
		return fmt.Sprintf("%s holds age-encrypted snapshots and this snapshot has no age recipients: %v", e.Store, ErrMixed)
	}
	return fmt.Sprintf("%s holds plain snapshots and this snapshot would encrypt them with age: %v", e.Store, ErrMixed)
}

func (e *MixedError) Unwrap() error { return ErrMixed }

// ErrNoOwnIdentity refuses an encrypting snapshot given no identity of
// its recipients.
var ErrNoOwnIdentity = errors.New("has no identity for any of them")

// ForSnapshot checks the store's encryption against k and returns the store
// a snapshot writes through. A snapshot with recipients onto a plain store,
// or without onto an encrypted one, is refused unless k.Migrate: then the
// marker is switched and the next snapshot is a full one (its recipients
// differ from its parent's). New recipients are added to the marker's list.
// An encrypting snapshot needs an identity for one of its recipients, since
// every incremental snapshot reads its parent's manifest back.
func ForSnapshot(ctx context.Context, st store.Store, k Keys) (*Setup, error) {
	fps := RecipientFingerprints(k.Recipients)
	want := ""
	if len(fps) > 0 {
		want = repo.EncryptionAge
		if !overlaps(IdentityFingerprints(k.Identities), fps) {
			return nil, fmt.Errorf("snapshot encrypts to age recipients %s but %w: an incremental snapshot reads its parent's manifest back, so give it one of their identities too", list(fps), ErrNoOwnIdentity)
		}
	}
	setup := &Setup{Store: st, Recipients: fps}
	if want != "" {
		setup.Store = Wrap(st, k.Recipients, k.Identities, fps)
	}
	for range 5 { // compare-and-swap rounds against a concurrent writer
		m, v, err := repo.LoadMarker(ctx, st)
		if err != nil {
			return nil, err
		}
		if m == nil && want == "" {
			return setup, nil // a plain store is created by the snapshot, as always
		}
		if m == nil {
			if err := repo.CheckMarker(ctx, st); err != nil {
				return nil, err
			}
			m = &repo.Marker{}
		} else if m.Encryption != want {
			if !k.Migrate {
				return nil, mixError(st, m.Encryption, want)
			}
			setup.Note = fmt.Sprintf("migrating %s from %s to %s snapshots: this snapshot is a full one; the older ones stay as they are (readable, and %s) until pruned",
				st, describe(m.Encryption), describe(want), describe(m.Encryption))
			setup.Migrating = true
		}
		changed := m.Encryption != want || v == ""
		m.Encryption = want
		for _, fp := range fps {
			if !slices.Contains(m.Recipients, fp) {
				m.Recipients = append(m.Recipients, fp)
				changed = true
			}
		}
		if !changed {
			return setup, nil
		}
		if _, err := repo.SaveMarker(ctx, st, m, v); errors.Is(err, store.ErrPrecondition) {
			continue
		} else if err != nil {
			return nil, err
		}
		return setup, nil
	}
	return nil, fmt.Errorf("%s keeps changing under this snapshot: make sure only one snapshot process writes to this store", repo.Name(st, repo.MarkerKey))
}

func mixError(st store.Store, have, want string) error {
	return &MixedError{Store: st.String(), Encrypting: want != ""}
}

func describe(encryption string) string {
	if encryption == "" {
		return "plain"
	}
	return encryption + "-encrypted"
}

// ForRestore returns the store a restore of snapshot (empty: the head) reads
// through. An encrypted snapshot needs a matching identity: the manifest's
// header is decrypted now, so that a missing or wrong identity fails before
// anything else happens, naming the recipients' fingerprints. A plain
// snapshot is read as is (with a note when identities were given: a store
// being migrated still holds plain snapshots).
//
// In an encrypted store, a plain snapshot is refused (ErrPlaintext) when
// identities were given or the store is authenticated, unless
// k.AllowPlaintext. What the marker and the snapshot claim is read beneath
// the authentication (store.Beneath), so that a planted plain head or a wrong
// identity is named as such; the store returned reads through it and
// verifies everything, the marker and the head included.
func ForRestore(ctx context.Context, st store.Store, k Keys, snapshot string) (*Setup, error) {
	claims := store.Beneath[*auth.Store](st)
	m, _, err := repo.LoadMarker(ctx, claims)
	if err != nil || m == nil {
		return &Setup{Store: st}, err // an empty store or none: the restore says which
	}
	head, _, err := repo.LoadHead(ctx, claims)
	if err != nil {
		return nil, err
	}
	need := m.Recipients // a non-head snapshot used some of the store's recipients
	encrypted := false
	switch {
	case head != nil && (snapshot == "" || snapshot == head.Snapshot):
		snapshot, need, encrypted = head.Snapshot, head.Recipients, len(head.Recipients) > 0
	case snapshot == "" || repo.CheckID(snapshot) != nil:
		return &Setup{Store: st}, nil // no snapshot, or a bad ID: the restore says so
	default:
		err := Wrap(st, nil, nil, nil).exists(ctx, repo.ManifestKey(snapshot))
		if err != nil && !errors.Is(err, store.ErrNotExist) {
			return nil, err
		}
		encrypted = err == nil
	}
	if !encrypted {
		setup := &Setup{Store: st}
		if m.Encryption == repo.EncryptionAge && (len(k.Identities) > 0 || m.Authenticated) {
			if !k.AllowPlaintext {
				return nil, fmt.Errorf("snapshot %s of %s %w (the marker says age): taken before the store was migrated to age, or planted by someone who can write to the bucket", snapshot, st, ErrPlaintext)
			}
			setup.Note = fmt.Sprintf("snapshot %s is not encrypted although the store is; reading it anyway as told (it may have been planted)", snapshot)
			return setup, nil
		}
		if len(k.Identities) > 0 {
			setup.Note = fmt.Sprintf("snapshot %s is not encrypted (stored before this store was migrated to age, or the store is plain); restoring it as stored", snapshot)
		}
		return setup, nil
	}
	w := Wrap(st, nil, k.Identities, need)
	if _, err := w.open(ctx, repo.ManifestKey(snapshot)); err != nil {
		return nil, err
	}
	return &Setup{Store: w, Recipients: need}, nil
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}
