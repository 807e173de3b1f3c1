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
		head, _, err := loadHead(ctx, o.Store)
		if err != nil {
			return nil, err
		}
		if head == nil {
			if o.AllowEmpty {
				return &RestoreResult{Empty: true, Elapsed: time.Since(start)}, nil
			}
			return nil, fmt.Errorf("%w in %s yet: take one with `snapshot --once`, or pass --allow-empty for a first boot", ErrNoSnapshot, o.Store)
		}
		id = head.Snapshot
	} else if err := CheckID(id); err != nil {
		return nil, err
	}
	plan, err := loadPlan(ctx, o.Store, id)
	if err != nil {
		return nil, err
	}
	r := &restorer{o: o, plan: plan}
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	return &RestoreResult{
		ID: id, Entries: int64(len(plan.entries)), Files: plan.files, Bytes: plan.bytes,
		Fetched: r.fetched.Load(), Elapsed: time.Since(start),
	}, nil
}

// plan is a snapshot's manifest, checked and held in memory.
type plan struct {
	id      string
	header  archive.Header
	entries []*archive.Entry
	files   int64
	bytes   int64
}

// loadPlan reads and validates a manifest: paths must be safe, and every
// path's parent must be a directory of the same snapshot, so no entry can
// be reached through a symlink or a file.
func loadPlan(ctx context.Context, s store.Store, id string) (*plan, error) {
	m, err := openManifest(ctx, s, id)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	p := &plan{id: id, header: m.Header}
	var dirs []string // ancestors of the current entry
	for {
		e, err := m.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", storeName(s, manifestKey(id)), err)
		}
		parent := archive.Parent(e.Path)
		for len(dirs) > 0 && dirs[len(dirs)-1] != parent {
			dirs = dirs[:len(dirs)-1]
		}
		if parent != "" && len(dirs) == 0 {
			return nil, fmt.Errorf("%s: %w manifest: %q has no parent directory entry (a path through a symlink or file is refused)", storeName(s, manifestKey(id)), archive.ErrCorrupt, e.Path)
		}
		if e.Type == archive.TypeDir {
			dirs = append(dirs, e.Path)
		}
		if e.Type == archive.TypeFile {
			p.files++
			p.bytes += e.Size
		}
		if e.HasData() {
			if err := CheckID(e.Archive); err != nil {
				return nil, fmt.Errorf("%s: %w manifest: %q points at archive %q", storeName(s, manifestKey(id)), archive.ErrCorrupt, e.Path, e.Archive)
			}
		}
		p.entries = append(p.entries, e)
		if len(p.entries)%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

type restorer struct {
	o       RestoreOptions
	plan    *plan
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
	r.stage = filepath.Join(r.o.Home, stagePrefix+r.plan.id)
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

// stageTree builds the whole snapshot under r.tree: directories, symlinks
// and empty files first, then file contents from parallel ranged reads.
func (r *restorer) stageTree(ctx context.Context) error {
	if err := os.Mkdir(r.tree, 0o700); err != nil {
		return err
	}
	for _, e := range r.plan.entries {
		p := r.staged(e.Path)
		var err error
		switch {
		case e.Type == archive.TypeDir:
			err = unix.Mkdir(p, 0o700) // final modes once everything is in
		case e.Type == archive.TypeSymlink:
			if err = unix.Symlink(e.Link, p); err == nil {
				err = r.setMeta(p, e, true)
			}
		case !e.HasData():
			err = r.writeFile(p, e, nil)
		}
		if err != nil {
			return fmt.Errorf("stage %s: %w", e.Path, err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.o.Jobs)
	for _, run := range planRuns(r.plan.entries) {
		g.Go(func() error { return r.fetchRun(gctx, run) })
	}
	return g.Wait()
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

// planRuns groups the entries with data into ranged reads, in archive order.
func planRuns(entries []*archive.Entry) []*run {
	var data []*archive.Entry
	for _, e := range entries {
		if e.HasData() {
			data = append(data, e)
		}
	}
	slices.SortStableFunc(data, func(a, b *archive.Entry) int {
		if a.Archive != b.Archive {
			if a.Archive < b.Archive {
				return -1
			}
			return 1
		}
		return int(a.Offset - b.Offset)
	})
	var runs []*run
	var cur *run
	for _, e := range data {
		end := e.Offset + e.Length
		if cur != nil && cur.archive == e.Archive && e.Offset <= cur.end+maxGap && max(end, cur.end)-cur.start <= maxRun {
			cur.end = max(cur.end, end)
			cur.entries = append(cur.entries, e)
			continue
		}
		cur = &run{archive: e.Archive, start: e.Offset, end: end, entries: []*archive.Entry{e}}
		runs = append(runs, cur)
	}
	return runs
}

// fetchRun reads one range and writes the files it holds.
func (r *restorer) fetchRun(ctx context.Context, rn *run) error {
	key := archiveKey(rn.archive)
	where := fmt.Sprintf("%s (bytes %d-%d)", storeName(r.o.Store, key), rn.start, rn.end-1)
	rc, err := r.o.Store.Get(ctx, key, rn.start, rn.end-rn.start)
	if err != nil {
		if errors.Is(err, store.ErrNotExist) {
			return fmt.Errorf("archive %s is missing (needed for %s): the store is damaged; nothing was changed in the home", storeName(r.o.Store, key), rn.entries[0].Path)
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
