package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/store"
)

// ErrMissingManifest marks a snapshot whose manifest, or a layer its
// delta manifest needs, is not in the store: another snapshot may be whole.
var ErrMissingManifest = errors.New("is missing")

// OpenManifest opens snapshot id's manifest as a stream of its resolved
// entries. A delta manifest's header names the chain of manifests it
// applies to; they are opened together and merged in path order, each
// checked to be the snapshot the chain names. A missing or damaged layer
// is an archive.ErrCorrupt error naming its object.
//
// hint, when given, is the chain the snapshot's record names
// (Record.Layers): its layers are requested together with id's own, a
// round trip before the header could name them. The header still
// decides: a hinted layer it does not name is closed unread, and one it
// names that the hint lacks is opened once the header is read.
func OpenManifest(ctx context.Context, s store.Store, id string, hint ...string) (*archive.ChainReader, error) {
	type layer struct {
		m   *archive.ManifestReader
		err error
	}
	opened := map[string]*layer{} // by snapshot ID; written here, filled by g's goroutines
	// Not errgroup.WithContext: its context ends with Wait, and the layers
	// are read long after.
	var g errgroup.Group
	g.SetLimit(loadParallelism)
	open := func(lid string) {
		l := &layer{}
		opened[lid] = l
		g.Go(func() error {
			l.m, l.err = openLayer(ctx, s, lid, id)
			return nil
		})
	}
	closeAll := func(keep map[string]bool) {
		for lid, l := range opened {
			if l.m != nil && !keep[lid] {
				l.m.Close()
			}
		}
	}
	open(id)
	if usableHint(hint, id) {
		for _, lid := range hint[:len(hint)-1] {
			open(lid)
		}
	}
	g.Wait()
	top := opened[id]
	if top.err != nil {
		closeAll(nil)
		return nil, top.err
	}
	ids := top.m.Header.Layers()
	names := make([]string, len(ids))
	for i, lid := range ids {
		names[i] = Name(s, ManifestKey(lid))
		if err := CheckID(lid); err != nil {
			g.Wait()
			closeAll(nil)
			return nil, fmt.Errorf("%s: %w manifest header: chain names %v", names[len(ids)-1], archive.ErrCorrupt, err)
		}
		if opened[lid] == nil {
			open(lid)
		}
	}
	g.Wait()
	layers := make([]*archive.ManifestReader, len(ids))
	keep := map[string]bool{}
	for i, lid := range ids {
		if err := opened[lid].err; err != nil {
			closeAll(nil)
			return nil, err
		}
		layers[i], keep[lid] = opened[lid].m, true
	}
	closeAll(keep) // hinted layers the header does not name
	return archive.NewChainReader(layers, names)
}

// usableHint: hint could be the chain of snapshot id (see OpenManifest).
func usableHint(hint []string, id string) bool {
	if len(hint) < 2 || len(hint) > maxHint || hint[len(hint)-1] != id {
		return false
	}
	seen := map[string]bool{}
	for _, lid := range hint {
		if seen[lid] || CheckID(lid) != nil {
			return false
		}
		seen[lid] = true
	}
	return true
}

// maxHint bounds the layers a hint opens: as many as a manifest header
// may name (archive's bound).
const maxHint = 256

// ManifestEntries yields the resolved entries of snapshot id's manifest
// chain (see OpenManifest) in path order; an error, which names the object
// at fault, is yielded once and ends it. The manifest is closed when the
// loop ends.
func ManifestEntries(ctx context.Context, s store.Store, id string) iter.Seq2[*archive.Entry, error] {
	return func(yield func(*archive.Entry, error) bool) {
		m, err := OpenManifest(ctx, s, id)
		if err != nil {
			yield(nil, err)
			return
		}
		defer m.Close()
		for e, err := range Entries(m.Next) {
			if !yield(e, err) {
				return
			}
		}
	}
}

// Entries turns a manifest reader's Next into an iterator: io.EOF ends it,
// any other error is yielded once and ends it.
func Entries(next func() (*archive.Entry, error)) iter.Seq2[*archive.Entry, error] {
	return func(yield func(*archive.Entry, error) bool) {
		for {
			e, err := next()
			if errors.Is(err, io.EOF) || !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// openLayer opens the manifest of snapshot id, a layer that snapshot of
// needs.
func openLayer(ctx context.Context, s store.Store, id, of string) (*archive.ManifestReader, error) {
	key := ManifestKey(id)
	rc, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		if errors.Is(err, store.ErrNotExist) && id == of {
			return nil, fmt.Errorf("%w store: the manifest of snapshot %s %w (%s)", archive.ErrCorrupt, id, ErrMissingManifest, Name(s, key))
		}
		if errors.Is(err, store.ErrNotExist) {
			return nil, fmt.Errorf("%w store: %s %w: snapshot %s's manifest is a delta that needs it", archive.ErrCorrupt, Name(s, key), ErrMissingManifest, of)
		}
		return nil, err
	}
	m, err := archive.NewManifestReader(&closeAtEnd{ReadCloser: rc})
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: %w", Name(s, key), err)
	}
	if m.Header.ID != id {
		m.Close()
		return nil, fmt.Errorf("%s: %w manifest: it describes snapshot %q", Name(s, key), archive.ErrCorrupt, m.Header.ID)
	}
	return m, nil
}

// closeAtEnd closes the store reader once the manifest hits EOF or an
// error, which frees the connection before the caller is done with the
// entries; the manifest's Close closes it otherwise, and only once.
type closeAtEnd struct {
	io.ReadCloser
	closed bool
}

func (r *closeAtEnd) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil {
		r.Close()
	}
	return n, err
}

func (r *closeAtEnd) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.ReadCloser.Close()
}

// OpenLayer opens snapshot id's own manifest, one layer of a chain, without
// the layers below it: a repack rewrites layers one by one.
func OpenLayer(ctx context.Context, s store.Store, id string) (*archive.ManifestReader, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	return openLayer(ctx, s, id, id)
}
