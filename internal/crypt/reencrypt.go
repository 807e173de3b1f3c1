package crypt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// ErrReencryptKeys refuses a re-encryption not given the keys it needs.
var ErrReencryptKeys = errors.New("re-encryption needs keys")

// ErrNotEncrypted refuses to re-encrypt a plain store.
var ErrNotEncrypted = errors.New("is not an age-encrypted store")

// ReencryptResult counts what Reencrypt did.
type ReencryptResult struct {
	Objects int   // age objects rewritten for the new recipients
	Bytes   int64 // their plaintext bytes
	Plain   int   // plain objects (from before a migration) left as they are
}

// Reencrypt rewrites every age object of the store (the manifests and
// archives of every snapshot) for k.Recipients, decrypting with
// k.Identities, which must open the old objects and include an identity of
// one of the new recipients. Each object is replaced in one Put (never
// half-written) and read back with the new recipients' identities before
// the next one; the first failure stops it, and running it again is safe.
// Finally the head records the new fingerprints. Plaintext, and thus every
// manifest's byte ranges, is unchanged.
func Reencrypt(ctx context.Context, st store.Store, k Keys, progress func(key string)) (*ReencryptResult, error) {
	fps := RecipientFingerprints(k.Recipients)
	var fresh []age.Identity // the identities of the new recipients
	for _, id := range k.Identities {
		if slices.Contains(fps, IdentityFingerprints([]age.Identity{id})[0]) {
			fresh = append(fresh, id)
		}
	}
	if len(fps) == 0 || len(fresh) == 0 {
		return nil, fmt.Errorf("%w: the new recipients, and the old identities plus one of the new recipients' (to check every rewritten object); new recipients: %s", ErrReencryptKeys, list(fps))
	}
	m, _, err := repo.LoadMarker(ctx, st)
	if err != nil {
		return nil, err
	}
	if m == nil || m.Encryption != repo.EncryptionAge {
		return nil, fmt.Errorf("%s %w: nothing to re-encrypt", st, ErrNotEncrypted)
	}
	head, _, err := repo.LoadHead(ctx, st)
	if err != nil {
		return nil, err
	}
	var keys []string
	res := &ReencryptResult{}
	err = repo.ListObjects(ctx, st, func(o store.Object) error {
		if key, ok := repo.PlainKey(o.Key); ok {
			keys = append(keys, key)
		} else if repo.CarriesContent(o.Key) { // records are plain by design
			res.Plain++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// In an authenticated store (an auth.Store in st's stack) everything
	// is read with the old keys and tagged anew with the new recipients'
	// keys only, so that a restore holding just the new identity verifies
	// it all.
	tagged := st
	if a, ok := store.As[*auth.Store](st); ok {
		tagged = a.Rekey(AuthKeys(fresh))
	}
	from := Wrap(st, nil, k.Identities, m.Recipients)
	to := Wrap(tagged, k.Recipients, nil, fps)
	check := Wrap(tagged, nil, fresh, fps)
	// Objects from before authentication stay untagged: tagging them now
	// would vouch for what nobody checked.
	raw := store.Beneath[*auth.Store](st)
	rawFrom, rawTo, rawCheck := Wrap(raw, nil, k.Identities, m.Recipients), Wrap(raw, k.Recipients, nil, fps), Wrap(raw, nil, fresh, fps)
	for _, key := range keys {
		from, to, check := from, to, check
		if _, _, err := raw.Load(ctx, repo.ManifestMACKey(key)); errors.Is(err, store.ErrNotExist) && tagged != st {
			from, to, check = rawFrom, rawTo, rawCheck
		}
		n, err := reencryptOne(ctx, from, to, check, key)
		if err != nil {
			return res, fmt.Errorf("re-encrypt %s: %w; the objects before it are done and those after it untouched: fix the cause and run again", from.name(key), err)
		}
		res.Objects++
		res.Bytes += n
		if progress != nil {
			progress(key)
		}
	}
	if tagged != st {
		if err := retag(ctx, st, tagged); err != nil {
			return res, err
		}
	}
	if err := recordRecipients(ctx, st, tagged, head, fps); err != nil {
		return res, err
	}
	return res, nil
}

// retag reads every record through from (verified) and writes it back
// through to (tagged with the new keys).
func retag(ctx context.Context, from, to store.Store) error {
	var keys []string
	if err := repo.List(ctx, from, func(h repo.Handle, _ store.Object) error {
		keys = append(keys, h.Key())
		return nil
	}, repo.KindRecord); err != nil {
		return err
	}
	for _, key := range keys {
		data, _, err := from.Load(ctx, key)
		var ae *auth.Error
		if errors.As(err, &ae) && ae.Untagged {
			continue // from before authentication: left as it is
		}
		if err != nil {
			return fmt.Errorf("re-tag %s: %w; run again", repo.Name(from, key), err)
		}
		if err := to.Put(ctx, key, bytes.NewReader(data)); err != nil {
			return fmt.Errorf("re-tag %s: %w; run again", repo.Name(from, key), err)
		}
	}
	return nil
}

func reencryptOne(ctx context.Context, from, to, check *Store, key string) (int64, error) {
	src, err := from.Get(ctx, key, 0, -1)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	before := &hashCount{h: sha256.New()}
	if err := to.Put(ctx, key, io.TeeReader(src, before)); err != nil {
		return 0, err
	}
	back, err := check.Get(ctx, key, 0, -1)
	if err != nil {
		return 0, fmt.Errorf("reading the new object back: %w", err)
	}
	defer back.Close()
	after := &hashCount{h: sha256.New()}
	if _, err := io.Copy(after, back); err != nil {
		return 0, fmt.Errorf("reading the new object back: %w", err)
	}
	if !bytes.Equal(before.h.Sum(nil), after.h.Sum(nil)) {
		return 0, fmt.Errorf("the new object does not decrypt to the old content")
	}
	return after.n, nil
}

type hashCount struct {
	h hash.Hash
	n int64
}

func (c *hashCount) Write(p []byte) (int, error) { c.n += int64(len(p)); return c.h.Write(p) }

// recordRecipients sets the head's and the marker's fingerprints after a
// re-encryption, unless a snapshot was taken meanwhile.
// They are read through st and written through tagged.
func recordRecipients(ctx context.Context, st, tagged store.Store, was *repo.Head, fps []string) error {
	if was == nil {
		return nil
	}
	head, v, err := repo.LoadHead(ctx, st)
	if err != nil {
		return err
	}
	if head.Snapshot != was.Snapshot {
		return fmt.Errorf("snapshot %s was taken during the re-encryption and was not covered: run it again (stop the sidecar, or switch it to the new keys, first)", head.Snapshot)
	}
	head.Recipients = fps
	data, _ := json.Marshal(head)
	if _, err := store.CompareAndSwap(ctx, tagged, repo.HeadKey, data, v); err != nil {
		return fmt.Errorf("record the new recipients in %s: %w; run again", repo.Name(st, repo.HeadKey), err)
	}
	for range 5 {
		m, mv, err := repo.LoadMarker(ctx, st)
		if err != nil {
			return err
		}
		added := false
		for _, fp := range fps {
			if !slices.Contains(m.Recipients, fp) {
				m.Recipients, added = append(m.Recipients, fp), true
			}
		}
		if !added && tagged == st {
			return nil
		}
		if _, err := repo.SaveMarker(ctx, tagged, m, mv); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s keeps changing: run again", repo.Name(st, repo.MarkerKey))
}
