package auth

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// Bind gives an authenticated store from before identities (format 3)
// its identity, moving it to format 4: a random ID in the marker, which
// every tag written from then on covers, and the tags its head, records
// and manifest layers carry now (LegacyTags), which stay accepted for
// those objects only. From then on an object copied from another store
// with the same key is refused, a format 3 one included. It rewrites
// nothing but the marker, which it reads verified, so it vouches for no
// object it did not authenticate: a listed tag still has to verify.
// It reports whether it bound the store; a store that has an identity,
// is not authenticated (it gets one when it is) or has no marker is left
// as it is.
func (s *Store) Bind(ctx context.Context) (bool, error) {
	if len(s.o.Keys) == 0 {
		return false, nil
	}
	for try := 0; ; try++ {
		m, v, err := repo.LoadMarker(ctx, s)
		if err != nil || m == nil || !m.Authenticated || m.ID != "" {
			return false, err
		}
		tags, err := s.currentTags(ctx)
		if err != nil {
			return false, err
		}
		m.Homesnap, m.ID, m.LegacyTags = repo.FormatVersion, repo.NewStoreID(), tags
		_, err = repo.SaveMarker(ctx, s, m, v)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, store.ErrPrecondition) || try == 2 {
			return false, err
		}
	}
}

// currentTags lists, sorted, the first legacyDigits hex digits of every
// tag of the keys s holds on the head, the records and the manifest
// layers' tag objects.
func (s *Store) currentTags(ctx context.Context) ([]string, error) {
	keys := []string{repo.HeadKey}
	err := repo.List(ctx, s.inner, func(h repo.Handle, _ store.Object) error {
		keys = append(keys, h.Key())
		return nil
	}, repo.KindRecord, repo.KindTag)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	found := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, key := range keys {
		g.Go(func() error {
			data, _, err := s.inner.Load(gctx, key)
			if errors.Is(err, store.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			var tags map[string]string
			if key == repo.HeadKey || repo.IsRecordKey(key) {
				if _, claimed, t := split(data); claimed == "" {
					tags = t
				}
			} else {
				var lt layerTags
				if json.Unmarshal(data, &lt) == nil && lt.Store == "" {
					tags = lt.MACs
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range s.o.Keys {
				if t := tags[k.ID]; len(t) >= legacyDigits {
					found[t[:legacyDigits]] = true
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(found))
	for t := range found {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}
