package check

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// SnapshotFS is a read-only fs.FS over some paths of a snapshot in the
// store, so that a check can read a snapshot without restoring it. Opening
// indexes the chosen paths from the manifest; reading a file fetches its
// byte range from the archive and verifies its hash.
type SnapshotFS struct {
	Header  archive.Header // the manifest's: ID, parent, selection
	ctx     context.Context
	st      store.Store
	id      string
	entries map[string]*archive.Entry
	kids    map[string][]string // directory → names of its indexed children
	// cache holds indexed files met while reading another one's range:
	// small files share frames, and a check reads them all.
	cache map[string][]byte
}

// maxSnapshotFSFile bounds what one read holds in memory: the files a
// check reads are keys and small XML documents.
const maxSnapshotFSFile = 64 << 20

// OpenSnapshotFS indexes the paths of snapshot id (empty: the head) for
// which keep returns true; a kept path's ancestors are listed too. Reads
// use ctx, which must outlive the SnapshotFS.
func OpenSnapshotFS(ctx context.Context, st store.Store, id string, keep func(rel string, dir bool) bool) (*SnapshotFS, error) {
	if id == "" {
		head, _, err := repo.LoadHead(ctx, st)
		if err != nil {
			return nil, err
		}
		if head == nil {
			return nil, fmt.Errorf("%w in %s yet", repo.ErrNoSnapshot, st)
		}
		id = head.Snapshot
	} else if err := repo.CheckID(id); err != nil {
		return nil, err
	}
	everything, err := selector.New(selector.Spec{Preset: "all"})
	if err != nil {
		return nil, err
	}
	pr, err := fetch.OpenPlan(ctx, st, id, everything, nil, nil)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	f := newSnapshotFS(ctx, st, pr.Header())
	f.id = id
	for e, err := range pr.All(ctx) {
		if err != nil {
			return nil, err
		}
		if keep(e.Path, e.Type == archive.TypeDir) {
			f.add(e)
		}
	}
	return f, nil
}

// SnapshotFSOf is OpenSnapshotFS over entries at hand, in manifest order:
// those a keep function chose of snapshot hdr.ID, as the process that
// committed it recorded them, so that it need not read that manifest back.
func SnapshotFSOf(ctx context.Context, st store.Store, hdr archive.Header, entries []*archive.Entry) *SnapshotFS {
	f := newSnapshotFS(ctx, st, hdr)
	for _, e := range entries {
		f.add(e)
	}
	return f
}

func newSnapshotFS(ctx context.Context, st store.Store, hdr archive.Header) *SnapshotFS {
	return &SnapshotFS{Header: hdr, ctx: ctx, st: st, id: hdr.ID, entries: map[string]*archive.Entry{}, kids: map[string][]string{".": nil}, cache: map[string][]byte{}}
}

// add indexes e, which comes after its ancestors' entries if they have any.
func (f *SnapshotFS) add(e *archive.Entry) {
	f.entries[e.Path] = e
	if e.Type == archive.TypeDir {
		if _, ok := f.kids[e.Path]; !ok {
			f.kids[e.Path] = nil
		}
	}
	// List the path in its parent, and the parent in its own, up to
	// the root: ancestors come first in the manifest, so they are known.
	for p := e.Path; p != "."; {
		dir := path.Dir(p)
		names, listed := f.kids[dir]
		if listed && slices.Contains(names, path.Base(p)) {
			break
		}
		f.kids[dir] = append(names, path.Base(p))
		if dir != "." && f.entries[dir] == nil {
			f.entries[dir] = &archive.Entry{Path: dir, Type: archive.TypeDir, Mode: 0o755, Implied: true}
		}
		p = dir
	}
}

// ID is the snapshot the FS reads.
func (f *SnapshotFS) ID() string { return f.id }

func (f *SnapshotFS) lookup(op, name string) (*archive.Entry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &archive.Entry{Path: ".", Type: archive.TypeDir, Mode: 0o755}, nil
	}
	e := f.entries[name]
	if e == nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

// Open implements fs.FS.
func (f *SnapshotFS) Open(name string) (fs.File, error) {
	e, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	switch e.Type {
	case archive.TypeDir:
		return &snapDir{info: entryInfo{e}, entries: f.list(name)}, nil
	case archive.TypeSymlink:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a symlink in the snapshot; not followed")}
	}
	data, err := f.read(e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &snapFile{info: entryInfo{e}, Reader: bytes.NewReader(data)}, nil
}

// ReadDir implements fs.ReadDirFS.
func (f *SnapshotFS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if e.Type != archive.TypeDir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return f.list(name), nil
}

// Stat implements fs.StatFS.
func (f *SnapshotFS) Stat(name string) (fs.FileInfo, error) {
	e, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return entryInfo{e}, nil
}

func (f *SnapshotFS) list(dir string) []fs.DirEntry {
	names := slices.Clone(f.kids[dir])
	slices.Sort(names)
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		p := n
		if dir != "." {
			p = dir + "/" + n
		}
		out = append(out, fs.FileInfoToDirEntry(entryInfo{f.entries[p]}))
	}
	return out
}

// read fetches one file's bytes from its archive range and checks them
// against the manifest's hash. Other indexed files the range holds are
// kept for later reads.
func (f *SnapshotFS) read(e *archive.Entry) ([]byte, error) {
	if data, ok := f.cache[e.Path]; ok {
		delete(f.cache, e.Path)
		return data, nil
	}
	if e.Size > maxSnapshotFSFile {
		return nil, fmt.Errorf("%d bytes is more than this reader holds (%d)", e.Size, maxSnapshotFSFile)
	}
	if !e.HasData() {
		return f.verify(e, []byte{})
	}
	key := repo.ArchiveKey(e.Archive)
	where := fmt.Sprintf("%s (bytes %d-%d)", repo.Name(f.st, key), e.Offset, e.Offset+e.Length-1)
	rc, err := f.st.Get(f.ctx, key, e.Offset, e.Length)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", where, err)
	}
	defer rc.Close()
	tr, err := archive.NewRangeReader(rc, archive.MaxDecoded(1, e.Size))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", where, err)
	}
	defer tr.Close()
	var data []byte
	for {
		hdr, err := tr.Next()
		if err != nil {
			if data != nil {
				return data, nil // the range ends after the file wanted
			}
			if serr := tr.SourceErr(); serr != nil {
				err = serr
			}
			return nil, fmt.Errorf("%w archive %s: %v before %q was found", archive.ErrCorrupt, where, err, e.Path)
		}
		other := f.entries[hdr.Name]
		if hdr.Name != e.Path && (other == nil || other.Type != archive.TypeFile || other.Archive != e.Archive ||
			other.Size != hdr.Size || f.cache[hdr.Name] != nil || data != nil && hdr.Size > 1<<20) {
			continue
		}
		if hdr.Name == e.Path && hdr.Size != e.Size {
			return nil, fmt.Errorf("%w archive %s: %q has %d bytes, the manifest says %d", archive.ErrCorrupt, where, e.Path, hdr.Size, e.Size)
		}
		buf := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, buf); err != nil {
			if hdr.Name != e.Path {
				continue // cut by the range's end: read on its own later
			}
			return nil, fmt.Errorf("%w archive %s: %q: %v", archive.ErrCorrupt, where, e.Path, err)
		}
		if hdr.Name != e.Path {
			if ok, _ := f.verify(other, buf); ok != nil {
				f.cache[hdr.Name] = buf
			}
			continue
		}
		if data, err = f.verify(e, buf); err != nil {
			return nil, err
		}
	}
}

func (f *SnapshotFS) verify(e *archive.Entry, data []byte) ([]byte, error) {
	if e.Hash == nil || sha256.Sum256(data) != [32]byte(*e.Hash) {
		return nil, fmt.Errorf("%w: content of %q in snapshot %s does not match the manifest's hash", archive.ErrCorrupt, e.Path, f.id)
	}
	return data, nil
}

// entryInfo is a manifest entry as an fs.FileInfo.
type entryInfo struct{ e *archive.Entry }

func (i entryInfo) Name() string { return path.Base(i.e.Path) }
func (i entryInfo) Size() int64  { return i.e.Size }
func (i entryInfo) Mode() fs.FileMode {
	switch i.e.Type {
	case archive.TypeDir:
		return i.e.Mode | fs.ModeDir
	case archive.TypeSymlink:
		return i.e.Mode | fs.ModeSymlink
	}
	return i.e.Mode
}
func (i entryInfo) ModTime() time.Time { return time.Unix(0, i.e.MTime) }
func (i entryInfo) IsDir() bool        { return i.e.Type == archive.TypeDir }
func (i entryInfo) Sys() any           { return nil }

type snapFile struct {
	info entryInfo
	*bytes.Reader
}

func (f *snapFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *snapFile) Close() error               { return nil }

type snapDir struct {
	info    entryInfo
	entries []fs.DirEntry
}

func (d *snapDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *snapDir) Close() error               { return nil }
func (d *snapDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.e.Path, Err: errors.New("is a directory")}
}

// ReadDir implements fs.ReadDirFile.
func (d *snapDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n]
	d.entries = d.entries[n:]
	return out, nil
}
