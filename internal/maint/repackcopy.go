package maint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/repo"
)

// copyBatch is how many versions a copier queues before it copies them.
// The queue is the only place a repack holds entries: a million copied
// files cost a batch of entries plus 12 bytes each, not 500. A range split
// between two batches is read twice, about one frame per batch. A
// variable, so that tests split ranges between batches.
var copyBatch = 8192

// copier writes the versions a repack keeps into its new archive while the
// kept manifests are scanned, in batches of the scan's path order, each
// batch sorted by where its versions are stored so that a frame of small
// files is fetched and decoded once. It remembers, per copied version in
// the order they were queued, the frames it landed in.
type copier struct {
	ctx    context.Context
	o      RepackOptions
	id     string
	chosen map[string]bool // the archives repacked

	comp       *archive.Compressor
	up         *repo.Upload
	fw         *archive.FrameWriter
	offs, lens []int64 // per frame of the new archive

	queue  []queued
	landed []landed // per version queued, by its number
	// Two versions of one path must not start in the same frame: a
	// reader finds a file in its range by name.
	framePaths map[string]bool
	frame      int
	buf        []byte
}

type queued struct {
	n int32
	e *archive.Entry
}

// landed is where a copied version's tar entry lies: frames first to last
// of the new archive; sum fingerprints its path, so that a layer rewrite
// never points an entry at another file's bytes.
type landed struct {
	first, last int32
	sum         uint32
}

func pathSum(p string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(p))
	return h.Sum32()
}

func newCopier(ctx context.Context, o RepackOptions, id string, chosen map[string]bool) (*copier, error) {
	comp, err := archive.NewCompressor(o.Level, 1)
	if err != nil {
		return nil, err
	}
	c := &copier{ctx: ctx, o: o, id: id, chosen: chosen, comp: comp, framePaths: map[string]bool{}, frame: -1, buf: make([]byte, 256<<10)}
	c.up = repo.NewUpload(ctx, o.Store, repo.ArchiveKey(id))
	var pos int64
	c.fw = archive.NewFrameWriter(comp, func(frame []byte) error {
		c.offs, c.lens = append(c.offs, pos), append(c.lens, int64(len(frame)))
		pos += int64(len(frame))
		_, err := c.up.Write(frame)
		comp.Release(frame)
		return err
	})
	return c, nil
}

// repacked tells whether entry e points into an archive being repacked.
func (c *copier) repacked(e *archive.Entry) bool {
	return e.Type != archive.TypeDeleted && c.chosen[e.Archive]
}

// add queues version e for copying and returns its number.
func (c *copier) add(e *archive.Entry) (int32, error) {
	n := int32(len(c.landed))
	c.landed = append(c.landed, landed{sum: pathSum(e.Path)})
	c.queue = append(c.queue, queued{n, e})
	if len(c.queue) < copyBatch {
		return n, nil
	}
	return n, c.flush()
}

// copied is how many versions were queued.
func (c *copier) copied() int { return len(c.landed) }

// flush copies the queued versions, one ranged read per stored range.
func (c *copier) flush() error {
	q := c.queue
	slices.SortFunc(q, func(a, b queued) int {
		return cmp.Or(strings.Compare(a.e.Archive, b.e.Archive), cmp.Compare(a.e.Offset, b.e.Offset), archive.ComparePaths(a.e.Path, b.e.Path))
	})
	for len(q) > 0 {
		n := 1
		for n < len(q) && q[n].e.Archive == q[0].e.Archive && q[n].e.Offset == q[0].e.Offset {
			n++
		}
		if err := c.copyRange(q[:n]); err != nil {
			return err
		}
		q = q[n:]
	}
	clear(c.queue)
	c.queue = c.queue[:0]
	return nil
}

// copyRange copies versions that start in the same stored range, each
// checked against its hash.
func (c *copier) copyRange(group []queued) error {
	a, off := group[0].e.Archive, group[0].e.Offset
	want := make(map[string]queued, len(group))
	var end, total int64
	for _, q := range group {
		want[q.e.Path] = q
		end = max(end, off+q.e.Length)
		total += q.e.Size
	}
	key := repo.ArchiveKey(a)
	at := fmt.Sprintf("%s (bytes %d-%d)", repo.Name(c.o.Store, key), off, end-1)
	rc, err := c.o.Store.Get(c.ctx, key, off, end-off)
	if err != nil {
		return fmt.Errorf("repack: read %s: %w", at, err)
	}
	defer rc.Close()
	tr, err := archive.NewRangeReader(rc, archive.MaxDecoded(len(group), total))
	if err != nil {
		return fmt.Errorf("repack: read %s: %w", at, err)
	}
	defer tr.Close()
	for len(want) > 0 {
		hdr, err := tr.Next()
		if err != nil {
			return fmt.Errorf("repack: %w archive %s: %v before %q was found", archive.ErrCorrupt, at, err, group[0].e.Path)
		}
		q, ok := want[hdr.Name]
		if !ok {
			continue
		}
		delete(want, hdr.Name)
		if c.framePaths[q.e.Path] && c.fw.Frame() == c.frame {
			if err := c.fw.Cut(); err != nil {
				return err
			}
		}
		first, last, err := fetch.CopyEntry(c.fw, tr, hdr.Size, q.e, c.buf, at)
		if err != nil {
			return fmt.Errorf("repack: %w", err)
		}
		if first != c.frame {
			clear(c.framePaths)
			c.frame = first
		}
		c.framePaths[q.e.Path] = true
		c.landed[q.n].first, c.landed[q.n].last = int32(first), int32(last)
	}
	return nil
}

// errNothingCopied drops a new archive no version was copied into.
var errNothingCopied = errors.New("repack: nothing to copy")

// finish copies what is still queued and ends the archive; with nothing
// copied, it leaves no archive.
func (c *copier) finish() error {
	if c.copied() == 0 {
		c.abort(errNothingCopied)
		return nil
	}
	err := c.flush()
	if err == nil {
		err = c.fw.Cut()
	}
	if err == nil {
		_, err = c.up.Write(c.comp.EndFrame())
	}
	if err != nil {
		return c.abort(err)
	}
	if err := c.up.Finish(); err != nil {
		return fmt.Errorf("repack: upload %s: %w", repo.Name(c.o.Store, repo.ArchiveKey(c.id)), err)
	}
	return nil
}

// abort drops the new archive (no object appears) and returns err.
func (c *copier) abort(err error) error { return c.up.Abort(err) }

// where returns copied version n's place in the new archive, or false when
// the entry naming it is not at path (its layer changed since the scan).
func (c *copier) where(n int32, path string) (where, bool) {
	l := c.landed[n]
	if l.sum != pathSum(path) {
		return where{}, false
	}
	return where{c.offs[l.first], c.offs[l.last] + c.lens[l.last] - c.offs[l.first]}, true
}
