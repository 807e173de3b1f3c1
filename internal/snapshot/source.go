package snapshot

import (
	"context"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/journal"
	"github.com/homesnap/homesnap/internal/scan"
)

// A source is what a snapshot records, merged path by path with the
// parent's manifest (old) into the snapshot's jobs: the home's walk
// (Snapshot), or the head's own tree with the files of some archives
// copied into the new one (Rewrite).
type source interface {
	produce(ctx context.Context, s *snapshotter, old *parentCursor, jobs *cutter, cnt *counts) error
	// retires reports whether the snapshot copies the bytes of archive a
	// into its own, so that nothing it keeps may point into a.
	retires(a string) bool
	// headTree: the source is the head's own tree. Nothing new enters the
	// store, so the head is read even when unauthenticated, no
	// BeforeCommit guard runs, and the manifest is a full one. The home is
	// not walked, so its mark keeps the last walk's fingerprint.
	headTree() bool
}

// walk is the home's walk: what changed since the parent is written.
// rescan, when set, stands in for the full walk (the change journal's
// rescan onto the parent's entries, base); verify, when set, is compared with the full
// walk, which is what is recorded.
type walk struct {
	rescan      func(ctx context.Context, base journal.Base, skipped scan.Skipped, fn func(*archive.Entry) error) error
	verify      func(ctx context.Context, skipped scan.Skipped, fn func(*archive.Entry) error) error
	differences *int64 // counted by verify
	// seen reports a path changed after the journal's changes were taken:
	// a verification walk finding it otherwise is no difference.
	seen func(path string) bool
	// linked, when set, is told of every file with several names a full
	// walk finds (journal.Journal.Linked: the journal watches those).
	linked func(rel string, ino uint64, ctime int64)
}

func (walk) retires(string) bool { return false }
func (walk) headTree() bool      { return false }

func (w walk) produce(ctx context.Context, s *snapshotter, old *parentCursor, jobs *cutter, cnt *counts) error {
	skipped := func(rel, why string) { s.o.Log.Debug().Str("path", rel).Msg("skipped: " + why) }
	entries := func(ctx context.Context, skipped scan.Skipped, fn func(*archive.Entry) error) error {
		return scan.Walk(ctx, s.o.Home, s.o.Selector, skipped, fn)
	}
	if w.rescan != nil {
		base := old.base()
		entries = func(ctx context.Context, skipped scan.Skipped, fn func(*archive.Entry) error) error {
			return w.rescan(ctx, base, skipped, fn)
		}
	}
	add := func(e *archive.Entry) error {
		if err := s.passParent(old, e.Path, jobs, cnt); err != nil {
			return err
		}
		if e.Type == archive.TypeFile && e.Links > 1 && w.linked != nil && w.rescan == nil {
			w.linked(e.Path, e.Inode, e.CTime) // left out or not: a change to it must be heard
		}
		if e.Type == archive.TypeFile && s.links.refuses(e.Links, uint32(e.UID)) {
			// Left out as if absent (the parent's entry, if any, is gone);
			// still part of the home a restore's walk fingerprints.
			s.print.Add(e)
			s.leaveLinkedOut(e.Path, e.Links, uint32(e.UID))
			return nil
		}
		var prev, base *archive.Entry
		if old.ok && old.path == e.Path {
			prev, base = old.top, old.below
			old.later()
		}
		cnt.seen++
		s.print.Add(e)
		s.census.add(e)
		if s.o.Keep != nil && s.o.Keep(e.Path, e.Type == archive.TypeDir) {
			s.kept = append(s.kept, e) // its archive range is set once written
		}
		it := item{e: e, prev: prev}
		if s.base != "" {
			it.base = base
		}
		switch {
		case prev != nil && e.SameMeta(prev):
			if e.Type == archive.TypeFile {
				e.Hash, e.Archive, e.Offset, e.Length = prev.Hash, prev.Archive, prev.Offset, prev.Length
			}
			if it.base != nil && !e.Changed && e.Equal(it.base) { // the delta leaves it out
				return jobs.same(e)
			}
		default:
			cnt.changed++
			it.write = !e.Implied
		}
		return jobs.add(it)
	}
	var done func(error) error
	if w.verify != nil {
		add, done = verifyAgainst(ctx, s.o.Log, w.verify, w.seen, w.differences, add)
	}
	err := entries(ctx, skipped, add)
	if done != nil {
		err = done(err)
	}
	if err != nil {
		return err
	}
	return s.passParent(old, "", jobs, cnt)
}
