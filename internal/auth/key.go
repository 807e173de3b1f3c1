// Package auth authenticates a homesnap store's metadata with a key that a
// bucket writer (who may put and delete objects) does not hold: the
// marker, the head and every record carry HMAC-SHA256 tags in a "macs"
// field of their own JSON, and every manifest layer has a small JSON
// object beside it (snapshots/<id>.mac.json) holding the tags of the
// manifest's stored bytes. Archives need none: the authenticated
// manifests bind them by the content hash of every file.
//
// A tag covers the object's key and content, so a record cannot be moved
// to another snapshot's key and a head, which names its snapshot, parent,
// recipients and sequence number, cannot be pieced together from others.
// Each tag is filed under the ID of the key that made it (an age
// recipient's fingerprint, or the ID of a key file), so that a store
// written with several keys is verified by whichever one a reader holds.
package auth

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
)

// Key is a MAC key and the ID its tags are filed under. Its secret never
// appears in messages or in the store.
type Key struct {
	ID     string
	secret []byte
}

// The labels separate the MAC key from every other use of the same
// secret material (an age identity also decrypts; a key file's ID is
// public).
const (
	macLabel = "homesnap store authentication v1"
	idLabel  = "homesnap store authentication key id v1"
)

// Derive makes a MAC key from secret material (an age identity's secret
// key string, a key file's bytes) with HKDF-SHA256; id names it in the
// store.
func Derive(id string, material []byte) Key {
	k, err := hkdf.Key(sha256.New, material, nil, macLabel, sha256.Size)
	if err != nil {
		panic(err) // only for lengths HKDF cannot produce
	}
	return Key{ID: id, secret: k}
}

// MinKeyBytes is the least secret a key file may hold.
const MinKeyBytes = 32

// ErrBadKey means a key file is unusable.
var ErrBadKey = errors.New("unusable authentication key")

// ParseKeyFile reads a key file: at least 32 random bytes, raw or as hex
// (`openssl rand -hex 32`, `head -c 32 /dev/urandom`); white space around
// hex is ignored. name is for messages; the content never is.
func ParseKeyFile(data []byte, name string) (Key, error) {
	// Text of hex digits is hex (random raw bytes never are), so that 32
	// hex digits count as the 16 bytes they hold.
	material := data
	if b, err := hex.DecodeString(string(bytes.TrimSpace(data))); err == nil {
		material = b
	}
	if len(material) < MinKeyBytes {
		return Key{}, fmt.Errorf("%w %s: it holds less than %d bytes of secret (generate one with `openssl rand -hex 32 > FILE`)", ErrBadKey, name, MinKeyBytes)
	}
	id, err := hkdf.Key(sha256.New, material, nil, idLabel, 8)
	if err != nil {
		panic(err)
	}
	return Derive("key-"+hex.EncodeToString(id), material), nil
}

// mac starts a MAC under k.
func (k Key) mac() hash.Hash { return hmac.New(sha256.New, k.secret) }

// domain starts every MAC input, so that no tag verifies for another
// object or in another store: the store's identity (repo.Marker.ID) and
// the object's key. A store from before identities (format 3, id "")
// has tags of the first form, which no tag of the second can equal.
func domain(h hash.Hash, id, object string) {
	if id == "" {
		fmt.Fprintf(h, "homesnap-auth-v1\x00%s\x00", object)
		return
	}
	fmt.Fprintf(h, "homesnap-auth-v2\x00%s\x00%s\x00", id, object)
}
