package snapshot

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// ImportOptions configures the import of a tar archive another tool wrote
// (the Jenkins operator's backup, N.tar.zstd) as one snapshot.
type ImportOptions struct {
	Source io.Reader // tar, compressed with zstd or gzip
	Name   string    // the source, for messages
	Store  store.Store
	// Root is the one top-level directory the archive may hold ("jobs");
	// Selection is what the archive covers, recorded in the snapshot so
	// that a restore of it touches nothing else. Paths of Root that
	// Selection leaves out are skipped.
	Root      string
	Selection *selector.Selector
	Level     archive.Level
	Log       zerolog.Logger
	// Recipients: see Options (Store encrypts to them).
	Recipients []string
	// OntoHead imports on top of an existing head (which stays in the
	// history as the import's parent) instead of refusing.
	OntoHead bool
}

// ImportResult describes the committed import.
type ImportResult struct {
	Result
	Skipped     int64  // paths the selection leaves out
	FirstSkip   string // one of them, for the log
	Synthesized int64  // parent directories the archive did not list
}

// ErrBadImport marks an archive that cannot be imported: not tar+zstd or
// tar+gzip, damaged, or holding a path that could land outside the home.
var ErrBadImport = errors.New("cannot import")

// ErrNotOperatorBackup marks an archive an import refuses for its shape
// (a path outside Root, a hard link) rather than for damage: extracted
// onto the home's volume, it can be snapshotted as any home.
var ErrNotOperatorBackup = errors.New("not an operator backup")

// ErrHeadExists refuses an import into a store that already has snapshots.
var ErrHeadExists = errors.New("the store already has snapshots")

// importing is one imported entry; first and last are the frames holding
// its header and its last byte.
type importing struct {
	e           *archive.Entry
	first, last int
}

// Import streams the archive into a new archive object of the store
// (decompressed and recompressed in homesnap's framing, never extracted
// to disk), then writes its manifest and record and moves the head, in
// the same commit order as a snapshot. The manifest's entries are sorted
// in memory: one small record per path.
func Import(ctx context.Context, o ImportOptions) (*ImportResult, error) {
	start := time.Now()
	if o.Level == 0 {
		o.Level = archive.Level(1)
	}
	head, headVersion, err := repo.LoadHead(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	s := &writer{st: o.Store, log: o.Log, recipients: o.Recipients, id: repo.NewID(start)}
	if head != nil {
		if !o.OntoHead {
			return nil, fmt.Errorf("%w: %s has head snapshot %s (%s); importing %s would make it the newest snapshot, holding only what the archive holds. Import into an empty store (a new prefix)",
				ErrHeadExists, o.Store, head.Snapshot, head.Time.Format(time.RFC3339), o.Name)
		}
		s.parentID, s.seq = head.Snapshot, head.Seq
	} else if err := repo.EnsureMarker(ctx, o.Store); err != nil {
		return nil, err
	}
	tr, closeSource, err := openTar(o.Source, o.Name)
	if err != nil {
		return nil, err
	}
	defer closeSource()

	res := &ImportResult{}
	entries, stored, err := s.importArchive(ctx, tr, &o, res)
	if err != nil {
		s.discard(ctx, err)
		return nil, err
	}
	if entries, err = completeTree(entries, o.Name, res); err != nil {
		s.discard(ctx, err)
		return nil, err
	}
	if len(entries) == 0 {
		err := fmt.Errorf("%w %s: it holds nothing under %s/ to import (%d paths skipped); nothing was imported", ErrBadImport, o.Name, o.Root, res.Skipped)
		s.discard(ctx, err)
		return nil, err
	}
	if err := s.writeImportManifest(ctx, entries, o.Selection, res); err != nil {
		s.discard(ctx, err)
		return nil, err
	}
	res.ID, res.Parent, res.Stored = s.id, s.parentID, stored
	rec := &repo.Record{
		ID: s.id, Parent: s.parentID, Time: start.UTC(), Host: hostname(),
		Entries: res.Totals.Entries, Files: res.Totals.Files, Bytes: res.Totals.Bytes,
		NewEntries: res.Totals.New, NewBytes: res.Totals.NewBytes, Stored: stored, Archives: res.Totals.Archives,
	}
	if err := s.commit(ctx, rec, headVersion, start); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// openTar recognises the compression by its magic number.
func openTar(src io.Reader, name string) (*tar.Reader, func(), error) {
	br := bufio.NewReaderSize(src, 64<<10)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, nil, fmt.Errorf("%w %s: %v: is it an operator backup (N.tar.zstd)?", ErrBadImport, name, err)
	}
	switch {
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// A window bound keeps a hostile header from claiming gigabytes.
		zr, err := zstd.NewReader(br, zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(256<<20), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("%w %s: %v", ErrBadImport, name, err)
		}
		return tar.NewReader(zr), zr.Close, nil
	case magic[0] == 0x1f && magic[1] == 0x8b: // the operator's older .tar.gz
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("%w %s: %v", ErrBadImport, name, err)
		}
		return tar.NewReader(zr), func() { zr.Close() }, nil
	}
	return nil, nil, fmt.Errorf("%w %s: neither zstd nor gzip compressed: want the operator's N.tar.zstd (or N.tar.gz)", ErrBadImport, name)
}

// importArchive copies the archive's entries into this snapshot's archive,
// checking each path, and returns them (unsorted) with the stored size.
func (s *writer) importArchive(ctx context.Context, tr *tar.Reader, o *ImportOptions, res *ImportResult) ([]importing, int64, error) {
	comp, err := archive.NewCompressor(o.Level, 1)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up := repo.NewLazyUpload(ctx, o.Store, repo.ArchiveKey(s.id))
	var offs, lens []int64
	fw := archive.NewFrameWriter(comp, func(frame []byte) error {
		offs, lens = append(offs, up.Written()), append(lens, int64(len(frame)))
		_, err := up.Write(frame)
		comp.Release(frame)
		return err
	})
	fail := func(err error) ([]importing, int64, error) { return nil, 0, up.Abort(err) }
	var out []importing
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(fmt.Errorf("%w %s: %v (after %d entries)", ErrBadImport, o.Name, err, len(out)))
		}
		e, err := importEntry(hdr, o)
		if err != nil {
			return fail(err)
		}
		if e == nil {
			continue // a path the archive's tool leaves out
		}
		if !o.Selection.Selected(e.Path) {
			res.Skipped++
			if res.FirstSkip == "" {
				res.FirstSkip = e.Path
			}
			continue
		}
		if err := fw.WriteHeader(e); err != nil {
			return fail(err)
		}
		it := importing{e: e, first: fw.Frame()}
		if e.Type == archive.TypeFile {
			h := sha256.New()
			n, err := io.CopyBuffer(io.MultiWriter(fw, h), tr, buf)
			if err != nil {
				return fail(fmt.Errorf("%w %s: %s: %v", ErrBadImport, o.Name, e.Path, err))
			}
			if n != e.Size {
				return fail(fmt.Errorf("%w %s: %s ends after %d of %d bytes", ErrBadImport, o.Name, e.Path, n, e.Size))
			}
			var sum archive.Hash
			h.Sum(sum[:0])
			e.Hash = &sum
		}
		it.last = fw.Frame()
		out = append(out, it)
	}
	if err := fw.Cut(); err != nil {
		return fail(err)
	}
	if up.Started() {
		if _, err := up.Write(comp.EndFrame()); err != nil {
			return fail(err)
		}
	}
	if err := up.Finish(); err != nil {
		return nil, 0, fmt.Errorf("upload archive %s: %w", repo.Name(o.Store, repo.ArchiveKey(s.id)), err)
	}
	if up.Started() {
		s.written = append(s.written, repo.ArchiveKey(s.id))
	}
	for i := range out {
		if e := out[i].e; e.HasData() {
			e.Archive = s.id
			e.Offset = offs[out[i].first]
			e.Length = offs[out[i].last] + lens[out[i].last] - e.Offset
		}
	}
	return out, up.Written(), nil
}

// importEntry maps a tar header to a manifest entry, refusing what could
// land outside the home or is no file, directory or symbolic link. It
// returns nil for what the tar stream carries beside the tree.
func importEntry(h *tar.Header, o *ImportOptions) (*archive.Entry, error) {
	name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %q: %s; nothing was imported", ErrBadImport, o.Name, h.Name, fmt.Sprintf(format, args...))
	}
	notBackup := func(format string, args ...any) error {
		return fmt.Errorf("%w (%w)", bad(format, args...), ErrNotOperatorBackup)
	}
	if name == "" || name == "." {
		return nil, nil // the archive's own root
	}
	if err := archive.CheckPath(name); err != nil {
		return nil, bad("%v", err)
	}
	// Linux's PATH_MAX and NAME_MAX: a longer path could not be restored,
	// and would make the manifest line unreadable.
	if len(name) > 4096 || len(h.Linkname) > 4096 || slices.ContainsFunc(strings.Split(name, "/"), func(c string) bool { return len(c) > 255 }) {
		return nil, bad("is longer than a Linux path or file name may be")
	}
	if first, _, _ := strings.Cut(name, "/"); first != o.Root {
		return nil, notBackup("lies outside %s/; an operator backup holds %s/ only", o.Root, o.Root)
	}
	e := &archive.Entry{
		Path: name, UID: h.Uid, GID: h.Gid, MTime: h.ModTime.UnixNano(),
		Mode: fs.FileMode(h.Mode).Perm(),
	}
	if h.Mode&0o2000 != 0 {
		e.Mode |= fs.ModeSetgid
	}
	if h.Mode&0o1000 != 0 {
		e.Mode |= fs.ModeSticky
	}
	if h.Mode&0o4000 != 0 {
		return nil, bad("is setuid; refusing to carry it into a Jenkins home")
	}
	switch h.Typeflag {
	case tar.TypeReg: // the reader reports the old TypeRegA as TypeReg
		e.Type, e.Size = archive.TypeFile, h.Size
	case tar.TypeDir:
		e.Type = archive.TypeDir
	case tar.TypeSymlink:
		e.Type, e.Link = archive.TypeSymlink, h.Linkname
		target := path.Join(path.Dir(name), h.Linkname)
		if h.Linkname == "" || path.IsAbs(h.Linkname) || target == ".." || strings.HasPrefix(target, "../") {
			return nil, bad("is a symbolic link to %q, outside the home", h.Linkname)
		}
	case tar.TypeLink:
		return nil, notBackup("is a hard link to %q, which an import cannot carry", h.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return nil, bad("is a device file or FIFO, which has no place in a Jenkins home")
	default:
		return nil, bad("has tar type %q, which an import cannot carry", h.Typeflag)
	}
	return e, nil
}

// completeTree sorts the entries into walk order, refuses duplicates and
// paths below something that is not a directory (a path through a
// symbolic link could land outside the home), and adds the parent
// directories the archive did not list, owned like the entry below them.
func completeTree(in []importing, name string, res *ImportResult) ([]importing, error) {
	slices.SortFunc(in, func(a, b importing) int { return archive.ComparePaths(a.e.Path, b.e.Path) })
	out := make([]importing, 0, len(in))
	// The entries above the current path: in walk order a path's
	// ancestors all come before it and everything between lies below them.
	var above []*archive.Entry
	for _, it := range in {
		e := it.e
		if n := len(out); n > 0 && out[n-1].e.Path == e.Path {
			return nil, fmt.Errorf("%w %s: %q appears twice; nothing was imported", ErrBadImport, name, e.Path)
		}
		for len(above) > 0 && !strings.HasPrefix(e.Path, above[len(above)-1].Path+"/") {
			above = above[:len(above)-1]
		}
		have := ""
		if len(above) > 0 {
			top := above[len(above)-1]
			if top.Type != archive.TypeDir {
				return nil, fmt.Errorf("%w %s: %q lies below %q, which is not a directory; nothing was imported", ErrBadImport, name, e.Path, top.Path)
			}
			have = top.Path
		}
		var missing []string
		for p := archive.Parent(e.Path); p != have; p = archive.Parent(p) {
			missing = append(missing, p)
		}
		for _, p := range slices.Backward(missing) {
			d := &archive.Entry{Path: p, Type: archive.TypeDir, Mode: 0o755, UID: e.UID, GID: e.GID, MTime: e.MTime}
			res.Synthesized++
			out = append(out, importing{e: d})
			above = append(above, d)
		}
		out = append(out, it)
		above = append(above, e)
	}
	return out, nil
}

// writeImportManifest stores the manifest of the sorted entries.
func (s *writer) writeImportManifest(ctx context.Context, entries []importing, sel *selector.Selector, res *ImportResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := repo.UpgradeMarker(ctx, s.st); err != nil { // a manifest older releases cannot read
		return err
	}
	up := repo.NewUpload(ctx, s.st, repo.ManifestKey(s.id))
	mw, err := archive.NewManifestWriter(up, archive.Header{
		ID: s.id, Parent: s.parentID, Created: time.Now().UTC(), Host: hostname(), Selection: archive.Selection(sel.Spec()),
	})
	if err != nil {
		return up.Abort(err)
	}
	var newEntries, newBytes int64
	for _, it := range entries {
		if err := mw.Write(it.e); err != nil {
			return up.Abort(err)
		}
		newEntries++
		newBytes += it.e.Size
	}
	if res.Totals, err = mw.Close(newEntries, newBytes); err != nil {
		return up.Abort(err)
	}
	if err := up.Finish(); err != nil {
		return fmt.Errorf("upload manifest %s: %w", repo.Name(s.st, repo.ManifestKey(s.id)), err)
	}
	s.written = append(s.written, repo.ManifestKey(s.id))
	return nil
}
