package snapshot

import (
	"context"
	"fmt"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/repo"
)

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
			it.first, it.last, err = fetch.CopyEntry(fw, tr, hdr.Size, e, buf, where)
			if err != nil {
				return fmt.Errorf("consolidate: %w", err)
			}
			return nil
		}
	}
}

// Rewrite takes a snapshot of the head's own tree in which the files whose
// bytes lie in archives are copied, from the store, into the snapshot's
// new archive (a consolidation); o.Home is not walked, and its mark, when
// it names the head, moves to the new snapshot of the same tree. It is
// committed like any snapshot and writes a full manifest.
func Rewrite(ctx context.Context, o Options, archives []string) (*Result, error) {
	r := rewrite{}
	for _, a := range archives {
		r[a] = true
	}
	return take(ctx, o, r)
}

// rewrite is the head's tree, with the files in these archives copied.
type rewrite map[string]bool

func (r rewrite) retires(a string) bool { return r[a] }
func (rewrite) headTree() bool          { return true }

// produce takes the parent's entries (a full manifest: every pair is a
// parent entry) instead of a walk.
func (r rewrite) produce(ctx context.Context, s *snapshotter, old *parentCursor, jobs *cutter, cnt *counts) error {
	if err := old.fill(); err != nil {
		return err
	}
	for ; old.ok; cnt.seen++ {
		e := old.top
		s.census.add(e)
		it := item{e: e, fromStore: e.HasData() && r[e.Archive]}
		if it.fromStore {
			cnt.changed++
			it.write = true
		}
		if err := jobs.add(it); err != nil {
			return err
		}
		if err := old.next(); err != nil {
			return err
		}
	}
	return nil
}
