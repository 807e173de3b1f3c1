// Package crypt encrypts a homesnap store with age: a store.Store wrapper
// that turns every object carrying home content (manifests, archives) into
// an age file under the same key plus ".age", readable with stock `age -d`,
// and whose ranged reads fetch only the ciphertext chunks that cover the
// plaintext range. It also holds the rules that keep a store from mixing
// plain and encrypted snapshots.
//
// Keys never appear in messages: recipients are named by fingerprints, the
// first 16 hex digits of the SHA-256 of the recipient string (age1...),
// which anyone can recompute with `printf %s age1... | sha256sum`.
package crypt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/auth"
)

// ParseRecipients reads a recipients file in age's own format (one
// recipient per line, # comments); name is for messages.
func ParseRecipients(r io.Reader, name string) ([]age.Recipient, error) {
	rs, err := age.ParseRecipients(r)
	if err != nil {
		return nil, fmt.Errorf("age recipients %s: %s (one age1... public key per line, as `age-keygen -y` prints)", name, unquote(err))
	}
	for _, x := range rs {
		if _, ok := x.(fmt.Stringer); !ok {
			return nil, fmt.Errorf("age recipients %s: recipient type %T is not supported", name, x)
		}
	}
	return rs, nil
}

// ParseIdentities reads an identity file in age's own format (the output of
// `age-keygen`); name is for messages. age's parser never echoes a key in
// its errors.
func ParseIdentities(r io.Reader, name string) ([]age.Identity, error) {
	ids, err := age.ParseIdentities(r)
	if err != nil {
		return nil, fmt.Errorf("age identities %s: %s (AGE-SECRET-KEY-1... lines, as `age-keygen` writes them)", name, unquote(err))
	}
	for _, id := range ids {
		if recipientOf(id) == nil {
			return nil, fmt.Errorf("age identities %s: identity type %T is not supported", name, id)
		}
	}
	return ids, nil
}

// quoted is what age's parse errors quote from the file: the malformed
// line, which may be a secret key put in the wrong file.
var quoted = regexp.MustCompile(`"[^"]*"|'[^']*'`)

// unquote is err's message without what it quotes from the key file.
func unquote(err error) string {
	return quoted.ReplaceAllString(err.Error(), "(not shown)")
}

// Fingerprint names a recipient without giving its key away.
func Fingerprint(recipient string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(recipient)))
	return hex.EncodeToString(sum[:8])
}

// RecipientFingerprints returns the sorted, distinct fingerprints of rs.
func RecipientFingerprints(rs []age.Recipient) []string {
	var fps []string
	for _, r := range rs {
		if s, ok := r.(fmt.Stringer); ok {
			fps = append(fps, Fingerprint(s.String()))
		}
	}
	slices.Sort(fps)
	return slices.Compact(fps)
}

// IdentityFingerprints returns the sorted, distinct fingerprints of the
// recipients that ids decrypt for.
func IdentityFingerprints(ids []age.Identity) []string {
	var fps []string
	for _, id := range ids {
		if r := recipientOf(id); r != nil {
			fps = append(fps, Fingerprint(r.String()))
		}
	}
	slices.Sort(fps)
	return slices.Compact(fps)
}

// IdentityRecipients returns the recipients ids decrypt for, so that one
// identity file can serve a snapshot that encrypts and reads back.
func IdentityRecipients(ids []age.Identity) []age.Recipient {
	var rs []age.Recipient
	for _, id := range ids {
		switch id := id.(type) {
		case *age.X25519Identity:
			rs = append(rs, id.Recipient())
		case *age.HybridIdentity:
			rs = append(rs, id.Recipient())
		}
	}
	return rs
}

func recipientOf(id age.Identity) fmt.Stringer {
	switch id := id.(type) {
	case *age.X25519Identity:
		return id.Recipient()
	case *age.HybridIdentity:
		return id.Recipient()
	}
	return nil
}

// list prints fingerprints for a message.
func list(fps []string) string {
	if len(fps) == 0 {
		return "(none recorded)"
	}
	return strings.Join(fps, ", ")
}

// AuthKeys derives from each identity the key that authenticates the
// store's metadata (internal/auth), filed under its recipient's
// fingerprint: whoever can decrypt the store can check it, and a bucket
// writer, who holds at most the public recipients, cannot tag anything.
func AuthKeys(ids []age.Identity) []auth.Key {
	var keys []auth.Key
	for _, id := range ids {
		r := recipientOf(id)
		secret, ok := id.(fmt.Stringer)
		if r == nil || !ok {
			continue
		}
		keys = append(keys, auth.Derive(Fingerprint(r.String()), []byte(secret.String())))
	}
	return keys
}
