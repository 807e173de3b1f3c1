package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// Options configures a check of snapshots in a store: the
// disaster-recovery drill without a home.
type Options struct {
	// Store holds the head and the records.
	Store store.Store
	// Open returns the store a snapshot's manifest and archives are read
	// through (decrypting an encrypted snapshot); nil: Store.
	Open func(ctx context.Context, id string) (store.Store, error)
	// Snapshots to check, in this order; empty: every snapshot the head's
	// history reaches, oldest first.
	Snapshots []string
	// Structure checks each manifest and that every archive it needs
	// exists with at least the size its entries need (one LIST), without
	// reading archive contents.
	Structure bool
	Jobs      int // parallel ranged reads; 0 means 8
	// OnProblem is told about every problem as it is found (from several
	// goroutines, one call at a time).
	OnProblem func(Problem)
	// Progress, when set, is told about every file whose content is
	// checked (not in a structure check).
	Progress fetch.Progress
}

// Problem is one missing or damaged object.
type Problem struct {
	Snapshot string // the snapshot being checked when it was found
	Object   string // the store object's name
	Err      error
}

// Result is what a check read and found.
type Result struct {
	Snapshots []string // checked, in order
	Damaged   []string // those whose manifest, record or archives have a problem
	Objects   int      // manifests and archives read (or, Structure, listed)
	Files     int64    // file contents checked against their hash
	Bytes     int64    // bytes read from the store
	Problems  int
}

// Verify reads every object the chosen snapshots need and checks it the
// way a restore would: each manifest through the restore's own reader
// (order, paths, parents, trailer, the snapshot's own selection), each
// file's bytes through the restore's ranged reads and hash check. It goes
// on after a problem, reporting each, and returns an error wrapping
// archive.ErrCorrupt when it found any; a store it cannot read ends it.
// Content already checked for the previous snapshot (the same path, range
// and hash) is not read again, so a history costs about one read of
// everything it stores.
func Verify(ctx context.Context, o Options) (*Result, error) {
	if o.Jobs <= 0 {
		o.Jobs = 8
	}
	if o.Open == nil {
		o.Open = func(context.Context, string) (store.Store, error) { return o.Store, nil }
	}
	ids, err := verifyTargets(ctx, o)
	if err != nil {
		return nil, err
	}
	v := &verifier{o: o, res: Result{Snapshots: ids}, broken: map[string]bool{}, read: map[string]bool{}, needs: map[string][]string{}, bad: map[string]bool{}}
	if o.Structure {
		if v.sizes, err = archiveSizes(ctx, o.Store); err != nil {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Jobs)
	prev := ""
	for _, id := range ids {
		ok, err := v.snapshot(gctx, g, id, prev)
		if err != nil {
			if werr := g.Wait(); werr != nil {
				err = werr // a worker's failure cancelled the manifest pass
			}
			return nil, err
		}
		if prev = ""; ok {
			prev = id
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res := v.result()
	if res.Problems > 0 {
		return res, fmt.Errorf("%w store: %d problems; %d of the %d snapshots checked are damaged (%s)", archive.ErrCorrupt, res.Problems, len(res.Damaged), len(ids), strings.Join(res.Damaged, ", "))
	}
	return res, nil
}

// verifyTargets returns the snapshots to check.
func verifyTargets(ctx context.Context, o Options) ([]string, error) {
	for _, id := range o.Snapshots {
		if err := repo.CheckID(id); err != nil {
			return nil, err
		}
	}
	if len(o.Snapshots) > 0 {
		return o.Snapshots, nil
	}
	head, _, err := repo.LoadHead(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	if head == nil {
		return nil, fmt.Errorf("%w in %s to verify", repo.ErrNoSnapshot, o.Store)
	}
	var ids []string
	if err := repo.WalkHistory(ctx, o.Store, head.Snapshot, func(r *repo.Record) bool {
		ids = append(ids, r.ID)
		return true
	}); err != nil {
		return nil, err
	}
	slices.Reverse(ids)
	return ids, nil
}

// archiveSizes is the stored size of each archive (an encrypted
// archive's is larger than its plain bytes; the form listed last counts).
func archiveSizes(ctx context.Context, st store.Store) (map[string]int64, error) {
	list, err := repo.ListArchives(ctx, st)
	sizes := map[string]int64{}
	for _, a := range list {
		sizes[a.ID] = a.Size
	}
	return sizes, err
}

type verifier struct {
	o     Options
	sizes map[string]int64 // Structure: the listed archives, by ID
	bytes atomic.Int64
	files atomic.Int64

	mu       sync.Mutex
	res      Result
	broken   map[string]bool     // snapshots whose manifest or record has a problem
	read     map[string]bool     // archives read or checked
	needs    map[string][]string // snapshot → the archives it needs
	bad      map[string]bool     // archives with a problem
	reported map[string]bool     // missing archives already reported
}

func (v *verifier) problem(id, object string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.res.Problems++
	if v.o.OnProblem != nil {
		v.o.OnProblem(Problem{Snapshot: id, Object: object, Err: err})
	}
}

// damaged reports a problem that an error of the store names.
func damaged(err error) bool {
	return errors.Is(err, archive.ErrCorrupt) || errors.Is(err, archive.ErrTooLarge)
}

// snapshot checks one snapshot's manifest and queues its ranged reads on
// g. ok says the manifest was read whole without a problem (its entries
// may then stand in for the next snapshot's).
func (v *verifier) snapshot(ctx context.Context, g *errgroup.Group, id, prev string) (ok bool, err error) {
	st, err := v.o.Open(ctx, id)
	if err != nil {
		return false, err
	}
	st = &meteredStore{Store: st, n: &v.bytes}
	manifest := repo.Name(st, repo.ManifestKey(id))
	fail := func(object string, err error) (bool, error) {
		if !damaged(err) {
			return false, err
		}
		v.mu.Lock()
		v.broken[id] = true
		v.mu.Unlock()
		v.problem(id, object, err)
		return false, nil
	}
	everything, err := selector.New(selector.Spec{Preset: "all"})
	if err != nil {
		return false, err
	}
	v.mu.Lock()
	v.res.Objects++
	v.mu.Unlock()
	pr, err := fetch.OpenPlan(ctx, st, id, everything, nil, nil)
	if err != nil {
		return fail(manifest, err)
	}
	defer pr.Close()
	var before *priorEntries
	if prev != "" && !v.o.Structure {
		before = v.prior(ctx, prev, everything)
		defer before.close()
	}
	// st counts what is read; the Fetcher's own count would count it twice.
	f := &fetch.Fetcher{Store: st, Fetched: new(atomic.Int64), Verb: "check", File: func(e *archive.Entry, src io.Reader) error {
		if err := fetch.ReadChecked(src, e, nil); err != nil {
			return err
		}
		v.files.Add(1)
		fetch.Done(v.o.Progress, e)
		return nil
	}}
	runs := fetch.NewRunBuilder(func(rn *fetch.Run) {
		g.Go(func() error { return v.fetch(ctx, f, id, rn) })
	})
	ends := map[string]int64{} // archive → the end of the last byte its entries need
	var files, bytes int64
	for e, err := range pr.All(ctx) {
		if err != nil {
			runs.Flush() // what was read so far is still worth checking
			v.need(id, ends)
			return fail(manifest, err)
		}
		if e.Type != archive.TypeFile {
			continue
		}
		files++
		bytes += e.Size
		if !e.HasData() {
			if err := fetch.ReadChecked(nil, e, nil); err != nil {
				return fail(manifest, fmt.Errorf("%s: %w manifest: empty file %q: %v", manifest, archive.ErrCorrupt, e.Path, err))
			}
			continue
		}
		ends[e.Archive] = max(ends[e.Archive], e.Offset+e.Length)
		if v.o.Structure || before.has(ctx, e) {
			continue
		}
		fetch.Planned(v.o.Progress, e)
		runs.Add(e)
	}
	runs.Flush()
	v.need(id, ends)
	if v.o.Structure {
		v.checkSizes(id, st, ends)
	}
	return v.checkRecord(ctx, id, files, bytes, fail)
}

// need records the archives snapshot id needs.
func (v *verifier) need(id string, ends map[string]int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for a := range ends {
		v.needs[id] = append(v.needs[id], a)
	}
}

// checkRecord compares the snapshot's record with what its manifest holds.
func (v *verifier) checkRecord(ctx context.Context, id string, files, bytes int64, fail func(string, error) (bool, error)) (bool, error) {
	rec, err := repo.LoadRecord(ctx, v.o.Store, id)
	var se *store.Error
	if err != nil && errors.As(err, &se) && !errors.Is(err, store.ErrNotExist) {
		return false, err // the store failed, not the record
	}
	if err != nil {
		return fail(repo.Name(v.o.Store, repo.RecordKey(id)), fmt.Errorf("%w: %w", archive.ErrCorrupt, err))
	}
	if !rec.Partial && (rec.Files != files || rec.Bytes != bytes) {
		return fail(repo.Name(v.o.Store, repo.RecordKey(id)), fmt.Errorf("%w record: %s counts %d files of %d bytes, its manifest holds %d files of %d bytes",
			archive.ErrCorrupt, repo.Name(v.o.Store, repo.RecordKey(id)), rec.Files, rec.Bytes, files, bytes))
	}
	return true, nil
}

// checkSizes is the structure check of the archives a snapshot needs.
func (v *verifier) checkSizes(id string, st store.Store, ends map[string]int64) {
	for a, end := range ends {
		key := repo.ArchiveKey(a)
		size, ok := v.sizes[a]
		v.mu.Lock()
		first := !v.read[a]
		v.read[a] = true
		v.mu.Unlock()
		switch {
		case !first:
		case !ok:
			v.archiveProblem(id, a, fmt.Errorf("%w store: archive %s %w (needed by snapshot %s)", archive.ErrCorrupt, repo.Name(st, key), fetch.ErrMissing, id))
		case size < end:
			v.archiveProblem(id, a, fmt.Errorf("%w store: archive %s holds %d bytes, snapshot %s needs %d", archive.ErrCorrupt, repo.Name(st, key), size, id, end))
		}
	}
}

// fetch reads one run and reports what is wrong with it.
func (v *verifier) fetch(ctx context.Context, f *fetch.Fetcher, id string, rn *fetch.Run) error {
	v.mu.Lock()
	v.read[rn.Archive] = true
	skip := v.reported[rn.Archive] // missing: said once
	v.mu.Unlock()
	if skip {
		return nil
	}
	err := f.Fetch(ctx, rn)
	if err == nil || !damaged(err) {
		return err
	}
	v.archiveProblem(id, rn.Archive, err)
	return nil
}

// archiveProblem reports a problem of archive a; a missing archive once.
func (v *verifier) archiveProblem(id, a string, err error) {
	v.mu.Lock()
	v.bad[a] = true
	if errors.Is(err, fetch.ErrMissing) {
		if v.reported == nil {
			v.reported = map[string]bool{}
		}
		if v.reported[a] {
			v.mu.Unlock()
			return
		}
		v.reported[a] = true
	}
	v.mu.Unlock()
	v.problem(id, repo.Name(v.o.Store, repo.ArchiveKey(a)), err)
}

func (v *verifier) result() *Result {
	v.mu.Lock()
	defer v.mu.Unlock()
	res := v.res
	res.Objects += len(v.read)
	res.Bytes = v.bytes.Load()
	res.Files = v.files.Load()
	for _, id := range res.Snapshots {
		bad := v.broken[id]
		for _, a := range v.needs[id] {
			bad = bad || v.bad[a]
		}
		if bad {
			res.Damaged = append(res.Damaged, id)
		}
	}
	return &res
}

// prior opens the previous snapshot's manifest to follow alongside the
// current one; nil when it cannot be read (everything is then checked).
func (v *verifier) prior(ctx context.Context, id string, sel *selector.Selector) *priorEntries {
	st, err := v.o.Open(ctx, id)
	if err != nil {
		return nil
	}
	pr, err := fetch.OpenPlan(ctx, &meteredStore{Store: st, n: &v.bytes}, id, sel, nil, nil)
	if err != nil {
		return nil
	}
	return &priorEntries{pr: pr}
}

// priorEntries follows a checked snapshot's manifest: both are sorted by
// path, so one merge pass finds the entries the current snapshot shares
// with it, in constant memory.
type priorEntries struct {
	pr   *fetch.Plan
	cur  *archive.Entry
	done bool
}

// has reports whether the prior snapshot has e unchanged: the same path,
// archive range, size and hash (so its bytes were checked then).
func (p *priorEntries) has(ctx context.Context, e *archive.Entry) bool {
	if p == nil {
		return false
	}
	for !p.done && (p.cur == nil || archive.ComparePaths(p.cur.Path, e.Path) < 0) {
		next, err := p.pr.Next(ctx)
		if err != nil {
			p.done, p.cur = true, nil
			break
		}
		p.cur = next
	}
	c := p.cur
	return c != nil && c.Path == e.Path && c.Archive == e.Archive && c.Offset == e.Offset && c.Length == e.Length &&
		c.Size == e.Size && c.Hash != nil && e.Hash != nil && *c.Hash == *e.Hash
}

func (p *priorEntries) close() {
	if p != nil {
		p.pr.Close()
	}
}

// meteredStore counts the bytes read through Get.
type meteredStore struct {
	store.Store
	n *atomic.Int64
}

func (s *meteredStore) Unwrap() store.Store { return s.Store }

func (s *meteredStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&fetch.CountingReader{R: rc, N: s.n}, rc}, nil
}
