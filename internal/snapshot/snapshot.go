package snapshot

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// Options configures one snapshot.
type Options struct {
	// Home is the home the command opened (see homefs.Home); a snapshot
	// reads it only beneath that descriptor, and never closes it.
	Home     *homefs.Home
	Store    store.Store
	Selector *selector.Selector
	Jobs     int           // parallel file readers and compressors; 0 means GOMAXPROCS
	Level    archive.Level // zstd level; 0 means the default
	Log      zerolog.Logger
	// Force commits a snapshot even when nothing changed since the parent.
	Force bool
	// Vital names top-level paths whose disappearance refuses the snapshot
	// (ErrShrunk), as does losing over half the parent's files or bytes,
	// unless AllowShrink is set.
	Vital       []string
	AllowShrink bool
	// Recipients are the fingerprints of the age recipients Store encrypts
	// to (empty: plain), recorded in the head. When they differ from the
	// parent's, the snapshot is a full one, so that all it references is
	// encrypted to the same recipients (key rotation, migration).
	Recipients []string
	// BeforeCommit, when set, runs once the snapshot is stored and before
	// the head moves to it, only when something changed: an error
	// discards the snapshot (the sidecar's agent-key guard).
	BeforeCommit func(ctx context.Context) error
	// MaxManifestChain bounds the manifests a restore of this snapshot
	// merges: a parent whose chain is this long gets a full manifest on
	// top (0 means DefaultManifestChain; 1 writes full manifests only).
	MaxManifestChain int
	// Trigger says what took the snapshot (repo.Trigger*), kept in its record.
	Trigger string
	// Authenticated means Store tags what it writes (internal/auth): a
	// head from before (no Seq) is not trusted, so the snapshot reads
	// nothing from it and is a full one.
	Authenticated bool
	// ChangeJournal, when set, lets the snapshot re-walk only what changed since
	// this process's previous snapshot (the sidecar's change journal).
	ChangeJournal *ChangeJournal
	// OwnCommitted is the snapshot this process committed last (the
	// sidecar's): a head naming it is this home's, whatever its mark says.
	OwnCommitted string
	// AllowBehind commits over a head newer than anything the home has
	// seen (ErrBehind).
	AllowBehind bool
	// Keep chooses entries of the snapshot to return in Result.Kept (the
	// sidecar's agent guard checks the next snapshot against them). It
	// chooses only paths under top-level names it chooses itself
	// (Keep(name, true) or Keep(name, false)): spans of the parent under
	// other names may be passed over (ChangeJournalUse.Unread).
	Keep func(rel string, dir bool) bool
}

// Result describes a committed (or skipped) snapshot.
type Result struct {
	ID        string // empty when Unchanged
	Parent    string
	Unchanged bool // nothing changed since Parent: no snapshot was written
	Totals    archive.Totals
	Deleted   int64 // paths of the parent that are gone
	// Manifests are the snapshots whose manifests resolve this one (see
	// repo.Record.Manifests); one entry when its manifest is full.
	Manifests []string
	Stored    int64 // compressed archive bytes written
	Elapsed   time.Duration
	// ChangeJournal says how the snapshot used Options.ChangeJournal (nil without one).
	ChangeJournal *ChangeJournalUse
	// LinkedLeftOut counts the hard-linked files of another owner a root
	// sidecar left out (see linkGuard), each with a warning.
	LinkedLeftOut int64
	// Kept are the snapshot's entries Options.Keep chose, in manifest
	// order, as its manifest records them (set when a walk committed).
	Kept []*archive.Entry
}

// Snapshot takes one snapshot of the selected paths of the home. Only the
// bytes of files whose metadata changed since the parent snapshot are
// written; the rest point into older archives. The snapshot becomes visible
// only when the head pointer moves, after its archive and manifest are
// stored, so a failure at any point leaves the previous snapshot current.
func Snapshot(ctx context.Context, o Options) (*Result, error) {
	return take(ctx, o, walk{})
}

// take takes one snapshot of what src gives, over the head.
func take(ctx context.Context, o Options, src source) (res *Result, err error) {
	start := time.Now()
	if o.Home == nil {
		return nil, homemark.ErrNoHome
	}
	if !o.Home.Exists() {
		return nil, fmt.Errorf("home %s: %w", o.Home.Path, os.ErrNotExist)
	}
	if o.Jobs <= 0 {
		o.Jobs = runtime.GOMAXPROCS(0)
	}
	if o.Level == 0 {
		// Fastest: archived artifacts dominate and do not compress, so a
		// stronger level costs twice the CPU for ~1 % smaller archives.
		o.Level = archive.Level(1)
	}
	head, headVersion, err := repo.LoadHead(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	if head == nil {
		if err := repo.EnsureMarker(ctx, o.Store); err != nil {
			return nil, err
		}
	}
	if err := checkBehind(&o, head); err != nil {
		return nil, err
	}
	s := &snapshotter{o: o, src: src, writer: writer{st: o.Store, log: o.Log, recipients: o.Recipients, id: repo.NewID(start)}}
	var parent *archive.ChainReader
	if head != nil {
		s.parentID, s.seq = head.Snapshot, head.Seq
	}
	trusted := head != nil && (head.Seq > 0 || !o.Authenticated || src.headTree())
	if trusted && slices.Equal(head.Recipients, o.Recipients) {
		if parent, err = repo.OpenManifest(ctx, o.Store, head.Snapshot); err != nil {
			return nil, err
		}
		defer parent.Close()
		if err := s.chooseManifest(ctx, parent); err != nil {
			return nil, err
		}
	}
	var jr *changeRun
	if o.ChangeJournal != nil {
		parentID := ""
		if parent != nil {
			parentID = s.parentID
		}
		jr, s.src = o.ChangeJournal.begin(&o, parentID, src)
		defer func() {
			committed := ""
			if err == nil {
				committed = res.ID
				if res.Unchanged {
					committed = res.Parent
				}
				if jr.use.Mode != "" {
					jr.use.Unread = s.unread
					res.ChangeJournal = &jr.use
				}
			}
			jr.end(err, committed, s.marked == 0)
		}()
		if jr.unchanged { // the journal saw nothing since the parent: nothing to read
			return &Result{Parent: s.parentID, Unchanged: true, Elapsed: time.Since(start)}, nil
		}
	}
	if parent != nil {
		if s.passSpans(jr) {
			parent.PassSpans()
		} else {
			// Decoded beside the merge: with a full walk, decoding the
			// parent's lines is much of what the producer does.
			parent.ReadAhead()
		}
	}
	res, err = s.run(ctx, parent)
	if err == nil && res.Unchanged {
		s.markHome(head.Snapshot, head.Time)
		res.Elapsed = time.Since(start)
	}
	if err != nil || res.Unchanged {
		s.discard(ctx, err)
		return res, err
	}
	if err := s.commitRun(ctx, res, parent, headVersion, start); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// passSpans: a snapshot through the change journal that writes a delta
// passes over the parent's spans where nothing changed, leaving their
// lines undecoded; unless its changes are in more directories than the
// parent has spans, and so touch most of them: then the lines are decoded
// ahead, beside the merge, as a walk's are.
func (s *snapshotter) passSpans(jr *changeRun) bool {
	return jr != nil && jr.use.Mode == JournalMode && s.base != "" && jr.dirs*archive.SpanEntries < s.parentEntries
}

// snapshotter runs the pipeline of one snapshot:
//
//	walk ⋈ parent manifest → jobs → loaders (read and hash small files)
//	  → workers (read and hash the rest, tar, compress)
//	  → sequencer (in job order: archive bytes, manifest entries)
//
// Jobs in flight are bounded, so memory stays proportional to the frames
// being worked on, not to the size of the home.
type snapshotter struct {
	writer
	o    Options
	src  source
	home homefs.Dir // open while run runs
	comp *archive.Compressor
	// loads holds the buffers of the jobs' loaded bytes, one per job in
	// flight.
	loads *archive.Buffers
	// What the parent and this snapshot select, for the shrink guard;
	// written by produce, read after it ends.
	parentCensus, census census
	print                homemark.Fingerprint // of the walk, for the home's mark
	// A delta manifest's base, its index cut in the parent's chain, and
	// its chain (see chooseManifest); empty base for a full manifest.
	// deltaLines are the parent chain's delta lines and parentEntries its
	// entries, from its record.
	base          string
	cut           int
	chain         []string
	deltaLines    int64
	parentEntries int64
	// marked counts the entries recorded as changed while read, which the
	// next snapshot must read again.
	marked int64
	// unread counts the parent's entries passed over in spans.
	unread int64
	// kept are the entries Options.Keep chose.
	kept []*archive.Entry
	// links says which hard-linked files are left out; linkedOut counts
	// them.
	links     linkGuard
	linkedOut atomic.Int64
}

// item is one entry of a job; write means its header (and bytes) go into
// this snapshot's archive, and first/last are the job-relative frames that
// hold its header and its last byte.
type item struct {
	e *archive.Entry
	// base is the entry the delta manifest's base has at the path, so an
	// unchanged entry is left out of the delta; with e nil, the path is
	// gone since the base.
	base  *archive.Entry
	prev  *archive.Entry // the parent's entry at the path, if any
	write bool
	// same, when set, stands for entries in a row that the delta's base
	// has as they are: counted, not carried (e, base and prev are nil).
	same        *archive.Tally
	fromStore   bool // a consolidation copies the bytes from the entry's old archive
	loaded      bool // a loader read the file's bytes into job.data at at
	at          int
	first, last int
}

type job struct {
	items  []item
	loads  int           // the bytes of its files a loader reads, as the walk found them
	loaded chan struct{} // closed when its loader is done; err is set before
	data   []byte        // the bytes of its loaded items
	frames chan []byte   // closed when the job is done; err is set before
	err    error
}

// jobQueues carry each job, in order, to the sequencer, a loader and a
// worker.
type jobQueues struct{ order, load, work chan<- *job }

type counts struct {
	seen, changed, deleted int64
}

func (s *snapshotter) run(ctx context.Context, parent *archive.ChainReader) (*Result, error) {
	var err error
	s.home = s.o.Home.Dir
	if s.links, err = newLinkGuard(s.home); err != nil {
		return nil, err
	}
	if s.comp, err = archive.NewCompressor(s.o.Level, s.o.Jobs); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx) // ends the uploads on any return
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)

	// Loaders and workers both take jobs in order, so the oldest job is
	// always loading or in a worker and the sequencer never waits on a job
	// that waits for it. work holds the jobs the loaders read ahead.
	order := make(chan *job, s.o.Jobs+loaders+1) // bounds the jobs in flight
	s.loads = archive.NewBuffers(cap(order)+1, loadSize)
	load, work := make(chan *job), make(chan *job, loaders)
	var cnt counts
	g.Go(func() error {
		defer close(order)
		defer close(load)
		defer close(work)
		return s.produce(gctx, parent, jobQueues{order, load, work}, &cnt)
	})
	for range loaders {
		g.Go(func() error {
			for j := range load {
				s.load(gctx, j)
				close(j.loaded)
			}
			return nil
		})
	}
	for range s.o.Jobs {
		g.Go(func() error {
			fw := archive.NewFrameWriter(s.comp, nil)
			buf := make([]byte, readChunk)
			for j := range work {
				<-j.loaded
				s.process(gctx, j, fw, buf)
				s.releaseLoad(j)
			}
			return nil
		})
	}

	// Older releases cannot read this manifest's format (a delta, spans),
	// nor would their prune keep a delta's layers: the store says so
	// before the first one is written.
	if err := repo.UpgradeMarker(ctx, s.o.Store); err != nil {
		return nil, err
	}
	manifest := repo.NewUpload(ctx, s.o.Store, repo.ManifestKey(s.id))
	archiveUp := repo.NewLazyUpload(ctx, s.o.Store, repo.ArchiveKey(s.id))
	mw, err := archive.NewManifestWriter(manifest, archive.Header{
		ID: s.id, Parent: s.parentID, Created: time.Now().UTC(),
		Host: hostname(), Selection: archive.Selection(s.o.Selector.Spec()), Base: s.base, Chain: s.chain,
	})
	if err != nil {
		return nil, err
	}
	var newEntries, newBytes int64
	g.Go(func() error {
		for j := range order {
			if err := s.sequence(gctx, j, archiveUp, mw, &newEntries, &newBytes); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		manifest.Abort(err)
		archiveUp.Abort(err)
		return nil, err
	}
	res := &Result{ID: s.id, Parent: s.parentID, Deleted: cnt.deleted, Manifests: s.chain, LinkedLeftOut: s.linkedOut.Load(), Kept: s.kept}
	if s.base == "" {
		res.Manifests = []string{s.id}
	}
	if cnt.seen == 0 && !s.o.Force {
		err := fmt.Errorf("%w: nothing under %s matches the selection (preset %q): is it the Jenkins home? Refusing to record an empty snapshot, which a restore would apply by deleting", ErrEmpty, s.o.Home.Path, s.o.Selector.Spec().Preset)
		manifest.Abort(err)
		return nil, archiveUp.Abort(err)
	}
	if err := checkShrink(s.parentCensus, s.census, s.o.Vital); parent != nil && err != nil && !s.o.AllowShrink {
		manifest.Abort(err)
		return nil, archiveUp.Abort(err)
	}
	if parent != nil && cnt.changed == 0 && cnt.deleted == 0 && !s.o.Force {
		abort := errors.New("unchanged")
		manifest.Abort(abort)
		archiveUp.Abort(abort)
		res.ID, res.Unchanged = "", true
		return res, nil
	}
	// Commit order: the archive is whole before the manifest that points
	// into it is finished, and both before the head moves.
	if archiveUp.Started() {
		if _, err := archiveUp.Write(s.comp.EndFrame()); err != nil {
			manifest.Abort(err)
			return nil, archiveUp.Abort(err)
		}
	}
	if err := archiveUp.Finish(); err != nil {
		manifest.Abort(err)
		return nil, fmt.Errorf("upload archive %s: %w", repo.Name(s.o.Store, repo.ArchiveKey(s.id)), err)
	}
	if archiveUp.Started() {
		s.written = append(s.written, repo.ArchiveKey(s.id))
	}
	if res.Totals, err = mw.Close(newEntries, newBytes); err != nil {
		return nil, manifest.Abort(err)
	}
	if err := manifest.Finish(); err != nil {
		return nil, fmt.Errorf("upload manifest %s: %w", repo.Name(s.o.Store, repo.ManifestKey(s.id)), err)
	}
	s.written = append(s.written, repo.ManifestKey(s.id))
	res.Stored = archiveUp.Written()
	return res, nil
}

// cutter cuts the items of a snapshot into jobs of about one frame of new
// bytes each, and hands them on.
type cutter struct {
	ctx     context.Context
	q       jobQueues
	cur     *job
	pending int // bytes the job writes
	entries int // entries in the job, counted ones included
}

// maxJobEntries cuts a job of many entries that write little, so that the
// jobs in flight hold a bounded number of entries.
const maxJobEntries = 8192

func (c *cutter) add(it item) error {
	e := it.e
	big := it.write && e.Type == archive.TypeFile && e.Size >= archive.FrameSize
	if big {
		if err := c.flush(); err != nil {
			return err
		}
	}
	c.cur.items = append(c.cur.items, it)
	c.entries++
	if it.write {
		c.pending += 512 + int(min(e.Size, archive.FrameSize))
		if loadable(&it) {
			c.cur.loads += int(e.Size)
		}
	}
	if big || c.pending >= archive.FrameSize || c.entries >= maxJobEntries {
		return c.flush()
	}
	return nil
}

// same adds an entry that the delta's base has as it is, as a count: the
// jobs are cut where they were when it was an item.
func (c *cutter) same(e *archive.Entry) error {
	if n := len(c.cur.items); n == 0 || c.cur.items[n-1].same == nil {
		c.cur.items = append(c.cur.items, item{same: &archive.Tally{}})
	}
	c.cur.items[len(c.cur.items)-1].same.Add(e)
	if c.entries++; c.entries >= maxJobEntries {
		return c.flush()
	}
	return nil
}

// sameSpan adds the entries of a span the rescan passed over, which the
// delta's base has as they are, as one count.
func (c *cutter) sameSpan(sp *archive.Span) error {
	if n := len(c.cur.items); n == 0 || c.cur.items[n-1].same == nil {
		c.cur.items = append(c.cur.items, item{same: &archive.Tally{}})
	}
	c.cur.items[len(c.cur.items)-1].same.Merge(sp.Tally)
	if c.entries++; c.entries >= maxJobEntries {
		return c.flush()
	}
	return nil
}

func (c *cutter) flush() error {
	if len(c.cur.items) == 0 {
		return nil
	}
	c.cur.frames = make(chan []byte, 2)
	c.cur.loaded = make(chan struct{})
	for _, q := range []chan<- *job{c.q.order, c.q.load, c.q.work} {
		select {
		case q <- c.cur:
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
	}
	c.cur, c.pending, c.entries = &job{}, 0, 0
	return nil
}

// produce merges the source with the parent manifest and cuts the result
// into jobs.
func (s *snapshotter) produce(ctx context.Context, parent *archive.ChainReader, q jobQueues, cnt *counts) error {
	old := &parentCursor{s: s, m: parent, stale: true} // read at first need
	jobs := &cutter{ctx: ctx, q: q, cur: &job{}}
	if err := s.src.produce(ctx, s, old, jobs, cnt); err != nil {
		return err
	}
	return jobs.flush()
}

// process reads, hashes and compresses one job's new entries.
func (s *snapshotter) process(ctx context.Context, j *job, fw *archive.FrameWriter, buf []byte) {
	defer close(j.frames)
	if j.err != nil { // from its loader
		return
	}
	fw.Reset(func(frame []byte) error {
		select {
		case j.frames <- frame:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	for i := range j.items {
		it := &j.items[i]
		if !it.write {
			continue
		}
		var err error
		switch {
		case it.fromStore:
			err = s.copyFromStore(ctx, fw, it, buf)
		case it.e.Type == archive.TypeFile:
			err = s.writeFile(fw, j, it, buf)
		default:
			err = fw.WriteHeader(it.e)
			it.first, it.last = fw.Frame(), fw.Frame()
		}
		if err != nil {
			j.err = err
			return
		}
	}
	j.err = fw.Cut()
}

// writeFile adds one regular file, from the bytes a loader read ahead or
// streamed from the file now.
func (s *snapshotter) writeFile(fw *archive.FrameWriter, j *job, it *item, buf []byte) error {
	if it.loaded {
		if err := fw.WriteHeader(it.e); err != nil {
			return err
		}
		it.first = fw.Frame()
		_, err := fw.Write(j.data[it.at : it.at+int(it.e.Size)])
		it.last = fw.Frame()
		return err
	}
	f, err := s.openItem(it)
	if f == nil {
		return err
	}
	defer f.Close()
	if err := fw.WriteHeader(it.e); err != nil {
		return err
	}
	it.first = fw.Frame()
	err = s.readContent(f, it.e, buf, func(p []byte) error {
		_, err := fw.Write(p)
		return err
	})
	it.last = fw.Frame()
	return err
}

// openItem opens an item's file. Its entry takes the metadata of the open
// file, which is what the bytes read next belong to. A file gone since the
// walk drops out of the snapshot: no file and no error. So does a file that
// is not the one the walk saw (another device or inode: replaced since, or
// a path redirected): the snapshot stores only what the walk saw, and
// keeps the parent's version, marked to be read again, when it has one.
func (s *snapshotter) openItem(it *item) (*regularFile, error) {
	e := it.e
	path := s.o.Home.Join(e.Path)
	if beforeOpen != nil {
		beforeOpen(path)
	}
	f, err := openRegular(s.home, e.Path, path)
	if errors.Is(err, errVanished) {
		s.o.Log.Debug().Str("path", e.Path).Msg("vanished before it was read")
		it.e, it.write = nil, false
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if afterOpen != nil {
		afterOpen(path)
	}
	if uint64(f.st.Dev) != e.Dev || f.st.Ino != e.Inode {
		f.Close()
		s.replacedInFlight(it)
		return nil, nil
	}
	*e = *scan.FromStat(e.Path, &f.st)
	return f, nil
}

// leaveLinkedOut reports a hard-linked file of another owner left out of
// the snapshot (see linkGuard).
func (s *snapshotter) leaveLinkedOut(rel string, links, uid uint32) {
	s.linkedOut.Add(1)
	s.o.Log.Warn().Str("path", rel).Uint32("links", links).Uint32("uid", uid).
		Msg("left out of the snapshot: a file with other hard links, not owned by the home's user; a sidecar running as root stores only what that user could read (SECURITY.md)")
}

// replacedInFlight leaves out the bytes of a file replaced between the
// walk and the read. The parent's entry stands in, marked changed so the
// next snapshot reads the path again, unless its bytes live in an archive
// this snapshot retires (a consolidation): then the path is left out.
func (s *snapshotter) replacedInFlight(it *item) {
	s.o.Log.Warn().Str("path", it.e.Path).Msg("file changed while it was read; snapshot keeps the bytes read and marks it for the next snapshot")
	it.write = false
	if p := it.prev; p != nil && p.Type == archive.TypeFile && !(p.HasData() && s.src.retires(p.Archive)) {
		e := *p
		e.Changed = true
		it.e = &e
		return
	}
	it.e = nil
}

// readContent reads e.Size bytes of f in chunks of buf, hands each to put
// and records their hash in e. If the file changes while it is read, the
// entry says so and the next snapshot reads it again.
func (s *snapshotter) readContent(f *regularFile, e *archive.Entry, buf []byte, put func([]byte) error) error {
	h := sha256.New()
	for remaining := e.Size; remaining > 0; {
		p := buf[:min(int64(len(buf)), remaining)]
		truncated, err := f.readFull(p)
		if err != nil {
			return err
		}
		e.Changed = e.Changed || truncated
		h.Write(p)
		if err := put(p); err != nil {
			return err
		}
		remaining -= int64(len(p))
	}
	var sum archive.Hash
	h.Sum(sum[:0])
	e.Hash = &sum
	if f.changed() {
		e.Changed = true
	}
	if e.Changed {
		s.o.Log.Warn().Str("path", e.Path).Msg("file changed while it was read; snapshot keeps the bytes read and marks it for the next snapshot")
	}
	return nil
}

// sequence writes one job's frames to the archive, in job order, and its
// entries to the manifest with their final byte ranges.
func (s *snapshotter) sequence(ctx context.Context, j *job, w *repo.LazyUpload, mw *archive.ManifestWriter, newEntries, newBytes *int64) error {
	var offs, lens []int64
	for {
		var frame []byte
		var more bool
		select {
		case frame, more = <-j.frames:
		case <-ctx.Done(): // the job may never have reached a worker
			return context.Cause(ctx)
		}
		if !more {
			break
		}
		offs, lens = append(offs, w.Written()), append(lens, int64(len(frame)))
		_, err := w.Write(frame)
		s.comp.Release(frame)
		if err != nil {
			return err
		}
	}
	if j.err != nil {
		return j.err
	}
	for _, it := range j.items {
		if it.same != nil {
			if err := mw.Unchanged(it.same); err != nil {
				return err
			}
			continue
		}
		e := it.e
		if e == nil { // gone since the base, or vanished before it was read
			if it.base != nil {
				if err := mw.Delete(it.base.Path); err != nil {
					return err
				}
			}
			continue
		}
		if it.write {
			*newEntries++
			if e.HasData() {
				*newBytes += e.Size
				e.Archive = s.id
				e.Offset = offs[it.first]
				e.Length = offs[it.last] + lens[it.last] - e.Offset
			}
		}
		if e.Changed {
			s.marked++
		}
		if err := mw.WriteOver(e, it.base); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// afterOpen lets tests change a file between open and read, beforeOpen
// between the walk and the open.
var afterOpen, beforeOpen func(path string)

func hostname() string {
	h, _ := os.Hostname()
	return h
}
