package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
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
// replaced since leave dead bytes in old archives; consolidation copies the
// live files of some archives into one new archive, from the store (never
// re-reading the home), and commits a snapshot of the same tree that points
// at it.
//
// Copying is not free: the snapshots retention still keeps point into the
// old archives, so every byte copied is stored twice until they age out.
// The choice is therefore size-tiered, as in an LSM tree: the small recent
// archives are merged, an archive is only copied again once the merge at
// least doubles what it joins, and a large archive (a quarter or more of
// what the head uses, such as the first full snapshot's) is only rewritten
// once most of it is dead.
type ConsolidatePolicy struct {
	// MaxArchives: when the head points into more archives, the cheapest
	// ones (fewest live bytes) are merged until at most this many remain,
	// and further while that stays cheap, down to half of it. 0 turns
	// consolidation off.
	MaxArchives int
	// MaxDead: an archive at least this fraction of which no file of the
	// head uses is rewritten too (0 means 0.5), alone only when that frees
	// a tenth of what the head's archives hold.
	MaxDead float64
}

// Shares of chooseRewrite's decisions.
const (
	// largeShare: an archive holding at least this share of the head's
	// live bytes is never merged just to lower the count.
	largeShare = 0.25
	// minReclaim: rewriting mostly dead archives alone, without a merge
	// due anyway, must free at least this share of the archives' bytes;
	// each consolidation stores a manifest and takes a retention slot.
	minReclaim = 0.1
)

// Consolidate applies p to the head, taking a consolidating snapshot when
// it is due (o gives the store, workers and level; o.Home is not read). It
// returns an Unchanged result when nothing was due.
func Consolidate(ctx context.Context, o SnapshotOptions, p ConsolidatePolicy) (*SnapshotResult, error) {
	if p.MaxArchives <= 0 {
		return &SnapshotResult{Unchanged: true}, nil
	}
	if p.MaxDead <= 0 {
		p.MaxDead = 0.5
	}
	head, _, err := repo.LoadHead(ctx, o.Store)
	if err != nil || head == nil || !slices.Equal(head.Recipients, o.Recipients) {
		// No snapshot yet, or the next one is a full one anyway.
		return &SnapshotResult{Unchanged: true}, err
	}
	// A head that points only into its own archive uses every byte of it:
	// there is nothing to merge or reclaim, and no need to read a manifest
	// of a million lines to learn so (the first full snapshot's case).
	if rec, err := repo.LoadRecord(ctx, o.Store, head.Snapshot); err == nil && slices.Equal(rec.Archives, []string{head.Snapshot}) {
		return &SnapshotResult{Parent: head.Snapshot, Unchanged: true}, nil
	}
	live, err := LiveBytes(ctx, o.Store, head.Snapshot)
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
	var copied int64
	for _, id := range rewrite {
		o.rewrite[id] = true
		copied += live[id]
	}
	o.Log.Info().Str("head", head.Snapshot).Int("archives", len(live)).Strs("rewrite", rewrite).Int64("live_bytes", copied).
		Msg("consolidating: copying the live files of these archives into one")
	return Snapshot(ctx, o)
}

// chooseRewrite picks the archives to rewrite, given per archive the bytes
// the head uses (live) and its stored size. It returns them sorted, or nil.
//
//   - An archive at least p.MaxDead dead is rewritten whenever a merge is
//     due, and alone when those archives' dead bytes are worth a snapshot.
//   - When more than p.MaxArchives would remain, archives are merged
//     cheapest first (fewest live bytes; ties: the larger, then by ID), skipping
//     large ones, until at most p.MaxArchives remain; then the next is
//     merged too while it holds no more live bytes than those merged so
//     far and more than half of p.MaxArchives remain. That doubling rule
//     bounds how often a byte is copied, as size-tiered compaction does.
func chooseRewrite(live, size map[string]int64, p ConsolidatePolicy) []string {
	ids := make([]string, 0, len(live))
	var totalLive, totalSize int64
	for id := range live {
		ids = append(ids, id)
		totalLive += live[id]
		totalSize += max(size[id], live[id])
	}
	slices.SortFunc(ids, func(a, b string) int {
		// For the same copy, the larger archive frees more dead bytes.
		return cmp.Or(cmp.Compare(live[a], live[b]), cmp.Compare(size[b], size[a]), cmp.Compare(a, b))
	})
	chosen := map[string]bool{}
	var merged, reclaim int64 // live bytes copied; dead bytes freed
	for _, id := range ids {
		if dead := size[id] - live[id]; size[id] > 0 && float64(dead) >= p.MaxDead*float64(size[id]) {
			chosen[id] = true
			merged += live[id]
			reclaim += dead
		}
	}
	if len(ids) <= p.MaxArchives {
		if float64(reclaim) < minReclaim*float64(totalSize) {
			return nil
		}
	} else {
		mergeCheapest(ids, live, chosen, merged, p.MaxArchives)
	}
	out := make([]string, 0, len(chosen))
	for id := range chosen {
		out = append(out, id)
	}
	if len(out) == 1 && reclaim == 0 {
		return nil // rewriting one healthy archive into another gains nothing
	}
	slices.Sort(out)
	return out
}

// mergeCheapest adds to chosen the archives of ids (sorted cheapest
// first, those chosen already included) to merge into one new archive, so
// that at most maxArchives remain, and further while each merge at least
// doubles what was merged and more than half of maxArchives remain
// (size-tiered: a byte is copied again only once what joins it is as
// large). An archive holding largeShare or more of ids' live bytes is
// never merged for the count. merged is the live bytes chosen already.
func mergeCheapest(ids []string, live map[string]int64, chosen map[string]bool, merged int64, maxArchives int) {
	var total int64
	for _, id := range ids {
		total += live[id]
	}
	remain := func() int {
		n, any := 0, false
		for _, id := range ids {
			if chosen[id] {
				any = true
			} else {
				n++
			}
		}
		if any {
			n++ // the new archive
		}
		return n
	}
	for _, id := range ids {
		if chosen[id] || float64(live[id]) >= largeShare*float64(total) {
			continue
		}
		if remain() <= maxArchives && (remain() <= max(maxArchives/2, 1) || live[id] > merged) {
			break
		}
		chosen[id] = true
		merged += live[id]
	}
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
			it.first, it.last, err = copyEntry(fw, tr, hdr.Size, e, buf, where)
			if err != nil {
				return fmt.Errorf("consolidate: %w", err)
			}
			return nil
		}
	}
}

// copyEntry copies the file e whose header tr has just read (size bytes
// of content, from where, for messages) into fw, checking its size and hash against the entry's,
// and returns the frames holding its header and its last byte.
func copyEntry(fw *archive.FrameWriter, tr io.Reader, size int64, e *archive.Entry, buf []byte, where string) (first, last int, err error) {
	if size != e.Size {
		return 0, 0, fmt.Errorf("%w archive %s: %q has %d bytes, the manifest says %d", archive.ErrCorrupt, where, e.Path, size, e.Size)
	}
	if err := fw.WriteHeader(e); err != nil {
		return 0, 0, err
	}
	first = fw.Frame()
	h := sha256.New()
	n, err := io.CopyBuffer(fw, io.TeeReader(io.LimitReader(tr, e.Size), h), buf)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", where, err)
	}
	if n != e.Size {
		return 0, 0, fmt.Errorf("%w archive %s: %q ends after %d of %d bytes", archive.ErrCorrupt, where, e.Path, n, e.Size)
	}
	var sum archive.Hash
	h.Sum(sum[:0])
	if e.Hash == nil || sum != *e.Hash {
		return 0, 0, fmt.Errorf("%w archive %s: %q does not match its hash", archive.ErrCorrupt, where, e.Path)
	}
	return first, fw.Frame(), nil
}
