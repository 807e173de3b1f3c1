package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// ConsolidatePolicy bounds what a restore of the head must read. Every
// incremental snapshot adds an archive the head may point into, and files
// replaced since leave dead bytes in old archives; consolidation rewrites
// the live files of the smallest or mostly-dead archives into one new
// archive, copying their bytes from the store (never re-reading the home),
// and commits a snapshot of the same tree that points at it.
type ConsolidatePolicy struct {
	// MaxArchives: when the head points into more archives, the smallest
	// are merged until half as many remain. 0 turns consolidation off.
	MaxArchives int
	// MinLive: an archive whose live bytes are below this fraction of its
	// size is rewritten too (0 means 0.5).
	MinLive float64
}

// Consolidate applies p to the head, taking a consolidating snapshot when
// it is due (o gives the store, workers and level; o.Home is not read). It
// returns an Unchanged result when nothing was due.
func Consolidate(ctx context.Context, o SnapshotOptions, p ConsolidatePolicy) (*SnapshotResult, error) {
	if p.MaxArchives <= 0 {
		return &SnapshotResult{Unchanged: true}, nil
	}
	if p.MinLive <= 0 {
		p.MinLive = 0.5
	}
	head, _, err := repo.LoadHead(ctx, o.Store)
	if err != nil || head == nil || !slices.Equal(head.Recipients, o.Recipients) {
		// No snapshot yet, or the next one is a full one anyway.
		return &SnapshotResult{Unchanged: true}, err
	}
	live, err := liveBytes(ctx, o.Store, head.Snapshot)
	if err != nil {
		return nil, err
	}
	size := map[string]int64{}
	err = o.Store.List(ctx, "archives/", func(obj store.Object) error {
		id := strings.TrimSuffix(strings.TrimPrefix(obj.Key, "archives/"), ".tar.zst")
		if _, ok := live[id]; ok {
			size[id] = obj.Size
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rewrite := chooseRewrite(live, size, p)
	if len(rewrite) == 0 {
		return &SnapshotResult{Parent: head.Snapshot, Unchanged: true}, nil
	}
	o.rewrite = map[string]bool{}
	for _, id := range rewrite {
		o.rewrite[id] = true
	}
	o.Log.Info().Str("head", head.Snapshot).Int("archives", len(live)).Strs("rewrite", rewrite).
		Msg("consolidating: copying the live files of these archives into one")
	return Snapshot(ctx, o)
}

// liveBytes sums, per archive, the byte ranges the snapshot's files use.
func liveBytes(ctx context.Context, st store.Store, id string) (map[string]int64, error) {
	m, err := openManifest(ctx, st, id)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	live := map[string]int64{}
	for {
		e, err := m.Next()
		if errors.Is(err, io.EOF) {
			return live, nil
		}
		if err != nil {
			return nil, err // it names the manifest layer at fault
		}
		if e.HasData() {
			live[e.Archive] += e.Length
		}
	}
}

// chooseRewrite picks the archives to rewrite: those mostly dead, then the
// smallest until at most half of MaxArchives would remain, counting the
// new one.
func chooseRewrite(live, size map[string]int64, p ConsolidatePolicy) []string {
	ids := make([]string, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(live[a], live[b]), cmp.Compare(a, b)) })
	chosen, dead := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		if size[id] > 0 && float64(live[id]) < p.MinLive*float64(size[id]) {
			chosen[id], dead[id] = true, true
		}
	}
	remain := func() int {
		n := len(ids) - len(chosen)
		if len(chosen) > 0 {
			n++ // the new archive
		}
		return n
	}
	if remain() > p.MaxArchives {
		for _, id := range ids {
			if remain() <= max(p.MaxArchives/2, 1) {
				break
			}
			chosen[id] = true
		}
	}
	var out []string
	for _, id := range ids {
		if chosen[id] {
			out = append(out, id)
		}
	}
	if len(out) == 1 && !dead[out[0]] {
		return nil // rewriting one healthy archive into another gains nothing
	}
	slices.Sort(out)
	return out
}

// copyFromStore adds a file whose bytes are copied from the archive its
// entry points into, checked against the entry's hash.
func (s *snapshotter) copyFromStore(ctx context.Context, fw *archive.FrameWriter, it *item, buf []byte) error {
	e := it.e
	key := repo.ArchiveKey(e.Archive)
	where := fmt.Sprintf("%s (bytes %d-%d)", repo.Name(s.o.Store, key), e.Offset, e.Offset+e.Length-1)
	rc, err := s.o.Store.Get(ctx, key, e.Offset, e.Length)
	if err != nil {
		return fmt.Errorf("consolidate: read %s: %w", where, err)
	}
	defer rc.Close()
	tr, err := archive.NewRangeReader(rc, archive.MaxDecoded(1, e.Size))
	if err != nil {
		return fmt.Errorf("consolidate: read %s: %w", where, err)
	}
	defer tr.Close()
	for {
		hdr, err := tr.Next()
		if err != nil {
			return fmt.Errorf("consolidate: %w archive %s: %v before %q was found", archive.ErrCorrupt, where, err, e.Path)
		}
		if hdr.Name == e.Path {
			if hdr.Size != e.Size {
				return fmt.Errorf("consolidate: %w archive %s: %q has %d bytes, the manifest says %d", archive.ErrCorrupt, where, e.Path, hdr.Size, e.Size)
			}
			break
		}
	}
	if err := fw.WriteHeader(e); err != nil {
		return err
	}
	it.first = fw.Frame()
	h := sha256.New()
	n, err := io.CopyBuffer(fw, io.TeeReader(io.LimitReader(tr, e.Size), h), buf)
	if err != nil {
		return fmt.Errorf("consolidate: read %s: %w", where, err)
	}
	if n != e.Size {
		return fmt.Errorf("consolidate: %w archive %s: %q ends after %d of %d bytes", archive.ErrCorrupt, where, e.Path, n, e.Size)
	}
	it.last = fw.Frame()
	var sum archive.Hash
	h.Sum(sum[:0])
	if e.Hash == nil || sum != *e.Hash {
		return fmt.Errorf("consolidate: %w archive %s: %q does not match its hash", archive.ErrCorrupt, where, e.Path)
	}
	return nil
}
