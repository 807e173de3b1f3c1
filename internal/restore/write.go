package restore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
)

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
	if err := fetch.ReadChecked(src, e, func(b []byte) error { return writeAll(fd, b) }); err != nil {
		return err
	}
	r.wb.wrote(e.Size)
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
		fetch.Done(r.o.Progress, e)
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

// sameContent reports whether a home file's bytes hash to e's. A file
// with another name (Nlink, on the opened descriptor) is never the same:
// the commit would fix its metadata on an inode it shares.
func (r *restorer) sameContent(e *archive.Entry) (bool, error) {
	var st unix.Stat_t
	fd, err := homefs.Dir(r.home).OpenRegular(e.Path, &st)
	if err != nil {
		return false, nil // replaced below
	}
	if st.Size != e.Size || st.Nlink > 1 {
		unix.Close(fd)
		return false, nil
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
