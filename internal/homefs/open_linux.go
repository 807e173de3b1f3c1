package homefs

import (
	"errors"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// searchDir returns the flags that open a directory only to resolve names
// beneath it.
func searchDir() int {
	if noOPath {
		return portableSearchDir
	}
	return unix.O_PATH | unix.O_DIRECTORY
}

// noOPath makes tests take the path of systems without openat2 and O_PATH
// (macOS): the walk, and rel's parent's descriptor instead of rel's own.
var noOPath bool

// noOpenat2 is set once openat2 turned out to be unavailable: the kernel
// lacks it (ENOSYS, before 5.6) or a seccomp profile refuses it (EPERM:
// container runtimes' default profiles before they allowed it).
var noOpenat2 atomic.Bool

// openat2Errno, when set, is what openat2 fails with in tests (ENOSYS: an
// old kernel; EPERM: a seccomp profile). (A replaceable function would make
// every OpenHow escape to the heap: an allocation per file of a snapshot.)
var openat2Errno unix.Errno

// renameNoReplaceUnsupported makes tests take RenameNoReplace's path for
// filesystems that refuse RENAME_NOREPLACE.
var renameNoReplaceUnsupported bool

// OpenRaw opens rel beneath d with flags (O_CLOEXEC is added; O_CREAT is
// not allowed: see WriteFile) and returns the raw descriptor. With
// O_PATH|O_NOFOLLOW a symlink as the last component is opened itself;
// otherwise any symlink on the way fails with ELOOP.
func (d Dir) OpenRaw(rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_CLOEXEC
	if noOpenat2.Load() || noOPath {
		return d.walk(rel, flags)
	}
	how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	for try := 0; ; try++ {
		fd, err := openat2(int(d), rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM) && openat2Refused(int(d)):
			noOpenat2.Store(true)
			return d.walk(rel, flags)
		case (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN)) && try < 16:
			// EAGAIN: a rename raced the lookup; the kernel asks to retry.
		default:
			return -1, err
		}
	}
}

func openat2(dir int, rel string, how *unix.OpenHow) (int, error) {
	if openat2Errno != 0 {
		return -1, openat2Errno
	}
	return unix.Openat2(dir, rel, how)
}

// openat2Refused tells a seccomp profile that refuses openat2 itself
// (EPERM for every call) from an EPERM about one path: it asks for the
// directory dir itself, which the caller holds open, so only a refused
// system call can fail.
func openat2Refused(dir int) bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	fd, err := openat2(dir, ".", &how)
	if err == nil {
		unix.Close(fd)
	}
	return errors.Is(err, unix.EPERM)
}

// Lstat returns rel's metadata without following it.
func (d Dir) Lstat(rel string, st *unix.Stat_t) error {
	if noOPath {
		return d.lstatByParent(rel, st)
	}
	fd, err := d.OpenRaw(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fstat(fd, st)
}

// inode opens rel itself (O_PATH: a symlink is opened, not followed) to
// change its metadata, fills st, and refuses a hard-linked inode. The
// check is on the opened inode, which every change then acts on: a name
// swapped for a link afterwards changes nothing of it.
func (d Dir) inode(rel string, st *unix.Stat_t) (int, error) {
	fd, err := d.OpenRaw(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return -1, err
	}
	if err = unix.Fstat(fd, st); err == nil {
		err = checkLinks(st)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// ChmodFunc is Chmod with the mode chosen by whether rel is a directory,
// as seen on the inode it changes: a file swapped in for a directory
// meanwhile cannot be given the directory's mode (its setgid bit, say).
func (d Dir) ChmodFunc(rel string, mode func(isDir bool) uint32) error {
	return d.SetMeta(rel, Meta{Mode: mode})
}

// SetMeta sets rel's owner, then its mode (after chown, which clears
// setuid and setgid), then its times, all on the one inode opened beneath
// d, a symlink's own when rel is one (which has no mode: see Meta). It refuses, changing nothing, an
// inode that is not a directory and has more than one link
// (ErrHardLinked).
func (d Dir) SetMeta(rel string, m Meta) error {
	if noOPath {
		return d.setMetaByParent(rel, m)
	}
	var st unix.Stat_t
	fd, err := d.inode(rel, &st)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	typ := st.Mode & unix.S_IFMT
	if m.Mode != nil && typ == unix.S_IFLNK {
		return unix.ELOOP
	}
	if m.Owner != nil {
		if err := unix.Fchownat(fd, "", m.Owner.UID, m.Owner.GID, unix.AT_EMPTY_PATH); err != nil {
			return err
		}
	}
	if m.Mode != nil {
		if err := fchmodPath(fd, m.Mode(typ == unix.S_IFDIR)); err != nil {
			return err
		}
	}
	if m.Times != nil {
		return d.utimesPath(fd, &st, rel, m.Times)
	}
	return nil
}

// fchmodPath changes the mode of an O_PATH descriptor's inode, which
// fchmod refuses: fchmodat2 (Linux 6.6) or, before it, the descriptor's
// /proc link, which names that inode and no path.
func fchmodPath(fd int, mode uint32) error {
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
	}
	return err
}

// utimesPath sets the times of an O_PATH descriptor's inode (st, at rel
// beneath d): utimensat with AT_EMPTY_PATH or, on kernels that refuse it
// there, the descriptor's /proc link. That link would lead through a
// symlink, so a symlink's times are then set by its name in its parent,
// if the name is still that inode and not hard-linked (the one check here
// not made on the descriptor itself: on old kernels, and for symlinks).
func (d Dir) utimesPath(fd int, st *unix.Stat_t, rel string, ts []unix.Timespec) error {
	err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), ts, 0)
	}
	p, name, err := d.Parent(rel)
	if err != nil {
		return err
	}
	defer p.Close()
	var now unix.Stat_t
	if err := unix.Fstatat(int(p), name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if now.Dev != st.Dev || now.Ino != st.Ino {
		return unix.ENOENT // replaced since it was opened
	}
	if err := checkLinks(&now); err != nil {
		return err
	}
	return unix.UtimesNanoAt(int(p), name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// renameNoReplace renames with RENAME_NOREPLACE, or by a check where the
// filesystem refuses it.
func renameNoReplace(fp int, fname string, tp int, tname string) error {
	err := error(unix.EINVAL)
	if !renameNoReplaceUnsupported && !noOPath {
		err = unix.Renameat2(fp, fname, tp, tname, unix.RENAME_NOREPLACE)
	}
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	return renameNoReplaceByCheck(fp, fname, tp, tname)
}
