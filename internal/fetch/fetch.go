package fetch

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// A Run is one ranged read: a span of one archive holding the listed entries.
type Run struct {
	Archive    string
	start, end int64
	entries    []*archive.Entry
	seq        int // its place among the runs its RunBuilder made
}

// Runs are cut at this many bytes so that reads spread over the workers,
// and at this many files because a run holds its entries until it is done:
// 32 MiB of small compressed files is some 50,000 entries, and the jobs in
// flight each holding that many made a million-file restore's memory grow
// to 160 MiB. A run bridges gaps this small rather than paying for another
// request.
const (
	maxRun      = 32 << 20
	maxRunFiles = 2048
	maxGap      = 1 << 20
)

func newRun(e *archive.Entry) *Run {
	return &Run{Archive: e.Archive, start: e.Offset, end: e.Offset + e.Length, entries: []*archive.Entry{e}}
}

// add extends the run with an entry of its archive if the entry lies close
// enough after the run's start and the run stays short enough. An entry
// before the start (a manifest whose offsets go backwards) is refused, and
// the caller starts a new run: correctness never depends on the order.
func (rn *Run) add(e *archive.Entry) bool {
	end := e.Offset + e.Length
	if e.Offset < rn.start || e.Offset > rn.end+maxGap || max(end, rn.end)-rn.start > maxRun || len(rn.entries) >= maxRunFiles {
		return false
	}
	rn.end = max(rn.end, end)
	rn.entries = append(rn.entries, e)
	return true
}

// RunBuilder groups the file entries of one manifest pass into runs: each
// archive has one open run that grows until the next entry is too far or
// the run too long, and is then handed to dispatch.
type RunBuilder struct {
	open     map[string]*Run
	dispatch func(*Run)
	made     int
}

// NewRunBuilder hands each finished run to dispatch.
func NewRunBuilder(dispatch func(*Run)) *RunBuilder {
	return &RunBuilder{open: map[string]*Run{}, dispatch: dispatch}
}

// Add places a file entry in its archive's open run.
func (b *RunBuilder) Add(e *archive.Entry) {
	if cur := b.open[e.Archive]; cur == nil || !cur.add(e) {
		if cur != nil {
			b.dispatch(cur)
		}
		rn := newRun(e)
		rn.seq = b.made
		b.made++
		b.open[e.Archive] = rn
	}
}

// Made is how many runs the builder has started: every entry added so far
// is in one of the runs numbered below it (Run.Seq).
func (b *RunBuilder) Made() int { return b.made }

// Seq is the run's number in the order its builder started runs, from 0.
func (rn *Run) Seq() int { return rn.seq }

// Flush dispatches the remaining runs, in archive order.
func (b *RunBuilder) Flush() {
	ids := make([]string, 0, len(b.open))
	for id := range b.open {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b.dispatch(b.open[id])
	}
	clear(b.open)
}

// Workers bounds how many runs are read and decoded at once (FetchWith).
// A run sends its request before it takes a worker, so the round trip to
// its first byte passes while the workers still read earlier runs instead
// of leaving one of them idle: through 20 ms of latency, every run's
// request used to cost its worker that long (and far longer on a loaded
// machine) before any byte arrived.
type Workers chan struct{}

// NewWorkers makes room for n runs being read at once.
func NewWorkers(n int) Workers { return make(Workers, n) }

// InFlight is how many runs to start at once: the workers' plus
// OpenAhead waiting for one with their requests sent.
func (w Workers) InFlight() int { return cap(w) + OpenAhead }

// OpenAhead is how many runs may have their request sent while every
// worker is busy. A worker finishes a run (up to 32 MiB or 2,048 files)
// every few tenths of a second, so with the default 8 workers one frees
// every few tens of milliseconds: 4 requests ahead cover a round trip of
// 4 such turns (some 100-200 ms), more than a store's usual first-byte
// latency. A waiting run holds only its entries (at most maxRunFiles) and
// an unread response, whose bytes wait in the socket, not in memory; more
// would only add to the entries held.
const OpenAhead = 4

// ErrMissing is wrapped (with archive.ErrCorrupt) by the error of a run
// whose archive is not in the store.
var ErrMissing = errors.New("is missing")

// A Fetcher reads runs of archive bytes and hands the content of every
// file to File, which must read e.Size bytes from src and check them (see
// ReadChecked): the restore writes them into its staging tree, a verify
// only hashes them.
type Fetcher struct {
	Store   store.Store
	Fetched *atomic.Int64 // compressed bytes read
	File    func(e *archive.Entry, src io.Reader) error
	Verb    string // what File does, for messages: "restore", "check"
	Note    string // appended to every error ("; nothing was changed in the home")
}

// Fetch reads one range and consumes the files it holds. Entries whose
// bytes start in the same frame are decoded together; the compressed
// bytes between such groups are skipped without decoding, and each group
// may decode only what its entries account for (archive.MaxDecoded), so a
// crafted range cannot make a restore decode more than an honest one.
func (f *Fetcher) Fetch(ctx context.Context, rn *Run) error {
	return f.FetchWith(ctx, nil, rn)
}

// FetchWith is Fetch holding one of w's workers (nil: none) while it reads
// and decodes, but not while its request waits for the store's answer.
func (f *Fetcher) FetchWith(ctx context.Context, w Workers, rn *Run) error {
	key := repo.ArchiveKey(rn.Archive)
	where := fmt.Sprintf("%s (bytes %d-%d)", repo.Name(f.Store, key), rn.start, rn.end-1)
	rc, err := f.Store.Get(ctx, key, rn.start, rn.end-rn.start)
	if err != nil {
		if errors.Is(err, store.ErrNotExist) {
			return fmt.Errorf("%w store: archive %s %w (needed for %s)%s", archive.ErrCorrupt, repo.Name(f.Store, key), ErrMissing, rn.entries[0].Path, f.Note)
		}
		return fmt.Errorf("read %s: %w%s", where, err, f.Note)
	}
	defer rc.Close()
	if w != nil {
		select {
		case w <- struct{}{}:
			defer func() { <-w }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	src := &CountingReader{R: rc, N: f.Fetched}
	slices.SortStableFunc(rn.entries, func(a, b *archive.Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	pos := rn.start
	for len(rn.entries) > 0 {
		n := 1
		for n < len(rn.entries) && rn.entries[n].Offset == rn.entries[0].Offset {
			n++
		}
		group := rn.entries[:n]
		rn.entries = rn.entries[n:]
		off := group[0].Offset
		if off < pos {
			return fmt.Errorf("%w archive %s: %q starts inside the bytes of an earlier file%s", archive.ErrCorrupt, where, group[0].Path, f.Note)
		}
		if _, err := io.CopyN(io.Discard, src, off-pos); err != nil {
			return fmt.Errorf("read %s: %w%s", where, err, f.Note)
		}
		end := off
		for _, e := range group {
			end = max(end, e.Offset+e.Length)
		}
		section := io.LimitReader(src, end-off)
		if err := f.group(section, group, where); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, section); err != nil {
			return fmt.Errorf("read %s: %w%s", where, err, f.Note)
		}
		pos = end
	}
	return ctx.Err()
}

// group decodes the entries whose first frame starts at the same offset.
func (f *Fetcher) group(section io.Reader, group []*archive.Entry, where string) error {
	var size int64
	want := make(map[string]*archive.Entry, len(group))
	for _, e := range group {
		want[e.Path] = e
		size += e.Size
	}
	tr, err := archive.NewRangeReader(section, archive.MaxDecoded(len(group), size))
	if err != nil {
		return fmt.Errorf("read %s: %w%s", where, err, f.Note)
	}
	defer tr.Close()
	for len(want) > 0 {
		hdr, err := tr.Next()
		if err != nil && tr.SourceErr() != nil {
			return fmt.Errorf("read %s: %w%s", where, tr.SourceErr(), f.Note)
		}
		if err != nil {
			missing := ""
			for p := range want {
				missing = p
				break
			}
			if tr.Exceeded() {
				return fmt.Errorf("%w (looking for %q in %s)%s", archive.ErrTooLarge, missing, where, f.Note)
			}
			return fmt.Errorf("%w archive %s: %v before %q was found%s", archive.ErrCorrupt, where, err, missing, f.Note)
		}
		e, ok := want[hdr.Name]
		if !ok {
			continue
		}
		delete(want, hdr.Name)
		if hdr.Typeflag != '0' || hdr.Size != e.Size {
			return fmt.Errorf("%w archive %s: %q is type %q size %d, manifest says a file of %d bytes", archive.ErrCorrupt, where, e.Path, hdr.Typeflag, hdr.Size, e.Size)
		}
		if err := f.File(e, tr); err != nil {
			if serr := tr.SourceErr(); serr != nil {
				err = serr // a failed read, not a damaged archive
			}
			return fmt.Errorf("%s %s from %s: %w%s", f.Verb, e.Path, where, err, f.Note)
		}
	}
	return nil
}

// ReadChecked reads e's e.Size bytes of content from src (nil: none),
// hands them to sink (nil: they are only hashed) and checks their hash
// against the manifest's.
func ReadChecked(src io.Reader, e *archive.Entry, sink func([]byte) error) error {
	h := sha256.New()
	if src != nil {
		bp := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(bp)
		buf := *bp
		for left := e.Size; left > 0; {
			n, err := io.ReadFull(src, buf[:min(int64(len(buf)), left)])
			if err != nil {
				if errors.Is(err, archive.ErrTooLarge) {
					return err
				}
				return fmt.Errorf("%w: archive ends inside the file (%v)", archive.ErrCorrupt, err)
			}
			h.Write(buf[:n])
			if sink != nil {
				if err := sink(buf[:n]); err != nil {
					return err
				}
			}
			left -= int64(n)
		}
	}
	var sum archive.Hash
	h.Sum(sum[:0])
	if e.Hash == nil || sum != *e.Hash {
		return fmt.Errorf("%w: content hash %s does not match the manifest's %s", archive.ErrCorrupt, sum, e.Hash)
	}
	return nil
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// CountingReader adds the bytes read from R to N.
type CountingReader struct {
	R io.Reader
	N *atomic.Int64
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N.Add(int64(n))
	return n, err
}
