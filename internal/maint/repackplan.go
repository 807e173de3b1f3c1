package maint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// A repack re-points every kept snapshot, not only the head (restic's
// prune repack, on this store's format). Consolidation copies the head's
// live files into a new archive, but the older kept snapshots still point
// into the old archives, so every copied byte is stored twice until they
// age out, and the bytes no kept snapshot needs stay while any of them
// uses another part of the archive. A repack copies the files any kept
// snapshot still needs out of the chosen archives into one new archive,
// rewrites every manifest layer that points into them, and leaves the old
// archives to prune.

// RepackPolicy says which archives are worth repacking.
type RepackPolicy struct {
	// MaxUnused is the share of the kept snapshots' archive bytes that
	// no kept snapshot uses (dead) tolerated after a repack: archives are
	// repacked, the most dead first, until the rest is within it.
	MaxUnused float64
	// MaxArchives bounds the archives the head points into, as
	// ConsolidatePolicy.MaxArchives does (0: no bound).
	MaxArchives int
}

// DefaultMaxUnused keeps the store within 2 % of what the kept snapshots
// need: restic tolerates 5 %, but a medium home at 1 % churn with 24
// snapshots kept already needs 1.26× a full snapshot, and issue 7 allows
// 1.3×. A lower share copies the large archives more often.
const DefaultMaxUnused = 0.02

// liveness is what the kept snapshots use: the tar bytes of the file
// versions (archive, offset, path) some kept snapshot's tree resolves to,
// per archive range, and which archives each manifest layer's entries
// point into. It holds no entry, so a home of a million files costs the
// scan its ranges (about one per frame), not its paths.
type liveness struct {
	layers []string          // every manifest layer a kept snapshot needs
	uses   []map[string]bool // per layer: the archives its entries point into
	raw    map[span]int64
	views  map[string]map[string]bool // per kept snapshot: the archives its tree points into
	// moves, when a copier scanned: per layer, for each of its entries
	// that points into a repacked archive, in order, the number of the
	// copied version it resolves to, or -1 (hidden in every kept chain:
	// not copied, and left where it was, which no restore reads).
	moves [][]int32
}

// pointsInto tells whether kept snapshot id's tree points into any of the
// archives.
func (l *liveness) pointsInto(id string, archives map[string]bool) bool {
	for a := range l.views[id] {
		if archives[a] {
			return true
		}
	}
	return false
}

type version struct {
	archive string
	offset  int64
	path    string
}

// live returns, per archive, the stored bytes the live versions fill (the
// filled share of their ranges, as LiveBytes).
func (l *liveness) live() map[string]int64 { return filledShare(l.raw) }

// scanKept resolves every kept snapshot's tree at once: each manifest
// layer is read once, all of them merged in path order, and for each path
// each kept snapshot's chain takes the topmost layer that names it. A
// version hidden by a newer layer in every chain is dead, even in an old
// full manifest.
//
// c, when set, is handed every live version in a repacked archive, in
// path order, to copy, and l.moves says where each layer's entries went.
func scanKept(ctx context.Context, st store.Store, kept []*repo.Record, c *copier) (*liveness, error) {
	l := &liveness{raw: map[span]int64{}, views: map[string]map[string]bool{}}
	views := make([]map[string]bool, len(kept))
	for k, r := range kept {
		views[k] = map[string]bool{}
		l.views[r.ID] = views[k]
	}
	index := map[string]int{}
	chains := make([][]int, len(kept))
	for k, r := range kept {
		for _, id := range r.Layers() {
			i, ok := index[id]
			if !ok {
				i = len(l.layers)
				index[id] = i
				l.layers = append(l.layers, id)
				l.uses = append(l.uses, map[string]bool{})
				l.moves = append(l.moves, nil)
			}
			chains[k] = append(chains[k], i)
		}
	}
	readers := make([]*archive.ManifestReader, len(l.layers))
	defer func() {
		for _, m := range readers {
			if m != nil {
				m.Close()
			}
		}
	}()
	var g errgroup.Group
	g.SetLimit(8)
	for i, id := range l.layers {
		g.Go(func() (err error) {
			readers[i], err = repo.OpenLayer(ctx, st, id)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	heads := make([]*archive.Entry, len(readers))
	advance := func(i int) error {
		e, err := readers[i].Next()
		if errors.Is(err, io.EOF) {
			heads[i] = nil
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", repo.Name(st, repo.ManifestKey(l.layers[i])), err)
		}
		heads[i] = e
		return nil
	}
	for i := range readers {
		if err := advance(i); err != nil {
			return nil, err
		}
	}
	at := make([]*archive.Entry, len(readers))
	type live struct {
		v version
		n int32 // its copy's number, or -1
	}
	var seen []live // the live versions of the current path
	for {
		path, found := "", false
		for _, h := range heads {
			if h != nil && (!found || archive.ComparePaths(h.Path, path) < 0) {
				path, found = h.Path, true
			}
		}
		if !found {
			return l, ctx.Err()
		}
		for i, h := range heads {
			at[i] = nil
			if h != nil && h.Path == path {
				at[i] = h
				if h.Archive != "" {
					l.uses[i][h.Archive] = true
				}
				if err := advance(i); err != nil {
					return nil, err
				}
			}
		}
		seen = seen[:0]
		for k, chain := range chains {
			for j := len(chain) - 1; j >= 0; j-- {
				e := at[chain[j]]
				if e == nil {
					continue
				}
				if v := (version{e.Archive, e.Offset, e.Path}); e.HasData() && !slices.ContainsFunc(seen, func(s live) bool { return s.v == v }) {
					n := int32(-1)
					if c != nil && c.repacked(e) {
						var err error
						if n, err = c.add(e); err != nil {
							return nil, err
						}
					}
					seen = append(seen, live{v, n})
					l.raw[span{e.Archive, e.Offset, e.Length}] += tarBytes(e.Size)
				}
				if e.HasData() {
					views[k][e.Archive] = true
				}
				break // the topmost layer naming the path decides, a deletion too
			}
		}
		if c == nil {
			continue
		}
		for i, e := range at {
			if e == nil || !c.repacked(e) {
				continue
			}
			n := int32(-1)
			if j := slices.IndexFunc(seen, func(s live) bool { return s.v == version{e.Archive, e.Offset, e.Path} }); j >= 0 {
				n = seen[j].n
			}
			l.moves[i] = append(l.moves[i], n)
		}
	}
}

// chooseRepack picks the archives to repack, given per archive the bytes
// the kept snapshots use (live), its stored size, and the archives the
// head points into. It returns them sorted, with why each was chosen.
//
//   - An archive no kept snapshot uses any more is always chosen: it is
//     dropped from the records and costs no copy (a repack interrupted
//     after rewriting the manifests leaves such archives).
//   - While the dead bytes left exceed p.MaxUnused of all the bytes left,
//     the archive with the largest dead share (ties: the most dead bytes)
//     is added, as restic's prune does with packs.
//   - When the head would still point into more than p.MaxArchives, its
//     cheapest archives join the merge (mergeCheapest, size-tiered).
func chooseRepack(live, size map[string]int64, head []string, p RepackPolicy) (chosen []string, why map[string]string) {
	ids := make([]string, 0, len(size))
	var total, dead int64
	for id := range size {
		ids = append(ids, id)
		total += size[id]
		dead += max(size[id]-live[id], 0)
	}
	why = map[string]string{}
	pick := map[string]bool{}
	var merged int64
	for _, id := range ids {
		if live[id] == 0 {
			pick[id], why[id] = true, "no kept snapshot uses it"
			total -= size[id]
			dead -= size[id]
		}
	}
	deadShare := func(id string) float64 { return float64(max(size[id]-live[id], 0)) / float64(max(size[id], 1)) }
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(deadShare(b), deadShare(a)), cmp.Compare(size[b]-live[b], size[a]-live[a]), cmp.Compare(a, b))
	})
	for _, id := range ids {
		if float64(dead) <= p.MaxUnused*float64(total) {
			break
		}
		if pick[id] || size[id] <= live[id] {
			continue
		}
		d := size[id] - live[id]
		pick[id] = true
		why[id] = fmt.Sprintf("%.0f %% unused (%d of %d bytes); unused bytes above %.1f %% of the store", 100*deadShare(id), d, size[id], 100*p.MaxUnused)
		merged += live[id]
		dead -= d
		total -= d // its live bytes are copied, its dead ones freed
	}
	if p.MaxArchives > 0 && len(head) > p.MaxArchives {
		byCost := slices.Clone(head)
		slices.SortFunc(byCost, func(a, b string) int {
			return cmp.Or(cmp.Compare(live[a], live[b]), cmp.Compare(size[b], size[a]), cmp.Compare(a, b))
		})
		before := maps.Clone(pick)
		mergeCheapest(byCost, live, pick, merged, p.MaxArchives)
		for id := range pick {
			if !before[id] {
				why[id] = fmt.Sprintf("the head points into %d archives (more than %d): merging the smallest", len(head), p.MaxArchives)
			}
		}
	}
	for id := range pick {
		chosen = append(chosen, id)
	}
	slices.Sort(chosen)
	return chosen, why
}
