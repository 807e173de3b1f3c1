package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// Errors a reader meets; each is an *Error naming the object.
var (
	// ErrUnauthenticated: the object carries no tag of a key the reader
	// holds (written before the store was authenticated, by a writer with
	// other keys, or planted).
	ErrUnauthenticated = errors.New("is not authenticated")
	// ErrForged: a tag of a key the reader holds does not match.
	ErrForged = errors.New("failed authentication (forged or damaged)")
)

// Error names the object that failed and why.
type Error struct {
	Object string // the store URL and key
	Err    error  // ErrUnauthenticated or ErrForged
	Detail string
	// Untagged: the object carries no tag at all.
	Untagged bool
}

func (e *Error) Error() string {
	msg := e.Object + " " + e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Options configure a Store.
type Options struct {
	// Keys sign every object written and verify what is read; a read
	// succeeds when the tag of any one of them matches.
	Keys []Key
	// Allow lets unauthenticated and forged objects through, reporting
	// each to Warn: the admin's override, to read snapshots from before
	// the upgrade.
	Allow bool
	// Legacy lets the marker, the head and records without any tag
	// through (reported to Warn), never a forged one and never a
	// manifest: a snapshot taken over a store from before authentication
	// reads its head but takes a full snapshot (see repo.Head.Seq).
	Legacy bool
	// Warn hears about every object let through unauthenticated.
	Warn func(err error)
}

// Store signs the marker, the head, records and manifests written
// through it and verifies them when read; other objects pass unchanged.
// It wraps the backend directly, beneath encryption, so a manifest's tag
// covers its stored (encrypted) bytes and is checked before decryption
// finishes.
type Store struct {
	inner store.Store
	o     Options
}

// Wrap returns a Store over inner; with no keys it only passes through.
func Wrap(inner store.Store, o Options) *Store {
	return &Store{inner: inner, o: o}
}

// Unwrap returns the store beneath s (s itself when it is not a Store):
// for reading what an object claims before deciding how to verify it.
func Unwrap(s store.Store) store.Store {
	if a, ok := s.(*Store); ok {
		return a.inner
	}
	return s
}

// KeyIDs names the keys s holds.
func (s *Store) KeyIDs() []string {
	ids := make([]string, len(s.o.Keys))
	for i, k := range s.o.Keys {
		ids[i] = k.ID
	}
	return ids
}

// isJSON tells the small JSON objects that carry their tags inside:
// the marker, the head and records.
func isJSON(key string) bool {
	return key == repo.MarkerKey || key == repo.HeadKey || repo.IsRecordKey(key)
}

// tagsField is appended to a JSON object's own bytes: the tags cover
// exactly what the writer wrote, and a reader gets those bytes back.
const tagsField = `,"macs":`

func (s *Store) sign(key string, data []byte) ([]byte, error) {
	if len(s.o.Keys) == 0 {
		return data, nil
	}
	t := bytes.TrimSpace(data)
	if len(t) < 2 || t[len(t)-1] != '}' || bytes.Equal(t, []byte("{}")) {
		return nil, fmt.Errorf("sign %s: not a JSON object", repo.Name(s.inner, key))
	}
	tags := map[string]string{}
	for _, k := range s.o.Keys {
		h := k.mac()
		domain(h, key)
		h.Write(t)
		tags[k.ID] = hex.EncodeToString(h.Sum(nil))
	}
	enc, _ := json.Marshal(tags)
	out := append(slices.Clip(t[:len(t)-1]), tagsField...)
	out = append(out, enc...)
	return append(out, '}'), nil
}

// split separates a stored JSON object into the writer's bytes and its
// tags (nil when it has none).
func split(stored []byte) ([]byte, map[string]string) {
	t := bytes.TrimSpace(stored)
	i := bytes.LastIndex(t, []byte(tagsField+"{"))
	if i < 0 || t[len(t)-1] != '}' {
		return stored, nil
	}
	var tags map[string]string
	if json.Unmarshal(t[i+len(tagsField):len(t)-1], &tags) != nil || len(tags) == 0 {
		return stored, nil
	}
	return append(slices.Clip(t[:i]), '}'), tags
}

// check compares tags with what sum computes for the first key that has
// one.
func (s *Store) check(key string, tags map[string]string, sum func(Key) []byte) error {
	for _, k := range s.o.Keys {
		t, ok := tags[k.ID]
		if !ok {
			continue
		}
		want, err := hex.DecodeString(t)
		if err != nil || !hmac.Equal(want, sum(k)) {
			return &Error{Object: repo.Name(s.inner, key), Err: ErrForged, Detail: "its tag for key " + k.ID + " does not match its content"}
		}
		return nil
	}
	if len(tags) == 0 {
		return &Error{Object: repo.Name(s.inner, key), Err: ErrUnauthenticated, Untagged: true,
			Detail: "it carries no tag (written before the store was authenticated, or planted)"}
	}
	return &Error{Object: repo.Name(s.inner, key), Err: ErrUnauthenticated,
		Detail: fmt.Sprintf("it is tagged by keys %s and this command holds %s: give it the age identity or the authentication key file the sidecar tags with",
			strings.Join(slices.Sorted(maps.Keys(tags)), ", "), strings.Join(s.KeyIDs(), ", "))}
}

// pass decides on a failed check: the error, or nil when the options let
// the object through (reported).
func (s *Store) pass(err error, manifest bool) error {
	if err == nil {
		return nil
	}
	var ae *Error
	if s.o.Allow || (s.o.Legacy && !manifest && errors.As(err, &ae) && ae.Untagged) {
		if s.o.Warn != nil {
			s.o.Warn(err)
		}
		return nil
	}
	return err
}

func (s *Store) verifyJSON(ctx context.Context, key string, stored []byte) ([]byte, error) {
	data, tags := split(stored)
	err := s.check(key, tags, func(k Key) []byte {
		h := k.mac()
		domain(h, key)
		h.Write(data)
		return h.Sum(nil)
	})
	var ae *Error
	if s.o.Legacy && !s.o.Allow && key == repo.HeadKey && errors.As(err, &ae) && ae.Untagged {
		// An untagged head is the upgrade's, unless the store already
		// holds a tagged record: then someone put it there to make the
		// next snapshot start the commit count anew.
		if id, serr := s.taggedRecord(ctx); serr != nil {
			return nil, serr
		} else if id != "" {
			ae.Detail = "it carries no tag, and the store holds the authenticated record of snapshot " + id + ": someone with write access to the bucket replaced it"
			return nil, ae
		}
	}
	if err := s.pass(err, false); err != nil {
		return nil, err
	}
	if err != nil && key == repo.HeadKey {
		data = untrusted(data)
	}
	return data, nil
}

// untrusted drops the commit count of a head let through unverified: the
// next snapshot then trusts nothing from it but its ID (a full snapshot,
// snapshot.Options.Authenticated), and the count starts anew rather than
// from a number anyone could have written. A store written without a key
// has counted all along.
func untrusted(head []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(head, &fields) != nil {
		return head // repo.LoadHead names the damage
	}
	delete(fields, "seq")
	out, _ := json.Marshal(fields)
	return out
}

// taggedRecord returns the ID of a record that verifies, if any.
func (s *Store) taggedRecord(ctx context.Context) (string, error) {
	var ids []string
	err := s.inner.List(ctx, repo.SnapshotPrefix, func(o store.Object) error {
		if h, ok := repo.ParseKey(o.Key); ok && h.Kind == repo.KindRecord {
			ids = append(ids, h.ID)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	for _, id := range slices.Backward(ids) { // the newest first: tagged ones are newer
		data, _, err := s.inner.Load(ctx, repo.RecordKey(id))
		if errors.Is(err, store.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		d, tags := split(data)
		if len(tags) > 0 && s.check(repo.RecordKey(id), tags, func(k Key) []byte {
			h := k.mac()
			domain(h, repo.RecordKey(id))
			h.Write(d)
			return h.Sum(nil)
		}) == nil {
			return id, nil
		}
	}
	return "", nil
}

func (s *Store) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	data, v, err := s.inner.Load(ctx, key)
	if err != nil || len(s.o.Keys) == 0 {
		return data, v, err
	}
	switch {
	case isJSON(key):
		data, err = s.verifyJSON(ctx, key, data)
	case repo.IsManifestKey(key):
		err = s.verifyBytes(ctx, key, data)
	}
	if err != nil {
		return nil, "", err
	}
	return data, v, nil
}

func (s *Store) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	if isJSON(key) {
		signed, err := s.sign(key, data)
		if err != nil {
			return "", err
		}
		return s.inner.Swap(ctx, key, signed, old)
	}
	if repo.IsManifestKey(key) && len(s.o.Keys) > 0 {
		return "", fmt.Errorf("swap %s: manifests are written with Put", repo.Name(s.inner, key))
	}
	return s.inner.Swap(ctx, key, data, old)
}

// maxJSON bounds the small JSON objects read whole for signing.
const maxJSON = 16 << 20

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	switch {
	case len(s.o.Keys) == 0:
		return s.inner.Put(ctx, key, r)
	case isJSON(key):
		data, err := io.ReadAll(io.LimitReader(r, maxJSON))
		if err != nil {
			return err
		}
		signed, err := s.sign(key, data)
		if err != nil {
			return err
		}
		return s.inner.Put(ctx, key, bytes.NewReader(signed))
	case repo.IsManifestKey(key):
		macs := s.macs(key)
		w := make([]io.Writer, len(macs))
		for i, h := range macs {
			w[i] = h
		}
		if err := s.inner.Put(ctx, key, io.TeeReader(r, io.MultiWriter(w...))); err != nil {
			return err
		}
		return s.putTags(ctx, key, macs)
	}
	return s.inner.Put(ctx, key, r)
}

// layerTags is the object beside a manifest layer: which stored object
// its tags cover, and the tags.
type layerTags struct {
	Object string            `json:"object"`
	MACs   map[string]string `json:"macs"`
}

func (s *Store) macs(key string) []hash.Hash {
	macs := make([]hash.Hash, len(s.o.Keys))
	for i, k := range s.o.Keys {
		macs[i] = k.mac()
		domain(macs[i], key)
	}
	return macs
}

func (s *Store) putTags(ctx context.Context, key string, macs []hash.Hash) error {
	lt := layerTags{Object: key, MACs: map[string]string{}}
	for i, k := range s.o.Keys {
		lt.MACs[k.ID] = hex.EncodeToString(macs[i].Sum(nil))
	}
	data, _ := json.Marshal(lt)
	tk := repo.ManifestMACKey(key)
	if err := s.inner.Put(ctx, tk, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("write the tags of %s: %w", repo.Name(s.inner, key), err)
	}
	return nil
}

// loadTags reads the tags of a manifest layer; none when they are absent
// or name another object.
func (s *Store) loadTags(ctx context.Context, key string) (map[string]string, error) {
	data, _, err := s.inner.Load(ctx, repo.ManifestMACKey(key))
	if errors.Is(err, store.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var lt layerTags
	if json.Unmarshal(data, &lt) != nil || lt.Object != key {
		return nil, nil
	}
	return lt.MACs, nil
}

func (s *Store) verifyBytes(ctx context.Context, key string, data []byte) error {
	tags, err := s.loadTags(ctx, key)
	if err != nil {
		return err
	}
	return s.pass(s.check(key, tags, func(k Key) []byte {
		h := k.mac()
		domain(h, key)
		h.Write(data)
		return h.Sum(nil)
	}), true)
}

// Get verifies a whole manifest before it returns it: a reader stages the
// files a manifest lists as it decodes them, so a forged one could fill
// the disk up to the sizes it claims before a tag at its end is judged.
// The tags cover the whole stored object: one of up to maxHeldManifest
// bytes is held in memory from the read that verified it; a larger one is
// read to its end for the verdict and then once more for the caller,
// verified again as it streams (its last Read returns the verdict instead
// of io.EOF, in case the object was replaced in between). Ranged reads
// (an age header, a manifest's header for a partial record) pass
// unverified: nothing is restored from them.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if len(s.o.Keys) == 0 || !repo.IsManifestKey(key) || offset != 0 || length >= 0 {
		return s.inner.Get(ctx, key, offset, length)
	}
	tags, err := s.loadTags(ctx, key)
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 || !s.holdsOne(tags) {
		if err := s.pass(s.check(key, tags, nil), true); err != nil {
			return nil, err
		}
		return s.inner.Get(ctx, key, offset, length)
	}
	v, err := s.verified(ctx, key, tags)
	if err != nil {
		return nil, err
	}
	held, large, err := hold(v)
	if large {
		_, err = io.Copy(io.Discard, v)
	}
	v.Close()
	switch {
	case err != nil:
		return nil, err
	case large:
		return s.verified(ctx, key, tags)
	}
	return io.NopCloser(io.MultiReader(held...)), nil
}

// hold reads r to its end in blocks (no copy as it grows), unless it is
// larger than maxHeldManifest.
func hold(r io.Reader) (held []io.Reader, large bool, err error) {
	const block = 1 << 20
	for total := 0; ; {
		b := make([]byte, block)
		n, err := io.ReadFull(r, b)
		total += n
		if n > 0 {
			held = append(held, bytes.NewReader(b[:n]))
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return held, false, nil
		case err != nil:
			return nil, false, err
		case total > maxHeldManifest:
			return nil, true, nil
		}
	}
}

// maxHeldManifest is the largest manifest layer Get holds in memory
// rather than reading it twice: a full manifest of about 300,000 paths.
const maxHeldManifest = 16 << 20

// verified opens a whole manifest through its tags' MACs.
func (s *Store) verified(ctx context.Context, key string, tags map[string]string) (*verifying, error) {
	rc, err := s.inner.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	return &verifying{rc: rc, s: s, key: key, tags: tags, macs: s.macs(key)}, nil
}

func (s *Store) holdsOne(tags map[string]string) bool {
	for _, k := range s.o.Keys {
		if _, ok := tags[k.ID]; ok {
			return true
		}
	}
	return false
}

type verifying struct {
	rc   io.ReadCloser
	s    *Store
	key  string
	tags map[string]string
	macs []hash.Hash
	err  error
}

func (v *verifying) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	for _, h := range v.macs {
		h.Write(p[:n])
	}
	if err == io.EOF {
		verr := v.s.check(v.key, v.tags, func(k Key) []byte {
			return v.macs[slices.IndexFunc(v.s.o.Keys, func(x Key) bool { return x.ID == k.ID })].Sum(nil)
		})
		if verr = v.s.pass(verr, true); verr != nil {
			v.err = verr
			return n, verr
		}
	}
	return n, err
}

func (v *verifying) Close() error { return v.rc.Close() }

// Delete removes a manifest's tags with it.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	all := slices.Clone(keys)
	for _, k := range keys {
		if repo.IsManifestKey(k) {
			if tk := repo.ManifestMACKey(k); !slices.Contains(all, tk) {
				all = append(all, tk)
			}
		}
	}
	return s.inner.Delete(ctx, all...)
}

func (s *Store) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	return s.inner.List(ctx, prefix, fn)
}

func (s *Store) String() string { return s.inner.String() }

func (s *Store) Close() error { return s.inner.Close() }

var _ store.Store = (*Store)(nil)
