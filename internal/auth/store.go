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
	"sync"

	"golang.org/x/sync/errgroup"

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
	// letThrough holds the records last read without authentication
	// (Legacy, Allow): they are never tagged again, so that maintenance,
	// which rewrites records it read, cannot vouch for what a bucket
	// writer wrote.
	mu         sync.Mutex
	letThrough map[string]bool
	// bind is the store's identity as its verified marker gives it,
	// once known (known).
	bind  binding
	known bool
	from  *Store // see Rekey
}

// binding is what a store's marker says about its identity.
type binding struct {
	id string // "" for a store from before identities (format 3)
	// legacy are the format 3 tags accepted in a store with an identity
	// (repo.Marker.LegacyTags).
	legacy map[string]bool
}

// Wrap returns a Store over inner; with no keys it only passes through.
func Wrap(inner store.Store, o Options) *Store {
	return &Store{inner: inner, o: o}
}

// Rekey returns a Store over the same backend that tags with keys (a
// rotation's new ones) and verifies with them, and that takes the
// store's identity from s, which holds the keys the marker is tagged with
// until the rotation ends.
func (s *Store) Rekey(keys []Key) *Store {
	return &Store{inner: s.inner, o: Options{Keys: keys}, from: s}
}

// Unwrap returns the store s verifies: beneath it, what an object
// claims is read before deciding how to verify it
// (store.Beneath[*auth.Store]).
func (s *Store) Unwrap() store.Store { return s.inner }

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

// ErrRetag refuses to tag a record that was read without authentication.
var ErrRetag = errors.New("was read without authentication, and is never tagged anew")

// note records whether key was last read authenticated.
func (s *Store) note(key string, authentic bool) {
	if !repo.IsRecordKey(key) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if authentic {
		delete(s.letThrough, key)
		return
	}
	if s.letThrough == nil {
		s.letThrough = map[string]bool{}
	}
	s.letThrough[key] = true
}

// retag decides on rewriting a record: a record read without
// authentication keeps no tag (written as is, with a warning) when the
// admin's override is on, and stops the writer otherwise.
func (s *Store) retag(key string) (sign bool, err error) {
	s.mu.Lock()
	tainted := s.letThrough[key]
	s.mu.Unlock()
	if !tainted {
		return true, nil
	}
	err = &Error{Object: repo.Name(s.inner, key), Err: ErrUnauthenticated, Detail: "its record " + ErrRetag.Error() +
		" (maintenance tags only what it authenticated). If the snapshot predates the store's authentication, run `prune` with --allow-unauthenticated once: it rewrites such records without a tag, as they were; otherwise someone with write access to the bucket wrote it: keep it for inspection, and delete the record (the snapshot is then listed from its manifest)"}
	if !s.o.Allow {
		return false, err
	}
	if s.o.Warn != nil {
		s.o.Warn(err)
	}
	return false, nil
}

// tagsField is appended to a JSON object's own bytes: the tags cover
// exactly what the writer wrote, and a reader gets those bytes back. In a
// store with an identity, storeField comes first: the identity the tags
// are for, so that a copy from another store is named as such.
const (
	tagsField  = `,"macs":`
	storeField = `,"store":"`
)

func (s *Store) sign(ctx context.Context, key string, data []byte) ([]byte, error) {
	if len(s.o.Keys) == 0 {
		return data, nil
	}
	if sign, err := s.retag(key); !sign {
		return data, err
	}
	t := bytes.TrimSpace(data)
	if len(t) < 2 || t[len(t)-1] != '}' || bytes.Equal(t, []byte("{}")) {
		return nil, fmt.Errorf("sign %s: not a JSON object", repo.Name(s.inner, key))
	}
	var id string
	if key == repo.MarkerKey { // the identity it is about to give
		var m repo.Marker
		json.Unmarshal(t, &m)
		id = m.ID
	} else {
		b, err := s.bound(ctx)
		if err != nil {
			return nil, err
		}
		id = b.id
	}
	tags := map[string]string{}
	for _, k := range s.o.Keys {
		h := k.mac()
		domain(h, id, key)
		h.Write(t)
		tags[k.ID] = hex.EncodeToString(h.Sum(nil))
	}
	enc, _ := json.Marshal(tags)
	out := slices.Clip(t[:len(t)-1])
	if id != "" {
		out = append(append(append(out, storeField...), id...), '"')
	}
	out = append(out, tagsField...)
	out = append(out, enc...)
	return append(out, '}'), nil
}

// split separates a stored JSON object into the writer's bytes, the
// identity its tags are for ("" before identities) and its tags (nil when
// it has none).
func split(stored []byte) ([]byte, string, map[string]string) {
	t := bytes.TrimSpace(stored)
	i := bytes.LastIndex(t, []byte(tagsField+"{"))
	if i < 0 || t[len(t)-1] != '}' {
		return stored, "", nil
	}
	var tags map[string]string
	if json.Unmarshal(t[i+len(tagsField):len(t)-1], &tags) != nil || len(tags) == 0 {
		return stored, "", nil
	}
	body, id := t[:i], ""
	if j := bytes.LastIndex(body, []byte(storeField)); j >= 0 && body[len(body)-1] == '"' {
		if c := string(body[j+len(storeField) : len(body)-1]); repo.IsStoreID(c) {
			body, id = body[:j], c
		}
	}
	return append(slices.Clip(body), '}'), id, tags
}

// check compares tags with what sum computes for the first key that has
// one, and returns the tag that matched.
func (s *Store) check(key string, tags map[string]string, sum func(Key) []byte) (string, error) {
	for _, k := range s.o.Keys {
		t, ok := tags[k.ID]
		if !ok {
			continue
		}
		want, err := hex.DecodeString(t)
		if err != nil || !hmac.Equal(want, sum(k)) {
			return "", &Error{Object: repo.Name(s.inner, key), Err: ErrForged, Detail: "its tag for key " + k.ID + " does not match its content in this store"}
		}
		return t, nil
	}
	if len(tags) == 0 {
		return "", &Error{Object: repo.Name(s.inner, key), Err: ErrUnauthenticated, Untagged: true,
			Detail: "it carries no tag (written before the store was authenticated, or planted)"}
	}
	return "", &Error{Object: repo.Name(s.inner, key), Err: ErrUnauthenticated,
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

// legacyDigits is how much of a format 3 tag a marker keeps
// (repo.Marker.LegacyTags): 128 bits.
const legacyDigits = 32

// expect tells how an object whose tags claim identity claimed is
// verified in this store: under which identity, and whether its tag must
// be one of legacy (a format 3 tag in a store with an identity).
func (s *Store) expect(ctx context.Context, key, claimed string) (id string, legacy map[string]bool, err error) {
	b, err := s.bound(ctx)
	switch {
	case err != nil:
		return "", nil, err
	case claimed == b.id:
		return b.id, nil, nil
	case claimed == "":
		return "", b.legacy, nil
	case b.id == "":
		return "", nil, &Error{Object: repo.Name(s.inner, key), Err: ErrForged, Detail: "it is tagged for store " + claimed +
			", and this store's marker names no identity: copied from another store with the same key, or someone put back the marker from before this store got its identity"}
	}
	return "", nil, &Error{Object: repo.Name(s.inner, key), Err: ErrForged, Detail: "it is tagged for store " + claimed +
		", and this is store " + b.id + ": copied from another store with the same key"}
}

// admit completes check for an object expect gave legacy tags for.
func (s *Store) admit(key string, legacy map[string]bool, tag string, err error) error {
	if err == nil && legacy != nil && !legacy[tag[:min(len(tag), legacyDigits)]] {
		return &Error{Object: repo.Name(s.inner, key), Err: ErrForged,
			Detail: "its tag is from before this store got its identity, and it was not in the store then: copied from another store with the same key"}
	}
	return err
}

// verify checks a stored JSON object (not the marker) and returns the
// writer's bytes.
func (s *Store) verify(ctx context.Context, key string, stored []byte) ([]byte, error) {
	data, claimed, tags := split(stored)
	id, legacy, err := s.expect(ctx, key, claimed)
	if err != nil {
		return data, err
	}
	tag, err := s.check(key, tags, func(k Key) []byte { return sumOf(k, id, key, data) })
	return data, s.admit(key, legacy, tag, err)
}

func sumOf(k Key, id, key string, data []byte) []byte {
	h := k.mac()
	domain(h, id, key)
	h.Write(data)
	return h.Sum(nil)
}

// verifyMarker checks the marker under the identity it names, and
// learns the store's binding from it.
func (s *Store) verifyMarker(stored []byte) ([]byte, error) {
	data, claimed, tags := split(stored)
	var m repo.Marker
	json.Unmarshal(data, &m)
	var err error
	if claimed != m.ID && len(tags) > 0 {
		err = &Error{Object: repo.Name(s.inner, repo.MarkerKey), Err: ErrForged, Detail: "it names identity " + m.ID + " and its tags are for " + claimed}
	} else {
		_, err = s.check(repo.MarkerKey, tags, func(k Key) []byte { return sumOf(k, m.ID, repo.MarkerKey, data) })
	}
	if err = s.pass(err, false); err != nil {
		return nil, err
	}
	s.learn(&m)
	return data, nil
}

// learn records the binding a verified or written marker gives.
func (s *Store) learn(m *repo.Marker) {
	b := binding{id: m.ID}
	if m.ID != "" {
		b.legacy = map[string]bool{}
		for _, t := range m.LegacyTags {
			b.legacy[t] = true
		}
	}
	s.mu.Lock()
	s.bind, s.known = b, true
	s.mu.Unlock()
}

// bound returns the store's binding, reading the marker once.
func (s *Store) bound(ctx context.Context) (binding, error) {
	s.mu.Lock()
	b, known := s.bind, s.known
	s.mu.Unlock()
	if known {
		return b, nil
	}
	if s.from != nil {
		return s.from.bound(ctx)
	}
	stored, _, err := s.inner.Load(ctx, repo.MarkerKey)
	if errors.Is(err, store.ErrNotExist) {
		return binding{}, nil // a new store: its marker is written through s
	}
	if err != nil {
		return binding{}, err
	}
	if _, err := s.verifyMarker(stored); err != nil {
		return binding{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bind, nil
}

func (s *Store) verifyJSON(ctx context.Context, key string, stored []byte) ([]byte, error) {
	if key == repo.MarkerKey {
		return s.verifyMarker(stored)
	}
	data, err := s.verify(ctx, key, stored)
	if key == repo.HeadKey && err == nil && !s.o.Allow {
		// A store without an identity holding a record tagged for one
		// had its marker put back from before it got one.
		if b, berr := s.bound(ctx); berr != nil {
			return nil, berr
		} else if b.id == "" {
			if id, claimed, serr := s.boundRecord(ctx); serr != nil {
				return nil, serr
			} else if id != "" {
				return nil, &Error{Object: repo.Name(s.inner, repo.MarkerKey), Err: ErrForged, Detail: "it names no store identity, and the store holds the record of snapshot " + id +
					" tagged for store " + claimed + ": someone put back the marker from before the store got its identity, or copied objects from another store with the same key"}
			}
		}
	}
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
	s.note(key, err == nil)
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
	err := repo.List(ctx, s.inner, func(h repo.Handle, _ store.Object) error {
		ids = append(ids, h.ID)
		return nil
	}, repo.KindRecord)
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
		if _, _, tags := split(data); len(tags) > 0 {
			if _, err := s.verify(ctx, repo.RecordKey(id), data); err == nil {
				return id, nil
			}
		}
	}
	return "", nil
}

// boundRecord returns a record tagged for a store identity, and that
// identity, when one verifies under it: evidence that the store had an
// identity. Every record is read (in parallel), since IDs need not sort
// by when they were tagged.
func (s *Store) boundRecord(ctx context.Context) (id, claimed string, err error) {
	var records []repo.Handle
	err = repo.List(ctx, s.inner, func(h repo.Handle, _ store.Object) error {
		records = append(records, h)
		return nil
	}, repo.KindRecord)
	if err != nil {
		return "", "", err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, h := range records {
		key := h.Key()
		g.Go(func() error {
			stored, _, err := s.inner.Load(gctx, key)
			if errors.Is(err, store.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			data, c, tags := split(stored)
			if c == "" {
				return nil
			}
			if _, err := s.check(key, tags, func(k Key) []byte { return sumOf(k, c, key, data) }); err == nil {
				mu.Lock()
				id, claimed = h.ID, c
				mu.Unlock()
			}
			return nil
		})
	}
	err = g.Wait()
	return id, claimed, err
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
		signed, err := s.sign(ctx, key, data)
		if err != nil {
			return "", err
		}
		v, err := s.inner.Swap(ctx, key, signed, old)
		if err == nil {
			s.wrote(key, data)
		}
		return v, err
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
		signed, err := s.sign(ctx, key, data)
		if err != nil {
			return err
		}
		if err := s.inner.Put(ctx, key, bytes.NewReader(signed)); err != nil {
			return err
		}
		s.wrote(key, data)
		return nil
	case repo.IsManifestKey(key):
		b, err := s.bound(ctx)
		if err != nil {
			return err
		}
		macs := s.macs(b.id, key)
		w := make([]io.Writer, len(macs))
		for i, h := range macs {
			w[i] = h
		}
		if err := s.inner.Put(ctx, key, io.TeeReader(r, io.MultiWriter(w...))); err != nil {
			return err
		}
		return s.putTags(ctx, b.id, key, macs)
	}
	return s.inner.Put(ctx, key, r)
}

// wrote learns the binding of a marker written through s.
func (s *Store) wrote(key string, data []byte) {
	if key != repo.MarkerKey || len(s.o.Keys) == 0 {
		return
	}
	var m repo.Marker
	if json.Unmarshal(data, &m) == nil {
		s.learn(&m)
	}
}

// layerTags is the object beside a manifest layer: which stored object
// its tags cover, and the tags.
type layerTags struct {
	Object string            `json:"object"`
	Store  string            `json:"store,omitempty"` // the identity the tags are for (format 4)
	MACs   map[string]string `json:"macs"`
}

func (s *Store) macs(id, key string) []hash.Hash {
	macs := make([]hash.Hash, len(s.o.Keys))
	for i, k := range s.o.Keys {
		macs[i] = k.mac()
		domain(macs[i], id, key)
	}
	return macs
}

func (s *Store) putTags(ctx context.Context, id, key string, macs []hash.Hash) error {
	lt := layerTags{Object: key, Store: id, MACs: map[string]string{}}
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

// loadTags reads the tags of a manifest layer and the identity they
// claim; none when they are absent or name another object.
func (s *Store) loadTags(ctx context.Context, key string) (map[string]string, string, error) {
	data, _, err := s.inner.Load(ctx, repo.ManifestMACKey(key))
	if errors.Is(err, store.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var lt layerTags
	if json.Unmarshal(data, &lt) != nil || lt.Object != key || lt.Store != "" && !repo.IsStoreID(lt.Store) {
		return nil, "", nil
	}
	return lt.MACs, lt.Store, nil
}

func (s *Store) verifyBytes(ctx context.Context, key string, data []byte) error {
	tags, claimed, err := s.loadTags(ctx, key)
	if err != nil {
		return err
	}
	id, legacy, err := s.expect(ctx, key, claimed)
	if err == nil {
		var tag string
		tag, err = s.check(key, tags, func(k Key) []byte { return sumOf(k, id, key, data) })
		err = s.admit(key, legacy, tag, err)
	}
	return s.pass(err, true)
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
	tags, claimed, err := s.loadTags(ctx, key)
	if err != nil {
		return nil, err
	}
	id, legacy, err := s.expect(ctx, key, claimed)
	if err != nil || len(tags) == 0 || !s.holdsOne(tags) {
		if err == nil {
			_, err = s.check(key, tags, nil)
		}
		if err := s.pass(err, true); err != nil {
			return nil, err
		}
		return s.inner.Get(ctx, key, offset, length)
	}
	v, err := s.verified(ctx, key, tags, id, legacy)
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
		return s.verified(ctx, key, tags, id, legacy)
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

// verified opens a whole manifest through its tags' MACs for the store
// identity id.
func (s *Store) verified(ctx context.Context, key string, tags map[string]string, id string, legacy map[string]bool) (*verifying, error) {
	rc, err := s.inner.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	return &verifying{rc: rc, s: s, key: key, tags: tags, legacy: legacy, macs: s.macs(id, key)}, nil
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
	rc     io.ReadCloser
	s      *Store
	key    string
	tags   map[string]string
	legacy map[string]bool
	macs   []hash.Hash
	err    error
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
		tag, verr := v.s.check(v.key, v.tags, func(k Key) []byte {
			return v.macs[slices.IndexFunc(v.s.o.Keys, func(x Key) bool { return x.ID == k.ID })].Sum(nil)
		})
		if verr = v.s.pass(v.s.admit(v.key, v.legacy, tag, verr), true); verr != nil {
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
