package repo

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/homesnap/homesnap/internal/store"
)

// List calls fn for every object of the kinds given, with its handle, in
// listing order (one listing per prefix the kinds live under): encrypted
// names (as a store that does not decrypt lists them) parse to the same
// handle as plain ones, and every other object is skipped.
func List(ctx context.Context, s store.Store, fn func(Handle, store.Object) error, kinds ...Kind) error {
	for _, prefix := range []string{snapshotPrefix, archivePrefix} {
		if !slices.ContainsFunc(kinds, func(k Kind) bool { return (k == KindArchive) == (prefix == archivePrefix) }) {
			continue
		}
		err := s.List(ctx, prefix, func(o store.Object) error {
			if h, ok := ParseKey(o.Key); ok && slices.Contains(kinds, h.Kind) {
				return fn(h, o)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ListObjects calls fn for every object under the prefixes snapshots
// write, whatever it is (stray and unfinished objects included): for
// those who collect or rewrite them all (prune, re-encryption).
func ListObjects(ctx context.Context, s store.Store, fn func(store.Object) error) error {
	for _, prefix := range []string{snapshotPrefix, archivePrefix} {
		if err := s.List(ctx, prefix, fn); err != nil {
			return err
		}
	}
	return nil
}

// Owner tells which snapshot an object under the prefixes snapshots write
// belongs to, by its name alone: <id>.<anything> under archives/ (archive
// true) or snapshots/ (records, manifests, tags, and what an unfinished
// or foreign writer left under the snapshot's name); ok is false for
// every other key. Prune collects what a snapshot owns.
func Owner(key string) (id string, archive, ok bool) {
	dir, name, found := strings.Cut(key, "/")
	if !found || dir+"/" != snapshotPrefix && dir+"/" != archivePrefix {
		return "", false, false
	}
	// An ID holds one dot (its milliseconds): the name is the ID, alone
	// or followed by a dot and a suffix.
	if len(name) < idLen || len(name) > idLen && name[idLen] != '.' || CheckID(name[:idLen]) != nil {
		return "", false, false
	}
	return name[:idLen], dir+"/" == archivePrefix, true
}

// idTimeLayout is the time at the start of every ID, and idLen the
// length of every ID NewID makes.
const idTimeLayout = "20060102T150405.000Z"

var idLen = len(NewID(time.Time{}))

// IDTime is when snapshot id was made, as its name says (the zero time
// for a malformed ID).
func IDTime(id string) time.Time {
	if CheckID(id) != nil {
		return time.Time{}
	}
	t, err := time.Parse(idTimeLayout, id[:len(idTimeLayout)])
	if err != nil {
		return time.Time{}
	}
	return t
}

// EncryptedKey is where an encrypting store keeps the object a caller
// names key (one that CarriesContent).
func EncryptedKey(key string) string { return key + encryptedSuffix }

// PlainKey is the key a caller names the object stored at an encrypted
// name by; ok is false for a name that is not encrypted.
func PlainKey(stored string) (key string, ok bool) {
	return strings.CutSuffix(stored, encryptedSuffix)
}
