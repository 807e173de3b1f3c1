package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/store"
)

// run is one ranged read: a span of one archive holding the listed entries.
type run struct {
	archive    string
	start, end int64
	entries    []*archive.Entry
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

func newRun(e *archive.Entry) *run {
	return &run{archive: e.Archive, start: e.Offset, end: e.Offset + e.Length, entries: []*archive.Entry{e}}
}

// add extends the run with an entry of its archive if the entry lies close
// enough after the run's start and the run stays short enough. An entry
// before the start (a manifest whose offsets go backwards) is refused, and
// the caller starts a new run: correctness never depends on the order.
func (rn *run) add(e *archive.Entry) bool {
	end := e.Offset + e.Length
	if e.Offset < rn.start || e.Offset > rn.end+maxGap || max(end, rn.end)-rn.start > maxRun || len(rn.entries) >= maxRunFiles {
		return false
	}
	rn.end = max(rn.end, end)
	rn.entries = append(rn.entries, e)
	return true
}

// runBuilder groups the file entries of one manifest pass into runs: each
// archive has one open run that grows until the next entry is too far or
// the run too long, and is then handed to dispatch.
type runBuilder struct {
	open     map[string]*run
	dispatch func(*run)
}

func newRunBuilder(dispatch func(*run)) *runBuilder {
	return &runBuilder{open: map[string]*run{}, dispatch: dispatch}
}

func (b *runBuilder) add(e *archive.Entry) {
	if cur := b.open[e.Archive]; cur == nil || !cur.add(e) {
		if cur != nil {
			b.dispatch(cur)
		}
		b.open[e.Archive] = newRun(e)
	}
}

// flush dispatches the remaining runs, in archive order.
func (b *runBuilder) flush() {
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

// errMissing is wrapped (with archive.ErrCorrupt) by the error of a run
// whose archive is not in the store.
var errMissing = errors.New("is missing")

// fetcher reads runs of archive bytes and hands the content of every file
// to file, which must read e.Size bytes from src and check them (see
// readChecked): the restore writes them into its staging tree, a verify
// only hashes them.
type fetcher struct {
	store   store.Store
	fetched *atomic.Int64 // compressed bytes read
	file    func(e *archive.Entry, src io.Reader) error
	verb    string // what file does, for messages: "restore", "check"
	note    string // appended to every error ("; nothing was changed in the home")
}

// run reads one range and consumes the files it holds. Entries whose
// bytes start in the same frame are decoded together; the compressed
// bytes between such groups are skipped without decoding, and each group
// may decode only what its entries account for (archive.MaxDecoded), so a
// crafted range cannot make a restore decode more than an honest one.
func (f *fetcher) run(ctx context.Context, rn *run) error {
	key := repo.ArchiveKey(rn.archive)
	where := fmt.Sprintf("%s (bytes %d-%d)", repo.Name(f.store, key), rn.start, rn.end-1)
	rc, err := f.store.Get(ctx, key, rn.start, rn.end-rn.start)
	if err != nil {
		if errors.Is(err, store.ErrNotExist) {
			return fmt.Errorf("%w store: archive %s %w (needed for %s)%s", archive.ErrCorrupt, repo.Name(f.store, key), errMissing, rn.entries[0].Path, f.note)
		}
		return fmt.Errorf("read %s: %w%s", where, err, f.note)
	}
	defer rc.Close()
	src := &countingReader{r: rc, n: f.fetched}
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
			return fmt.Errorf("%w archive %s: %q starts inside the bytes of an earlier file%s", archive.ErrCorrupt, where, group[0].Path, f.note)
		}
		if _, err := io.CopyN(io.Discard, src, off-pos); err != nil {
			return fmt.Errorf("read %s: %w%s", where, err, f.note)
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
			return fmt.Errorf("read %s: %w%s", where, err, f.note)
		}
		pos = end
	}
	return ctx.Err()
}

// group decodes the entries whose first frame starts at the same offset.
func (f *fetcher) group(section io.Reader, group []*archive.Entry, where string) error {
	var size int64
	want := make(map[string]*archive.Entry, len(group))
	for _, e := range group {
		want[e.Path] = e
		size += e.Size
	}
	tr, err := archive.NewRangeReader(section, archive.MaxDecoded(len(group), size))
	if err != nil {
		return fmt.Errorf("read %s: %w%s", where, err, f.note)
	}
	defer tr.Close()
	for len(want) > 0 {
		hdr, err := tr.Next()
		if err != nil && tr.SourceErr() != nil {
			return fmt.Errorf("read %s: %w%s", where, tr.SourceErr(), f.note)
		}
		if err != nil {
			missing := ""
			for p := range want {
				missing = p
				break
			}
			if tr.Exceeded() {
				return fmt.Errorf("%w (looking for %q in %s)%s", archive.ErrTooLarge, missing, where, f.note)
			}
			return fmt.Errorf("%w archive %s: %v before %q was found%s", archive.ErrCorrupt, where, err, missing, f.note)
		}
		e, ok := want[hdr.Name]
		if !ok {
			continue
		}
		delete(want, hdr.Name)
		if hdr.Typeflag != '0' || hdr.Size != e.Size {
			return fmt.Errorf("%w archive %s: %q is type %q size %d, manifest says a file of %d bytes", archive.ErrCorrupt, where, e.Path, hdr.Typeflag, hdr.Size, e.Size)
		}
		if err := f.file(e, tr); err != nil {
			if serr := tr.SourceErr(); serr != nil {
				err = serr // a failed read, not a damaged archive
			}
			return fmt.Errorf("%s %s from %s: %w%s", f.verb, e.Path, where, err, f.note)
		}
	}
	return nil
}

// readChecked reads e's e.Size bytes of content from src (nil: none),
// hands them to sink (nil: they are only hashed) and checks their hash
// against the manifest's.
func readChecked(src io.Reader, e *archive.Entry, sink func([]byte) error) error {
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

// writeFile creates a staged file with content from src (nil: empty),
// checks its hash and applies its metadata. It works on the raw descriptor:
// at hundreds of thousands of files, every avoided syscall counts.
func (r *restorer) writeFile(rel string, e *archive.Entry, src io.Reader) error {
	fd, err := unix.Openat(r.tree, rel, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(e.Mode.Perm()))
	if err != nil {
		return err
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	if err := readChecked(src, e, func(b []byte) error { return writeAll(fd, b) }); err != nil {
		return err
	}
	if uid, gid, ok := r.owner(e); ok && (uid != 0 || gid != 0) {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
	}
	// open() applied the umask; the entry filter dropped setuid/setgid.
	if e.Mode != e.Mode.Perm()&^r.umask {
		if err := unix.Fchmod(fd, unixMode(e.Mode)); err != nil {
			return err
		}
	}
	if err := futimens(fd, e.MTime); err != nil {
		return err
	}
	err = unix.Close(fd)
	fd = -1
	if err == nil {
		done(r.o.Progress, e)
	}
	return err
}

// owner returns the ids to give what the restore writes: --chown's, or
// the snapshot's when running as root; ok is false when owners are left
// to the process.
func (r *restorer) owner(e *archive.Entry) (uid, gid int, ok bool) {
	if r.o.Chown != nil {
		return r.o.Chown.UID, r.o.Chown.GID, true
	}
	return e.UID, e.GID, r.root
}

// setMeta applies owner, mode (not for symlinks) and mtime to rel below
// dir, without following a final symlink.
func (r *restorer) setMeta(dir int, rel string, e *archive.Entry, link bool) error {
	if uid, gid, ok := r.owner(e); ok {
		if err := unix.Fchownat(dir, rel, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if !link {
		// After chown: chown clears setuid/setgid bits.
		if err := unix.Fchmodat(dir, rel, unixMode(e.Mode), 0); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.MTime), unix.NsecToTimespec(e.MTime)}
	return unix.UtimesNanoAt(dir, rel, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// sameMeta reports whether a home path has e's mode, mtime and (when the
// restore sets owners) owner.
func (r *restorer) sameMeta(st *unix.Stat_t, e *archive.Entry) bool {
	if uid, gid, ok := r.owner(e); ok && (int(st.Uid) != uid || int(st.Gid) != gid) {
		return false
	}
	if e.Type != archive.TypeSymlink && scan.Mode(uint32(st.Mode)) != e.Mode {
		return false
	}
	return st.Mtim.Nano() == e.MTime
}

// sameEntry reports whether a home file or symlink already is e, judged by
// metadata: type, size, mode, mtime, owner, link target.
func (r *restorer) sameEntry(st *unix.Stat_t, e *archive.Entry) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return e.Type == archive.TypeFile && st.Size == e.Size && r.sameMeta(st, e)
	case unix.S_IFLNK:
		if e.Type != archive.TypeSymlink || !r.sameMeta(st, e) {
			return false
		}
		link, err := homefs.Dir(r.home).Readlink(e.Path)
		return err == nil && link == e.Link
	}
	return false
}

// sameContent reports whether a home file's bytes hash to e's.
func (r *restorer) sameContent(e *archive.Entry) (bool, error) {
	var st unix.Stat_t
	fd, err := homefs.Dir(r.home).OpenRegular(e.Path, &st)
	if err != nil || st.Size != e.Size {
		return false, nil // replaced below
	}
	f := os.NewFile(uintptr(fd), r.abs(e.Path))
	defer f.Close()
	h := sha256.New()
	if n, err := io.CopyN(h, f, e.Size+1); err != nil && err != io.EOF {
		return false, fmt.Errorf("read %s: %w", f.Name(), err)
	} else if n != e.Size { // changed since the stat
		return false, nil
	}
	var sum archive.Hash
	h.Sum(sum[:0])
	return e.Hash != nil && sum == *e.Hash, nil
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

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
