package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/journal"
	"github.com/homesnap/homesnap/internal/repo"
)

// DefaultManifestChain bounds the manifests a restore merges: a snapshot
// whose parent's chain is this long writes a full manifest. 16 layers cost
// a restore at most 15 small extra GETs, in parallel.
const DefaultManifestChain = 16

// maxDeltaShare: once the delta manifests of the parent's chain hold more
// lines than this share of its entries, reading the chain costs noticeably
// more than a full manifest would, so the next manifest is a full one.
const maxDeltaShare = 4 // one line in four

// maxCoveredShare: once the deltas of the parent's chain have lines in
// the spans of more than this share of the full manifest's entries, a
// snapshot through the change journal decodes most of the parent however
// little changed, until the next full manifest: the next one is full.
const maxCoveredShare = 2 // half

// chooseManifest decides whether the snapshot writes a delta manifest, and
// on which base, or a full one. A delta holds only the entries that differ
// from its base's and a marker per deleted path, so an incremental costs
// what changed. Its base is the parent, unless the parent's chain is at
// the limit (MaxManifestChain): then the upper half of the chain is merged
// into the new delta, on the snapshot of the layer below it (compaction),
// so the chain a restore merges stays short. Once the deltas of the
// parent's chain hold more lines than maxDeltaShare of its entries,
// reading them costs noticeably more than a full manifest: a full one is
// written. So it is once the deltas have lines in the spans of most of the
// full manifest's entries (the parent's record tells, when it passed over
// spans): a wide churn would otherwise leave every later snapshot through
// the journal decoding the whole parent. A consolidation writes a full
// manifest, and so does a snapshot after a key change (no parent is read).
func (s *snapshotter) chooseManifest(ctx context.Context, parent *archive.ChainReader) error {
	layers := parent.Layers()
	limit := cmp.Or(s.o.MaxManifestChain, DefaultManifestChain)
	if s.src.headTree() || limit < 2 {
		return nil
	}
	rec, err := repo.LoadRecord(ctx, s.o.Store, s.parentID)
	if err != nil {
		s.o.Log.Warn().Err(err).Str("parent", s.parentID).Msg("cannot read the parent's record: writing a full manifest")
		return nil
	}
	if rec.Partial && len(layers) > 1 || rec.DeltaLines*maxDeltaShare > rec.Entries {
		s.o.Log.Debug().Int64("delta_lines", rec.DeltaLines).Int64("entries", rec.Entries).Msg("the parent's delta manifests are large: writing a full manifest")
		return nil
	}
	if rec.CoveredEntries*maxCoveredShare > rec.SpannedEntries {
		s.o.Log.Debug().Int64("covered_entries", rec.CoveredEntries).Int64("spanned_entries", rec.SpannedEntries).Msg("the parent's delta manifests have lines in the spans of most of its entries: writing a full manifest")
		return nil
	}
	cut := len(layers) - 1
	if len(layers) >= limit {
		cut = limit/2 - 1
		s.o.Log.Debug().Int("layers", len(layers)).Str("base", layers[cut]).Msg("the parent's manifest chain is at its limit: merging its upper half into this delta")
	}
	s.base, s.cut, s.deltaLines, s.parentEntries = layers[cut], cut, rec.DeltaLines, rec.Entries
	s.chain = append(slices.Clone(layers[:cut+1]), s.id)
	return nil
}

// parentCursor walks the parent's manifest chain path by path: top is the
// parent's entry (nil for a path only the delta's base has), below the
// entry of the delta's base (nil where it has none; the parent's own when
// the delta is on the parent). At a span the rescan passed over (span
// set, from path to span.Last), both are nil.
type parentCursor struct {
	s          *snapshotter
	m          *archive.ChainReader
	ok         bool // top, below or span is set, at path
	path       string
	top, below *archive.Entry
	span       *archive.Span
	// While the parent's entries are also the base of a rescan (base),
	// what one of the two read from m and the other has not reached yet.
	shared             bool
	forCursor, forBase []pair
	// stale: the cursor moved on (later) and reads its next pair when
	// asked (fill), not before: read ahead of the rescan, it would begin
	// the span the rescan is about to pass over.
	stale bool
}

// A pair is what the cursor reads at a path, or a span passed over.
type pair struct {
	top, below *archive.Entry
	span       *archive.Span
}

func (c *parentCursor) next() error {
	c.ok, c.top, c.below, c.span = false, nil, nil, nil
	p, ok, err := c.pull(&c.forCursor, &c.forBase)
	if !ok || err != nil {
		return err
	}
	c.ok, c.top, c.below, c.span = true, p.top, p.below, p.span
	switch {
	case p.span != nil:
		c.path = p.span.First
		c.s.parentCensus.addSpan(p.span)
	case p.top != nil:
		c.path = p.top.Path
		c.s.parentCensus.add(p.top)
	default:
		c.path = p.below.Path
	}
	return nil
}

// later moves the cursor on when it is next filled.
func (c *parentCursor) later() { c.stale = true }

// fill reads the pair the cursor moved on to, if it has not.
func (c *parentCursor) fill() error {
	if !c.stale {
		return nil
	}
	c.stale = false
	return c.next()
}

// pull takes the next pair from own, or reads it, leaving it for the
// other reader while the entries are shared.
func (c *parentCursor) pull(own, other *[]pair) (pair, bool, error) {
	if len(*own) > 0 {
		p := (*own)[0]
		(*own)[0] = pair{}
		*own = (*own)[1:]
		return p, true, nil
	}
	if c.m == nil {
		return pair{}, false, nil
	}
	cut := c.s.cut
	if c.s.base == "" {
		cut = -1 // a full manifest compares with nothing: the parent's entries only
	}
	top, below, err := c.m.NextPair(cut)
	if errors.Is(err, io.EOF) {
		c.m = nil
		return pair{}, false, nil
	}
	if err != nil {
		return pair{}, false, c.s.parentErr(err)
	}
	p := pair{top: top, below: below}
	if c.shared {
		*other = append(*other, p)
	}
	return p, true, nil
}

func (s *snapshotter) parentErr(err error) error {
	return fmt.Errorf("parent snapshot %s: %w", s.parentID, err)
}

// base returns the parent's entries from the cursor's own reader, so that
// a rescan onto them and the merge with its result read the manifest once
// between them. It is read once, before the cursor moves past the entry
// it is at; the two hold apart only the pairs between them.
func (c *parentCursor) base() journal.Base {
	c.shared = true
	if c.ok && !c.stale {
		c.forBase = append(c.forBase, pair{top: c.top, below: c.below})
	}
	return cursorBase{c}
}

type cursorBase struct{ c *parentCursor }

func (b cursorBase) Next() (*archive.Entry, error) {
	c := b.c
	for {
		p, ok, err := c.pull(&c.forBase, &c.forCursor)
		if err != nil {
			return nil, err
		}
		if !ok {
			c.shared, c.forBase = false, nil
			return nil, io.EOF
		}
		if p.top != nil {
			return p.top, nil
		}
	}
}

// Span offers the rescan the parent's next span when the merge is not
// ahead of it, the snapshot's manifest is a delta (which leaves out what
// did not change) and Options.Keep chooses nothing in it.
func (b cursorBase) Span() (*archive.Span, error) {
	c := b.c
	if len(c.forBase) > 0 || c.m == nil || c.s.base == "" {
		return nil, nil
	}
	sp, err := c.m.Span()
	if err != nil {
		return nil, c.s.parentErr(err)
	}
	if sp == nil {
		return nil, nil
	}
	if keep := c.s.o.Keep; keep != nil {
		for top := range sp.Tops {
			if keep(top, true) || keep(top, false) {
				return nil, nil
			}
		}
	}
	return sp, nil
}

func (b cursorBase) SkipSpan() error {
	c := b.c
	sp, err := b.Span()
	if err == nil && sp == nil {
		err = errors.New("no span to pass over")
	}
	if err != nil {
		return err
	}
	if err := c.m.SkipSpan(); err != nil {
		return c.s.parentErr(err)
	}
	c.forCursor = append(c.forCursor, pair{span: sp})
	return nil
}

// passParent moves the cursor up to path ("": to the end), past the
// paths the walk no longer finds and the spans the rescan passed over.
func (s *snapshotter) passParent(old *parentCursor, path string, jobs *cutter, cnt *counts) error {
	for {
		if err := old.fill(); err != nil {
			return err
		}
		if !old.ok || path != "" && archive.ComparePaths(old.path, path) >= 0 {
			return nil
		}
		if sp := old.span; sp != nil {
			if path != "" && archive.ComparePaths(sp.Last, path) >= 0 {
				return s.parentErr(fmt.Errorf("%s is within %s…%s, which the rescan passed over", path, sp.First, sp.Last))
			}
			cnt.seen += sp.Entries
			s.unread += sp.Entries
			s.print.AddSpan(sp)
			s.census.addSpan(sp)
			if err := jobs.sameSpan(sp); err != nil {
				return err
			}
		} else if err := s.gone(jobs, old, cnt); err != nil {
			return err
		}
		old.later()
	}
}

// gone handles a path the walk no longer finds: a deletion since the
// parent when the parent has it, and a marker in a delta whose base has it.
func (s *snapshotter) gone(jobs *cutter, old *parentCursor, cnt *counts) error {
	if old.top != nil {
		cnt.deleted++
	}
	if s.base == "" || old.below == nil {
		return nil
	}
	return jobs.add(item{base: old.below})
}
