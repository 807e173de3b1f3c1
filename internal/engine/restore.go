package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/store"
)

// RestoreOptions configures one restore.
type RestoreOptions struct {
	Home     string
	Store    store.Store
	Snapshot string // empty: the newest
	Jobs     int    // parallel ranged reads; 0 means 8
	// AllowEmpty makes a store without snapshots a successful no-op (first
	// boot of an init container) instead of an error.
	AllowEmpty bool
	Log        zerolog.Logger
}

// RestoreResult describes a finished restore.
type RestoreResult struct {
	ID      string
	Empty   bool // the store had no snapshot and AllowEmpty was set
	Entries int64
	Files   int64
	Bytes   int64
	Fetched int64 // compressed bytes read from the store
	Elapsed time.Duration
}

// stagePrefix names the staging directory a restore builds inside the home,
// on the same volume, before anything is moved into place.
const stagePrefix = scan.ReservedPrefix + "restore-"

// Restore makes the selected paths of the home equal to a snapshot. Every
// file is written into a staging directory on the home's volume and checked
// against its hash; only then are paths moved into place. Any failure before
// that leaves the home exactly as it was; a failure while moving rolls the
// moves back.
func Restore(ctx context.Context, o RestoreOptions) (*RestoreResult, error) {
	start := time.Now()
	if err := checkHome(o.Home, true); err != nil {
		return nil, err
	}
	if o.Jobs <= 0 {
		o.Jobs = 8
	}
	id := o.Snapshot
	if id == "" {
		head, _, err := repo.LoadHead(ctx, o.Store)
		if err != nil {
			return nil, err
		}
		if head == nil {
			if o.AllowEmpty {
				return &RestoreResult{Empty: true, Elapsed: time.Since(start)}, nil
			}
			return nil, fmt.Errorf("%w in %s yet: take one with `snapshot --once`, or pass --allow-empty for a first boot", repo.ErrNoSnapshot, o.Store)
		}
		id = head.Snapshot
	} else if err := repo.CheckID(id); err != nil {
		return nil, err
	}
	r := &restorer{o: o, id: id}
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	return &RestoreResult{
		ID: id, Entries: r.entries, Files: r.files, Bytes: r.bytes,
		Fetched: r.fetched.Load(), Elapsed: time.Since(start),
	}, nil
}

// planReader streams a snapshot's manifest and validates it on the way:
// paths must be safe (the manifest reader checks them), and every path's
// parent must be a directory of the same snapshot, so no entry can be
// reached through a symlink or a file. Only the current entry's ancestors
// are held in memory, never the whole tree: a restore reads the manifest
// once to stage and again to commit.
type planReader struct {
	s    store.Store
	id   string
	m    *archive.ManifestReader
	dirs []string // ancestors of the current entry
	n    int64
}

func openPlan(ctx context.Context, s store.Store, id string) (*planReader, error) {
	m, err := openManifest(ctx, s, id)
	if err != nil {
		return nil, err
	}
	return &planReader{s: s, id: id, m: m}, nil
}

func (p *planReader) Close() { p.m.Close() }

// next returns the next checked entry, or io.EOF after a complete manifest.
func (p *planReader) next(ctx context.Context) (*archive.Entry, error) {
	e, err := p.m.Next()
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", repo.Name(p.s, repo.ManifestKey(p.id)), err)
	}
	parent := archive.Parent(e.Path)
	for len(p.dirs) > 0 && p.dirs[len(p.dirs)-1] != parent {
		p.dirs = p.dirs[:len(p.dirs)-1]
	}
	if parent != "" && len(p.dirs) == 0 {
		return nil, fmt.Errorf("%s: %w manifest: %q has no parent directory entry (a path through a symlink or file is refused)", repo.Name(p.s, repo.ManifestKey(p.id)), archive.ErrCorrupt, e.Path)
	}
	if e.Type == archive.TypeDir {
		p.dirs = append(p.dirs, e.Path)
	}
	if e.HasData() {
		if err := repo.CheckID(e.Archive); err != nil {
			return nil, fmt.Errorf("%s: %w manifest: %q points at archive %q", repo.Name(p.s, repo.ManifestKey(p.id)), archive.ErrCorrupt, e.Path, e.Archive)
		}
	}
	if p.n++; p.n%65536 == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

type restorer struct {
	o       RestoreOptions
	id      string
	header  archive.Header // the manifest's header, read while staging
	entries int64          // counted while staging
	files   int64
	bytes   int64
	stage   string // <home>/.homesnap-restore-<id>
	tree    string // stage/tree: the snapshot as it will be
	root    bool   // running as root: restore numeric owners
	umask   fs.FileMode
	fetched atomic.Int64
}

func (r *restorer) run(ctx context.Context) error {
	if err := r.cleanLeftovers(); err != nil {
		return err
	}
	r.stage = filepath.Join(r.o.Home, stagePrefix+r.id)
	r.tree = filepath.Join(r.stage, "tree")
	r.root = os.Geteuid() == 0
	r.umask = processUmask()
	if err := os.Mkdir(r.stage, 0o700); err != nil {
		return fmt.Errorf("create staging directory: %w (is the home writable and is there space?)", err)
	}
	ok := false
	defer func() {
		if err := os.RemoveAll(r.stage); err != nil && ok {
			r.o.Log.Warn().Err(err).Str("dir", r.stage).Msg("could not remove the staging directory")
		}
	}()
	if err := r.stageTree(ctx); err != nil {
		return err
	}
	if err := syncFS(r.stage); err != nil {
		return fmt.Errorf("sync staged files: %w", err)
	}
	if err := r.commit(ctx); err != nil {
		return err
	}
	ok = true
	return syncFS(r.o.Home)
}

// cleanLeftovers removes staging directories of restores that were killed.
// The paths they displaced are gone by design: a re-run restores the
// snapshot the killed run was restoring.
func (r *restorer) cleanLeftovers() error {
	old, _ := filepath.Glob(filepath.Join(r.o.Home, stagePrefix+"*"))
	for _, dir := range old {
		r.o.Log.Warn().Str("dir", dir).Msg("removing the staging directory of an interrupted restore")
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove leftover staging directory %s: %w", dir, err)
		}
	}
	return nil
}

// stageTree builds the whole snapshot under r.tree from one pass over the
// manifest: directories, symlinks and empty files as their entries come,
// file contents from ranged reads that a bounded pool of workers runs while
// the manifest is still being read. Within one archive the manifest's order
// is the archive's order (archives are written in walk order), so each
// archive has one open run that grows until the next entry is too far or
// the run too long, and is then handed to the workers.
func (r *restorer) stageTree(ctx context.Context) error {
	if err := os.Mkdir(r.tree, 0o700); err != nil {
		return err
	}
	pr, err := openPlan(ctx, r.o.Store, r.id)
	if err != nil {
		return err
	}
	defer pr.Close()
	r.header = pr.m.Header
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(sctx)
	g.SetLimit(r.o.Jobs)
	serr := r.stageEntries(gctx, pr, func(rn *run) {
		g.Go(func() error { return r.fetchRun(gctx, rn) })
	})
	if serr != nil {
		cancel() // stop the workers before the staging area is removed
	}
	werr := g.Wait()
	switch {
	case serr != nil && !errors.Is(serr, context.Canceled):
		return serr
	case werr != nil:
		return werr
	case serr != nil:
		return serr
	}
	return ctx.Err()
}

// stageEntries reads the manifest, stages what needs no data and passes
// every finished run to dispatch, which blocks while all workers are busy.
func (r *restorer) stageEntries(ctx context.Context, pr *planReader, dispatch func(*run)) error {
	open := map[string]*run{} // archive → its run being formed
	for {
		e, err := pr.next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		r.entries++
		if e.Type == archive.TypeFile {
			r.files++
			r.bytes += e.Size
		}
		p := r.staged(e.Path)
		switch {
		case e.Type == archive.TypeDir:
			err = unix.Mkdir(p, 0o700) // final modes once everything is in
		case e.Type == archive.TypeSymlink:
			if err = unix.Symlink(e.Link, p); err == nil {
				err = r.setMeta(p, e, true)
			}
		case !e.HasData():
			err = r.writeFile(p, e, nil)
		default:
			if cur := open[e.Archive]; cur == nil || !cur.add(e) {
				if cur != nil {
					dispatch(cur)
				}
				open[e.Archive] = newRun(e)
			}
		}
		if err != nil {
			return fmt.Errorf("stage %s: %w", e.Path, err)
		}
		if r.entries%4096 == 0 && ctx.Err() != nil {
			return ctx.Err() // a worker failed
		}
	}
	// The remaining runs, in archive order.
	ids := make([]string, 0, len(open))
	for id := range open {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		dispatch(open[id])
	}
	return nil
}

func (r *restorer) staged(rel string) string { return filepath.Join(r.tree, filepath.FromSlash(rel)) }

// run is one ranged read: a span of one archive holding the listed entries.
type run struct {
	archive    string
	start, end int64
	entries    []*archive.Entry
}

// Runs are cut at this many bytes so that reads spread over the workers,
// and bridge gaps this small rather than paying for another request.
const (
	maxRun = 32 << 20
	maxGap = 1 << 20
)

func newRun(e *archive.Entry) *run {
	return &run{archive: e.Archive, start: e.Offset, end: e.Offset + e.Length, entries: []*archive.Entry{e}}
}

// add extends the run with an entry of its archive if the entry lies close
// enough after the run's start and the run stays short enough. An entry
// before the start (a manifest whose offsets go backwards) is refused, and
// the caller starts a new run: correctness never depends on the order.
func (rn *run) add(e *archive.Entry) bool {
	end := e.Offset + e.Length
	if e.Offset < rn.start || e.Offset > rn.end+maxGap || max(end, rn.end)-rn.start > maxRun {
		return false
	}
	rn.end = max(rn.end, end)
	rn.entries = append(rn.entries, e)
	return true
}

// fetchRun reads one range and writes the files it holds.
func (r *restorer) fetchRun(ctx context.Context, rn *run) error {
	key := repo.ArchiveKey(rn.archive)
	where := fmt.Sprintf("%s (bytes %d-%d)", repo.Name(r.o.Store, key), rn.start, rn.end-1)
	rc, err := r.o.Store.Get(ctx, key, rn.start, rn.end-rn.start)
	if err != nil {
		if errors.Is(err, store.ErrNotExist) {
			return fmt.Errorf("archive %s is missing (needed for %s): the store is damaged; nothing was changed in the home", repo.Name(r.o.Store, key), rn.entries[0].Path)
		}
		return fmt.Errorf("read %s: %w; nothing was changed in the home", where, err)
	}
	defer rc.Close()
	counted := &countingReader{r: rc, n: &r.fetched}
	tr, err := archive.NewRangeReader(counted)
	if err != nil {
		return fmt.Errorf("read %s: %w; nothing was changed in the home", where, err)
	}
	defer tr.Close()
	want := make(map[string]*archive.Entry, len(rn.entries))
	for _, e := range rn.entries {
		want[e.Path] = e
	}
	for len(want) > 0 {
		hdr, err := tr.Next()
		if err != nil && tr.SourceErr() != nil {
			return fmt.Errorf("read %s: %w; nothing was changed in the home", where, tr.SourceErr())
		}
		if err != nil {
			missing := ""
			for p := range want {
				missing = p
				break
			}
			return fmt.Errorf("%w archive %s: %v before %q was found; nothing was changed in the home", archive.ErrCorrupt, where, err, missing)
		}
		e, ok := want[hdr.Name]
		if !ok {
			continue
		}
		delete(want, hdr.Name)
		if hdr.Typeflag != '0' || hdr.Size != e.Size {
			return fmt.Errorf("%w archive %s: %q is type %q size %d, manifest says a file of %d bytes", archive.ErrCorrupt, where, e.Path, hdr.Typeflag, hdr.Size, e.Size)
		}
		if err := r.writeFile(r.staged(e.Path), e, tr); err != nil {
			if serr := tr.SourceErr(); serr != nil {
				err = serr // a failed read, not a damaged archive
			}
			return fmt.Errorf("restore %s from %s: %w; nothing was changed in the home", e.Path, where, err)
		}
	}
	return ctx.Err()
}

// writeFile creates a staged file with content from src (nil: empty),
// checks its hash and applies its metadata. It works on the raw descriptor:
// at hundreds of thousands of files, every avoided syscall counts.
func (r *restorer) writeFile(p string, e *archive.Entry, src io.Reader) error {
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(e.Mode.Perm()))
	if err != nil {
		return err
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	h := sha256.New()
	if src != nil {
		bp := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(bp)
		buf := *bp
		for left := e.Size; left > 0; {
			n, err := io.ReadFull(src, buf[:min(int64(len(buf)), left)])
			if err != nil {
				return fmt.Errorf("%w: archive ends inside the file (%v)", archive.ErrCorrupt, err)
			}
			h.Write(buf[:n])
			if err := writeAll(fd, buf[:n]); err != nil {
				return err
			}
			left -= int64(n)
		}
	}
	var sum archive.Hash
	h.Sum(sum[:0])
	if e.Hash == nil || sum != *e.Hash {
		return fmt.Errorf("%w: content hash %s does not match the manifest's %s", archive.ErrCorrupt, sum, e.Hash)
	}
	chowned := false
	if r.root && (e.UID != 0 || e.GID != 0) {
		if err := unix.Fchown(fd, e.UID, e.GID); err != nil {
			return err
		}
		chowned = true
	}
	// open() applied the umask, and chown cleared setuid/setgid.
	if e.Mode != e.Mode.Perm()&^r.umask || (chowned && e.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0) {
		if err := unix.Fchmod(fd, unixMode(e.Mode)); err != nil {
			return err
		}
	}
	if err := futimens(fd, e.MTime); err != nil {
		return err
	}
	err = unix.Close(fd)
	fd = -1
	return err
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		b = b[n:]
	}
	return nil
}

// futimens sets an open file's mtime (and atime) with nanoseconds.
func futimens(fd int, ns int64) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(ns), unix.NsecToTimespec(ns)}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// unixMode converts permission and special bits to st_mode bits.
func unixMode(m fs.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		mode |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		mode |= unix.S_ISVTX
	}
	return mode
}

// processUmask reads the umask without changing it (a temporary change
// would race with other goroutines creating files).
func processUmask() fs.FileMode {
	data, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(n)
				}
			}
		}
	}
	return 0o777 // unknown: always chmod
}

// setMeta applies owner (as root), mode and mtime without following links.
func (r *restorer) setMeta(p string, e *archive.Entry, link bool) error {
	if r.root {
		if err := os.Lchown(p, e.UID, e.GID); err != nil {
			return err
		}
	}
	if !link {
		// After chown: chown clears setuid/setgid bits.
		if err := os.Chmod(p, e.Mode); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.MTime), unix.NsecToTimespec(e.MTime)}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// syncFS flushes the filesystem holding dir: one syncfs instead of an
// fsync per file.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}
