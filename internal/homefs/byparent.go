package homefs

import "golang.org/x/sys/unix"

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

// setMetaByParent is SetMeta without O_PATH: on the inode opened (for
// reading, never following a symlink) in rel's opened parent, or, when it
// cannot be opened (a symlink, a file a non-root restore cannot read, a
// socket), by its name there with AT_SYMLINK_NOFOLLOW. Times are always
// set by name (there is no portable futimens), after checking that the
// name is still the inode changed. What is done by name is checked just
// before, not on a descriptor: a swap in between is not excluded there.
func (d Dir) setMetaByParent(rel string, m Meta) error {
	p, name, err := d.Parent(rel)
	if err != nil {
		return err
	}
	defer p.Close()
	var st unix.Stat_t
	fd, err := unix.Openat(int(p), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		defer unix.Close(fd)
		err = unix.Fstat(fd, &st)
	} else {
		fd = -1
		err = unix.Fstatat(int(p), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err == nil {
		err = checkLinks(&st)
	}
	if err != nil {
		return err
	}
	typ := st.Mode & unix.S_IFMT
	if m.Mode != nil && typ == unix.S_IFLNK {
		return unix.ELOOP
	}
	if m.Owner != nil {
		if fd >= 0 {
			err = unix.Fchown(fd, m.Owner.UID, m.Owner.GID)
		} else {
			err = unix.Fchownat(int(p), name, m.Owner.UID, m.Owner.GID, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return err
		}
	}
	if m.Mode != nil {
		mode := m.Mode(typ == unix.S_IFDIR)
		if fd >= 0 {
			err = unix.Fchmod(fd, mode)
		} else {
			err = unix.Fchmodat(int(p), name, mode, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return err
		}
	}
	if m.Times == nil {
		return nil
	}
	var now unix.Stat_t
	if err := unix.Fstatat(int(p), name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if now.Dev != st.Dev || now.Ino != st.Ino {
		return unix.ENOENT // replaced meanwhile
	}
	if err := checkLinks(&now); err != nil {
		return err
	}
	return unix.UtimesNanoAt(int(p), name, m.Times, unix.AT_SYMLINK_NOFOLLOW)
}
