package homefs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Where there is no O_PATH (macOS), what Linux does on an O_PATH
// descriptor of rel is done in rel's parent, opened beneath the directory
// like every path. Built everywhere, so that Linux tests check it too.

// portableSearchDir opens a directory to resolve names beneath it where
// there is no O_PATH: for reading, and O_NONBLOCK so that a FIFO swapped in
// cannot block the open.
const portableSearchDir = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK

// lstatByParent is Lstat without O_PATH: fstatat in rel's opened parent.
func (d Dir) lstatByParent(rel string, st *unix.Stat_t) error {
	p, name, err := d.Parent(rel)
	if err != nil {
		return err
	}
	defer p.Close()
	return unix.Fstatat(int(p), name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// chmodByParent is ChmodFunc without O_PATH: on the inode opened (for
// reading, never following a symlink) in rel's opened parent, or, when it
// cannot be opened, by its name there with AT_SYMLINK_NOFOLLOW.
func (d Dir) chmodByParent(rel string, mode func(isDir bool) uint32) error {
	p, name, err := d.Parent(rel)
	if err != nil {
		return err
	}
	defer p.Close()
	var st unix.Stat_t
	fd, err := unix.Openat(int(p), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		return unix.Fchmod(fd, mode(st.Mode&unix.S_IFMT == unix.S_IFDIR))
	case errors.Is(err, unix.ELOOP):
		return err
	}
	// Unreadable (mode 0 from a snapshot) or not openable (a socket): by
	// name in the opened parent, never following a symlink.
	if err := unix.Fstatat(int(p), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	return unix.Fchmodat(int(p), name, mode(st.Mode&unix.S_IFMT == unix.S_IFDIR), unix.AT_SYMLINK_NOFOLLOW)
}

// chownByParent is Chown without O_PATH: fchownat in rel's opened parent,
// with AT_SYMLINK_NOFOLLOW.
func (d Dir) chownByParent(rel string, uid, gid int) error {
	p, name, err := d.Parent(rel)
	if err != nil {
		return err
	}
	defer p.Close()
	return unix.Fchownat(int(p), name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}
