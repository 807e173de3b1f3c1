// Package repo owns the layout of a homesnap store: the keys of its objects,
// snapshot IDs, the marker that identifies a store, and the head pointer
// moved by compare-and-swap. Everything that reads or writes the store's
// structure goes through it; internal/snapshot fills it with snapshots.
package repo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/homesnap/homesnap/internal/store"
)

// Store layout, relative to the store URL's prefix:
//
//	homesnap.json              marker: this prefix is a homesnap store, and its format
//	head.json                  the newest snapshot, moved by compare-and-swap
//	snapshots/<id>.json.zst    manifests: full, or a delta on an older snapshot's (see archive.Header.Base)
//	snapshots/<id>.json        records: a snapshot's summary (see Record)
//	archives/<id>.tar.zst      archives (absent when a snapshot wrote no bytes)
//	repacks/<id>.json          a repack's note: the archives it replaced by archives/<id>.tar.zst, and when (see RepackNote)
//	snapshots/<id>.mac.json    in an authenticated store: the tags of the manifest's stored bytes (internal/auth)
//
// In an encrypted store, the objects that carry home content (manifests
// and archives) are age files stored under their key plus
// encryptedSuffix, e.g. archives/<id>.tar.zst.age, so that `age -d` gives
// back the plain object.
const (
	MarkerKey       = "homesnap.json"
	HeadKey         = "head.json"
	LeaseKey        = "lease.json" // the one writer's lease (internal/lease)
	encryptedSuffix = ".age"
)

// FormatVersion is the store layout this homesnap writes; it reads every
// version up to it, and refuses a store whose marker names a newer one
// before anything is read or written. Version 2 stores may hold delta
// manifests, which a version 1 homesnap cannot read and whose layers its
// prune would delete: a store's marker moves to 2 before its first delta
// is written (UpgradeMarker), so that such a homesnap refuses it at once.
// Version 3 stores may be authenticated (Marker.Authenticated): a version
// 2 homesnap would write untagged heads and prune the tags of manifest
// layers, so the marker moves to 3 when a store is first authenticated.
// Version 4 stores have an identity (Marker.ID) that every tag covers, so
// that objects copied from another store with the same key are refused;
// a version 3 homesnap would find every such tag wrong. An authenticated
// store moves to 4 when a writer holding its key gives it its identity
// (auth.Store.Bind); any other store when it is next written. Version 5
// stores may hold manifests of format 3 (spans, archive.Span), which a
// version 4 homesnap refuses half-way: a store moves to 5 before its
// first such manifest is written.
const FormatVersion = 5

// NewStoreID makes a store's identity: 128 random bits.
func NewStoreID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var storeIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// IsStoreID tells an identity NewStoreID makes.
func IsStoreID(id string) bool { return storeIDPattern.MatchString(id) }

// Snapshot IDs sort by creation time and never change: a redeploy does not
// renumber them.
var idPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{6}$`)

func NewID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return now.UTC().Format(idTimeLayout) + "-" + hex.EncodeToString(b[:])
}

// CheckID refuses a malformed snapshot ID before it becomes part of a key.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("snapshot ID %q %w (expected e.g. 20261202T111400.000Z-a1b2c3)", id, ErrBadID)
	}
	return nil
}

// Marker identifies a homesnap store and its format, and says whether its
// snapshots are encrypted: a store never mixes plain and encrypted ones
// without an explicit migration.
type Marker struct {
	Homesnap int `json:"homesnap"`
	// Encryption is "age" for an encrypted store, empty for a plain one.
	Encryption string `json:"encryption,omitempty"`
	// Recipients are the fingerprints of every age recipient any snapshot
	// of this store was encrypted to, oldest first (never the keys).
	Recipients []string `json:"recipients,omitempty"`
	// Authenticated says every snapshot from now on is tagged with a key
	// a bucket writer lacks (internal/auth); a reader holding no key
	// refuses the store.
	Authenticated bool `json:"authenticated,omitempty"`
	// ID is the store's identity (format 4): random, made when the store
	// is created or, for an authenticated store from before, when a
	// writer holding its key binds it (auth.Store.Bind). Every tag covers
	// it. Copying a whole store, this marker included, keeps it.
	ID string `json:"id,omitempty"`
	// LegacyTags are the tags (their first 32 hex digits) that the head,
	// the records and the manifest layers carried when an authenticated
	// store got its identity: those objects keep their format 3 tags,
	// which no other object's tag may then use.
	LegacyTags []string `json:"legacy_tags,omitempty"`
}

// EncryptionAge is the Marker's Encryption of an age-encrypted store.
const EncryptionAge = "age"

// Head is the pointer to the newest snapshot.
type Head struct {
	Snapshot string    `json:"snapshot"`
	Parent   string    `json:"parent,omitempty"`
	Time     time.Time `json:"time"`
	// Recipients are the sorted fingerprints of the age recipients the
	// snapshot is encrypted to; empty for a plain snapshot. A snapshot
	// whose recipients differ from its parent's is a full one, so that
	// every object it references is encrypted to the same recipients.
	Recipients []string `json:"recipients,omitempty"`
	// Seq counts the commits: the parent's plus one. A head without it
	// was written before heads were authenticated, and the next snapshot
	// does not trust its manifest (a full snapshot). An authenticated
	// record with a higher Seq than the head proves the head was rolled
	// back (auth.CheckRollback).
	Seq int64 `json:"seq,omitempty"`
}

// ErrNoSnapshot means the store holds no snapshot yet.
var ErrNoSnapshot = errors.New("no snapshot")

// ErrBadID marks a snapshot ID that is not one NewID makes.
var ErrBadID = errors.New("is malformed")

// ErrBadHead marks a head pointer that cannot be read.
var ErrBadHead = errors.New("is corrupt")

// ErrWrongStore means the prefix is not a homesnap store this version can
// use: it holds other objects, or a marker of another format or garbage.
var ErrWrongStore = errors.New("not a usable homesnap store")

// LoadHead checks the store's marker, then reads the head pointer and its
// version. A store without a head is empty (nil head); a prefix holding
// something else, or a store of another format, is an error.
func LoadHead(ctx context.Context, s store.Store) (*Head, store.Version, error) {
	if err := CheckMarker(ctx, s); err != nil {
		return nil, "", err
	}
	data, v, err := s.Load(ctx, HeadKey)
	if errors.Is(err, store.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var h Head
	if err := json.Unmarshal(data, &h); err != nil || CheckID(h.Snapshot) != nil {
		return nil, "", fmt.Errorf("%s/%s %w (%v): restore a snapshot named by its ID, or fix the object", s, HeadKey, ErrBadHead, err)
	}
	return &h, v, nil
}

// CheckMarker refuses a store whose marker is not ours (garbage, another
// format version) and tells an empty store from a prefix that holds
// something else.
func CheckMarker(ctx context.Context, s store.Store) error {
	data, _, err := s.Load(ctx, MarkerKey)
	if err == nil {
		_, err := parseMarker(s, data)
		return err
	}
	if !errors.Is(err, store.ErrNotExist) {
		return err
	}
	var other string
	stop := errors.New("stop")
	lerr := s.List(ctx, "", func(o store.Object) error {
		if o.Key == LeaseKey {
			return nil // a writer's lease, taken just before its first snapshot
		}
		other = o.Key
		return stop
	})
	if lerr != nil && !errors.Is(lerr, stop) {
		return lerr
	}
	if other != "" {
		return fmt.Errorf("%w: %s is not a homesnap store: it holds other objects (e.g. %q) and no %s; use an empty prefix or an existing homesnap store", ErrWrongStore, s, other, MarkerKey)
	}
	return nil
}

func parseMarker(s store.Store, data []byte) (*Marker, error) {
	var m Marker
	if err := json.Unmarshal(data, &m); err != nil || m.Homesnap == 0 {
		return nil, fmt.Errorf("%w: %s is not a homesnap store marker (%s): this homesnap supports format version %d; use a homesnap store, or restore the marker from a backup of the bucket", ErrWrongStore, Name(s, MarkerKey), excerpt(data), FormatVersion)
	}
	if m.ID != "" && !IsStoreID(m.ID) {
		return nil, fmt.Errorf("%w: %s names identity %q, which is not one homesnap makes: restore the marker from a backup of the bucket", ErrWrongStore, Name(s, MarkerKey), m.ID)
	}
	if m.Homesnap < 1 || m.Homesnap > FormatVersion {
		return nil, fmt.Errorf("%w: %s says format version %d; this homesnap supports versions 1 to %d: upgrade homesnap to the release that wrote the store, or use another prefix (nothing was read or written)", ErrWrongStore, s, m.Homesnap, FormatVersion)
	}
	return &m, nil
}

// EnsureMarker makes the store a homesnap store on the first snapshot.
func EnsureMarker(ctx context.Context, s store.Store) error {
	_, err := SaveMarker(ctx, s, &Marker{}, "")
	if errors.Is(err, store.ErrPrecondition) {
		return nil // another writer created it first
	}
	return err
}

// LoadMarker reads the marker and its version; nil without error when the
// store has none.
func LoadMarker(ctx context.Context, s store.Store) (*Marker, store.Version, error) {
	data, v, err := s.Load(ctx, MarkerKey)
	if errors.Is(err, store.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	m, err := parseMarker(s, data)
	return m, v, err
}

// SaveMarker writes the marker if it is still at version old ("" creates
// it); it returns an error wrapping store.ErrPrecondition when another
// writer changed it first. A new marker gets the current format; an
// existing one keeps its own (see UpgradeMarker). A marker of format 4
// without an identity gets one.
func SaveMarker(ctx context.Context, s store.Store, m *Marker, old store.Version) (store.Version, error) {
	if m.Homesnap == 0 {
		m.Homesnap = FormatVersion
	}
	if m.Homesnap >= 4 && m.ID == "" {
		m.ID = NewStoreID()
	}
	data, _ := json.Marshal(m)
	return store.CompareAndSwap(ctx, s, MarkerKey, data, old)
}

// UpgradeMarker moves the store's marker to the current format, keeping
// what else it says; a writer calls it before it stores an object that
// older releases cannot read.
func UpgradeMarker(ctx context.Context, s store.Store) error {
	return updateMarker(ctx, s, func(m *Marker) bool {
		if m.Homesnap >= FormatVersion || unbound(m) {
			return false
		}
		m.Homesnap = FormatVersion
		return true
	})
}

// MarkAuthenticated records in the marker that the store is
// authenticated from now on, moving it to the current format (older
// releases would write untagged heads); a writer holding a key calls it
// once its first tagged snapshot is committed.
func MarkAuthenticated(ctx context.Context, s store.Store) error {
	return updateMarker(ctx, s, func(m *Marker) bool {
		if m.Authenticated && m.Homesnap >= FormatVersion || unbound(m) {
			return false
		}
		m.Homesnap, m.Authenticated = FormatVersion, true
		return true
	})
}

// unbound tells an authenticated store from before identities: only
// auth.Store.Bind moves it to format 4, keeping what it tagged.
func unbound(m *Marker) bool { return m.Authenticated && m.ID == "" }

// updateMarker applies change to the marker (a new one if there is none)
// and saves it by compare-and-swap, retrying a lost race twice; change
// reports whether there is anything to save.
func updateMarker(ctx context.Context, s store.Store, change func(*Marker) bool) error {
	for try := 0; ; try++ {
		m, v, err := LoadMarker(ctx, s)
		if err != nil {
			return err
		}
		if m == nil {
			m = &Marker{}
		}
		if !change(m) {
			return nil
		}
		_, err = SaveMarker(ctx, s, m, v)
		if err == nil || !errors.Is(err, store.ErrPrecondition) || try == 2 {
			return err
		}
	}
}

// excerpt quotes the start of a damaged object for a message.
func excerpt(data []byte) string {
	const n = 40
	if len(data) > n {
		return fmt.Sprintf("starts %q", data[:n])
	}
	return fmt.Sprintf("holds %q", data)
}

// Name is for messages: the store URL and a key.
func Name(s store.Store, key string) string {
	return strings.TrimSuffix(s.String(), "/") + "/" + key
}
