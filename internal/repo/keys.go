package repo

import (
	"context"
	"strings"

	"github.com/homesnap/homesnap/internal/store"
)

// The prefixes of the objects snapshots write (see the layout in repo.go):
// records, manifests and their tags under snapshotPrefix, archives under
// archivePrefix. Only this package assembles or takes apart a key: every
// other speaks Kind and Handle (keys_test.go in internal/ checks it).
const (
	snapshotPrefix = "snapshots/"
	archivePrefix  = "archives/"
)

const (
	recordSuffix   = ".json"
	manifestSuffix = ".json.zst"
	macSuffix      = ".mac.json"
	archiveSuffix  = ".tar.zst"
)

// Kind is a kind of object a snapshot writes.
type Kind uint8

const (
	KindRecord   Kind = iota + 1 // snapshots/<id>.json: the snapshot's summary (Record)
	KindManifest                 // snapshots/<id>.json.zst: its entries
	KindArchive                  // archives/<id>.tar.zst: the file bytes it added
	KindTag                      // snapshots/<id>.mac.json: its manifest's tags, in an authenticated store
)

// Handle names an object a snapshot writes, by kind and snapshot ID.
type Handle struct {
	Kind Kind
	ID   string
}

// Key is the handle's key in the store (plain: an encrypting store adds
// encryptedSuffix itself).
func (h Handle) Key() string {
	switch h.Kind {
	case KindRecord:
		return snapshotPrefix + h.ID + recordSuffix
	case KindManifest:
		return snapshotPrefix + h.ID + manifestSuffix
	case KindArchive:
		return archivePrefix + h.ID + archiveSuffix
	case KindTag:
		return snapshotPrefix + h.ID + macSuffix
	}
	panic("repo: a handle of no kind")
}

// ParseKey tells the handle of a record, manifest, archive or tag key,
// plain or as stored encrypted (records and tags never are); ok is false
// for every other key (the marker, the head, repack notes, stray
// objects).
func ParseKey(key string) (Handle, bool) {
	plain, encrypted := strings.CutSuffix(key, encryptedSuffix)
	var h Handle
	if name, ok := strings.CutPrefix(plain, archivePrefix); ok {
		if id, ok := strings.CutSuffix(name, archiveSuffix); ok {
			h = Handle{KindArchive, id}
		}
	} else if name, ok := strings.CutPrefix(plain, snapshotPrefix); ok {
		if id, ok := strings.CutSuffix(name, manifestSuffix); ok {
			h = Handle{KindManifest, id}
		} else if id, ok := strings.CutSuffix(name, macSuffix); ok && !encrypted {
			h = Handle{KindTag, id}
		} else if id, ok := strings.CutSuffix(name, recordSuffix); ok && !encrypted {
			h = Handle{KindRecord, id}
		}
	}
	return h, h.Kind != 0 && CheckID(h.ID) == nil
}

// ManifestKey, RecordKey and ArchiveKey are the keys of snapshot id's
// objects.
func ManifestKey(id string) string { return Handle{KindManifest, id}.Key() }
func RecordKey(id string) string   { return Handle{KindRecord, id}.Key() }
func ArchiveKey(id string) string  { return Handle{KindArchive, id}.Key() }

// IsRecordKey tells a record's key.
func IsRecordKey(key string) bool {
	h, ok := ParseKey(key)
	return ok && h.Kind == KindRecord
}

// IsManifestKey tells a manifest's key, plain or as stored encrypted.
func IsManifestKey(key string) bool {
	return manifestID(key) != ""
}

func manifestID(key string) string {
	if h, ok := ParseKey(key); ok && h.Kind == KindManifest {
		return h.ID
	}
	return ""
}

// ManifestMACKey is where the tags of a manifest (a key IsManifestKey
// accepts) live in an authenticated store.
func ManifestMACKey(manifest string) string { return Handle{KindTag, manifestID(manifest)}.Key() }

// IsLayerObject tells the objects a manifest layer is made of: the
// manifest and its tags, which prune keeps or drops together.
func IsLayerObject(key string) bool {
	h, ok := ParseKey(key)
	return ok && (h.Kind == KindManifest || h.Kind == KindTag)
}

// StoredArchive is an archive object as ListArchives found it.
type StoredArchive struct {
	ID        string
	Size      int64 // stored bytes: an encrypted archive's exceed its plain ones
	Encrypted bool  // listed under its encrypted name (through a store that does not decrypt)
}

// ListArchives lists the store's archive objects, in listing order. An
// archive stored both plain and encrypted (a store migrated between the
// two, listed without decrypting) appears once in each form.
func ListArchives(ctx context.Context, s store.Store) ([]StoredArchive, error) {
	var out []StoredArchive
	err := List(ctx, s, func(h Handle, o store.Object) error {
		_, encrypted := PlainKey(o.Key)
		out = append(out, StoredArchive{ID: h.ID, Size: o.Size, Encrypted: encrypted})
		return nil
	}, KindArchive)
	return out, err
}

// PlainArchiveSizes is the stored size of each archive listed under its
// plain name, for those who read archives through st as it is (an
// encrypted form's name is not one they can read).
func PlainArchiveSizes(ctx context.Context, st store.Store) (map[string]int64, error) {
	list, err := ListArchives(ctx, st)
	size := map[string]int64{}
	for _, a := range list {
		if !a.Encrypted {
			size[a.ID] = a.Size
		}
	}
	return size, err
}

// Keys lists every object a snapshot itself may have written, for cleaning
// up after a snapshot that was not committed.
func Keys(id string) []string { return []string{RecordKey(id), ManifestKey(id), ArchiveKey(id)} }

// CarriesContent tells whether key holds home content (paths, sizes,
// hashes, file bytes) and is therefore encrypted in an encrypted store:
// manifests and archives. The marker, the head and the records hold only
// IDs, times, totals and recipient fingerprints, so that listing and
// pruning work without a key, across key rotations. A new kind of object
// must be added here if it says anything about the home.
func CarriesContent(key string) bool {
	return strings.HasPrefix(key, archivePrefix) || strings.HasPrefix(key, snapshotPrefix) && strings.HasSuffix(key, manifestSuffix)
}
